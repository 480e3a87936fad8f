//! VectorizeLoop: a loop of kind `vectorized` with a constant extent `lanes` becomes vector
//! code: the loop variable becomes `Ramp(min, 1, lanes)`, expressions that depend on it
//! become vectors (`ramp + scalar` and `ramp * scalar` stay ramps, other scalars are
//! broadcast), loads and stores take vector indices, lets bind vector variables.
//!
//! A `tir.if_then_else` whose condition does not depend on the loop variable chooses between
//! vectors (still evaluating one side only).
//!
//! Correctness first: when the body holds something this pass does not turn into vectors — an
//! inner loop, an allocation, an `if` whose condition depends on the loop variable, a store
//! that does not depend on it, a vector index in a non-last dimension, a call other than a
//! float math intrinsic with vector arguments — the loop becomes a serial loop instead.
//! Non-constant extents also give a serial loop. `tir.disable_vectorize` in the context makes
//! every vectorized loop serial.

use super::{prim_func_pass, Pass};
use crate::expr::{BinOp, ExprKind, PrimExpr, Var};
use crate::mutator::{mutate_stmt_children, ExprMutator, StmtMutator};
use crate::op;
use crate::stmt::{ForKind, ForObj, LetStmtObj, Stmt, StmtKind, StmtObj};
use std::collections::HashMap;

/// The VectorizeLoop pass (`tir.VectorizeLoop`, opt level 0).
pub fn vectorize_loop() -> Pass {
    prim_func_pass("tir.VectorizeLoop", 0, |f, ctx| {
        let enable = ctx.config_int("tir.disable_vectorize", 0) == 0;
        let body = vectorize_stmt(f.body(), enable);
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// Vectorizes the `vectorized` loops of `s` (or makes them serial when `enable` is false).
pub fn vectorize_stmt(s: &Stmt, enable: bool) -> Stmt {
    LoopVectorizer { enable }.mutate_stmt(s)
}

struct LoopVectorizer {
    enable: bool,
}

impl ExprMutator for LoopVectorizer {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

fn with_kind(f: &ForObj, kind: ForKind, body: Stmt) -> Stmt {
    Stmt::from_node(ForObj {
        parent: StmtObj {},
        loop_var: f.loop_var.clone(),
        min: f.min.clone(),
        extent: f.extent.clone(),
        kind,
        body,
        annotations: f.annotations.clone(),
    })
}

impl StmtMutator for LoopVectorizer {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let StmtKind::For(f) = s.kind() else {
            return mutate_stmt_children(self, s);
        };
        let body = self.mutate_stmt(&f.body);
        if f.kind != ForKind::Vectorized {
            return if body.same_as(&f.body) {
                s.clone()
            } else {
                with_kind(f, f.kind, body)
            };
        }
        let lanes = f
            .extent
            .as_int()
            .filter(|&l| (1..=u16::MAX as i64).contains(&l));
        match lanes {
            Some(lanes) if self.enable => {
                let mut v = Vectorizer {
                    var: f.loop_var.clone(),
                    ramp: if lanes == 1 {
                        f.min.clone()
                    } else {
                        PrimExpr::ramp_raw(
                            f.min.clone(),
                            PrimExpr::const_int(f.min.dtype(), 1),
                            lanes,
                        )
                    },
                    lets: HashMap::new(),
                };
                match v.stmt(&body) {
                    Some(vs) => vs,
                    None => with_kind(f, ForKind::Serial, body),
                }
            }
            _ => with_kind(f, ForKind::Serial, body),
        }
    }
}

/// Turns one loop body into vector code; `None` when it cannot.
struct Vectorizer {
    var: Var,
    ramp: PrimExpr,
    /// Let-bound variables whose values became vectors, and their vector replacements.
    lets: HashMap<Var, Var>,
}

fn lanes_of(e: &PrimExpr) -> i64 {
    e.dtype().lanes() as i64
}

impl Vectorizer {
    fn broadcast(&self, e: PrimExpr, lanes: i64) -> PrimExpr {
        if lanes_of(&e) == lanes {
            e
        } else {
            PrimExpr::broadcast_raw(e, lanes)
        }
    }

    fn binary(&self, op: BinOp, a: PrimExpr, b: PrimExpr) -> Option<PrimExpr> {
        let (la, lb) = (lanes_of(&a), lanes_of(&b));
        if la == lb {
            return Some(PrimExpr::binary_raw(op, a, b));
        }
        if la != 1 && lb != 1 {
            return None;
        }
        let lanes = la.max(lb);
        // Keep ramps: ramp +- scalar and ramp * scalar are ramps.
        if let (ExprKind::Ramp { base, stride, .. }, true) = (a.kind(), lb == 1) {
            match op {
                BinOp::Add | BinOp::Sub => {
                    let base = PrimExpr::binary_raw(op, base.clone(), b.clone());
                    return Some(PrimExpr::ramp_raw(base, stride.clone(), lanes));
                }
                BinOp::Mul => {
                    let base = PrimExpr::binary_raw(op, base.clone(), b.clone());
                    let stride = PrimExpr::binary_raw(op, stride.clone(), b);
                    return Some(PrimExpr::ramp_raw(base, stride, lanes));
                }
                _ => {}
            }
        }
        if let (ExprKind::Ramp { base, stride, .. }, true) = (b.kind(), la == 1) {
            match op {
                BinOp::Add => {
                    let base = PrimExpr::binary_raw(op, a.clone(), base.clone());
                    return Some(PrimExpr::ramp_raw(base, stride.clone(), lanes));
                }
                BinOp::Mul => {
                    let base = PrimExpr::binary_raw(op, a.clone(), base.clone());
                    let stride = PrimExpr::binary_raw(op, a, stride.clone());
                    return Some(PrimExpr::ramp_raw(base, stride, lanes));
                }
                _ => {}
            }
        }
        Some(PrimExpr::binary_raw(
            op,
            self.broadcast(a, lanes),
            self.broadcast(b, lanes),
        ))
    }

    fn exprs(&mut self, l: &[PrimExpr]) -> Option<Vec<PrimExpr>> {
        l.iter().map(|x| self.expr(x)).collect()
    }

    fn expr(&mut self, e: &PrimExpr) -> Option<PrimExpr> {
        Some(match e.kind() {
            ExprKind::IntImm(_) | ExprKind::FloatImm(_) | ExprKind::StringImm(_) => e.clone(),
            ExprKind::Var(v) => {
                if v == self.var {
                    self.ramp.clone()
                } else if let Some(nv) = self.lets.get(&v) {
                    nv.to_expr()
                } else {
                    e.clone()
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                if x.same_as(a) && y.same_as(b) {
                    return Some(e.clone());
                }
                self.binary(op, x, y)?
            }
            ExprKind::Not(a) => PrimExpr::not_raw(self.expr(a)?),
            ExprKind::Cast(a) => {
                let x = self.expr(a)?;
                let t = e.dtype().with_lanes(x.dtype().lanes());
                PrimExpr::cast_raw(t, x)
            }
            ExprKind::Select { cond, t, f } => {
                let (c, x, y) = (self.expr(cond)?, self.expr(t)?, self.expr(f)?);
                let lanes = lanes_of(&c).max(lanes_of(&x)).max(lanes_of(&y));
                if lanes == 1 {
                    PrimExpr::select_raw(c, x, y)
                } else {
                    PrimExpr::select_raw(
                        self.broadcast(c, lanes),
                        self.broadcast(x, lanes),
                        self.broadcast(y, lanes),
                    )
                }
            }
            ExprKind::Let { var, value, body } => {
                let v = self.expr(value)?;
                if lanes_of(&v) == 1 {
                    PrimExpr::let_raw(var.clone(), v, self.expr(body)?)
                } else {
                    let nv = Var::new(var.name(), v.dtype());
                    self.lets.insert(var.clone(), nv.clone());
                    let b = self.expr(body)?;
                    PrimExpr::let_raw(nv, v, b)
                }
            }
            ExprKind::BufferLoad { buffer, indices } => {
                let idx = self.exprs(indices)?;
                let n = idx.len();
                if idx[..n.saturating_sub(1)].iter().any(|i| lanes_of(i) > 1) {
                    return None;
                }
                PrimExpr::buffer_load_raw(buffer.clone(), idx)
            }
            ExprKind::Ramp { .. } | ExprKind::Broadcast { .. } => return None,
            ExprKind::Call { op, args } => {
                let a = self.exprs(args)?;
                let lanes = a.iter().map(lanes_of).max().unwrap_or(1);
                if lanes == 1 {
                    return Some(PrimExpr::call(e.dtype(), op, a));
                }
                // A choice the whole vector makes alike (its condition does not depend on
                // the lane): one branch of vectors, only the chosen side evaluated.
                if op == op::IF_THEN_ELSE && lanes_of(&a[0]) == 1 {
                    let (x, y) = (
                        self.broadcast(a[1].clone(), lanes),
                        self.broadcast(a[2].clone(), lanes),
                    );
                    return Some(PrimExpr::call(
                        e.dtype().with_lanes(lanes as u16),
                        op,
                        vec![a[0].clone(), x, y],
                    ));
                }
                let math = op::FLOAT_UNARY.contains(&op)
                    || op::FLOAT_BINARY.contains(&op)
                    || op::INT_LANEWISE.contains(&op);
                if !math {
                    return None;
                }
                let a = a.into_iter().map(|x| self.broadcast(x, lanes)).collect();
                PrimExpr::call(e.dtype().with_lanes(lanes as u16), op, a)
            }
        })
    }

    fn stmt(&mut self, s: &Stmt) -> Option<Stmt> {
        Some(match s.kind() {
            StmtKind::BufferStore(st) => {
                let value = self.expr(&st.value)?;
                let idx = self.exprs(&st.indices)?;
                let n = idx.len();
                if n == 0 || idx[..n - 1].iter().any(|i| lanes_of(i) > 1) {
                    return None;
                }
                let il = lanes_of(&idx[n - 1]);
                // A store to one address from every lane: not a vector store.
                if il == 1 {
                    return None;
                }
                let vl = lanes_of(&value) / st.buffer.dtype().lanes() as i64;
                if vl != 1 && vl != il {
                    return None;
                }
                let value = if vl == 1 {
                    self.broadcast(value, il * st.buffer.dtype().lanes() as i64)
                } else {
                    value
                };
                Stmt::buffer_store_raw(st.buffer.clone(), value, idx)
            }
            StmtKind::Seq(q) => {
                let v: Option<Vec<Stmt>> = q.seq.iter().map(|x| self.stmt(x)).collect();
                Stmt::seq_raw(v?)
            }
            StmtKind::LetStmt(l) => {
                let v = self.expr(&l.value)?;
                if lanes_of(&v) == 1 {
                    Stmt::from_node(LetStmtObj {
                        parent: StmtObj {},
                        var: l.var.clone(),
                        value: v,
                        body: self.stmt(&l.body)?,
                    })
                } else {
                    let nv = Var::new(l.var.name(), v.dtype());
                    self.lets.insert(l.var.clone(), nv.clone());
                    let body = self.stmt(&l.body)?;
                    Stmt::from_node(LetStmtObj {
                        parent: StmtObj {},
                        var: nv,
                        value: v,
                        body,
                    })
                }
            }
            StmtKind::IfThenElse(i) => {
                let c = self.expr(&i.condition)?;
                if lanes_of(&c) != 1 {
                    return None;
                }
                let t = self.stmt(&i.then_case)?;
                let e = match &i.else_case {
                    Some(e) => Some(self.stmt(e)?),
                    None => None,
                };
                Stmt::if_then_else_raw(c, t, e)
            }
            StmtKind::AttrStmt(_) => {
                let StmtKind::AttrStmt(a) = s.kind() else {
                    unreachable!()
                };
                let body = self.stmt(&a.body)?;
                Stmt::attr(a.node.clone(), &a.attr_key, a.value.clone(), body)
            }
            StmtKind::Evaluate(e) if e.value.is_const() => s.clone(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    fn loop_kind(s: &Stmt) -> ForKind {
        match s.kind() {
            StmtKind::For(f) => f.kind,
            _ => panic!("not a loop: {s}"),
        }
    }

    #[test]
    fn elementwise_becomes_vector_code() {
        let f32 = DataType::float(32);
        let a = Buffer::decl("A", f32, vec![PrimExpr::i32(64)]);
        let c = Buffer::decl("C", f32, vec![PrimExpr::i32(64)]);
        let (io, ii) = (Var::int32("io"), Var::int32("ii"));
        let x = Var::new("x", f32);
        let idx = &io * 4 + &ii;
        let body = Stmt::for_loop(
            &ii,
            0,
            4,
            ForKind::Vectorized,
            c.store(a.load(vec![idx.clone()]) * &x + 1.0, vec![idx]),
        );
        let out = vectorize_stmt(&body, true);
        let ramp = PrimExpr::ramp_raw(
            PrimExpr::binary_raw(BinOp::Add, &io * 4, PrimExpr::i32(0)),
            PrimExpr::i32(1),
            4,
        );
        let load = PrimExpr::buffer_load_raw(a.clone(), vec![ramp.clone()]);
        let value = PrimExpr::binary_raw(
            BinOp::Add,
            PrimExpr::binary_raw(BinOp::Mul, load, PrimExpr::broadcast_raw(x.to_expr(), 4)),
            PrimExpr::broadcast_raw(PrimExpr::f32(1.0), 4),
        );
        let expected = Stmt::buffer_store_raw(c.clone(), value, vec![ramp]);
        assert_structural_equal(&out, &expected);
    }

    #[test]
    fn falls_back_to_serial() {
        let f32 = DataType::float(32);
        let a = Buffer::decl("A", f32, vec![PrimExpr::i32(64)]);
        let (i, j) = (Var::int32("i"), Var::int32("j"));
        // A condition that varies across lanes.
        let cond = Stmt::for_loop(
            &i,
            0,
            4,
            ForKind::Vectorized,
            Stmt::if_then_else(i.lt(2), a.store(1.0, vec![i.to_expr()]), None),
        );
        assert_eq!(loop_kind(&vectorize_stmt(&cond, true)), ForKind::Serial);
        // An inner loop.
        let inner = Stmt::for_loop(
            &i,
            0,
            4,
            ForKind::Vectorized,
            Stmt::for_loop(&j, 0, 2, ForKind::Serial, a.store(1.0, vec![&i * 2 + &j])),
        );
        assert_eq!(loop_kind(&vectorize_stmt(&inner, true)), ForKind::Serial);
        // A store that does not depend on the loop variable (a reduction into one place).
        let red = Stmt::for_loop(
            &i,
            0,
            4,
            ForKind::Vectorized,
            a.store(
                a.load(vec![PrimExpr::i32(0)]) + a.load(vec![&i + 1]),
                vec![PrimExpr::i32(0)],
            ),
        );
        assert_eq!(loop_kind(&vectorize_stmt(&red, true)), ForKind::Serial);
        // Disabled: serial.
        let ok = Stmt::for_loop(
            &i,
            0,
            4,
            ForKind::Vectorized,
            a.store(1.0, vec![i.to_expr()]),
        );
        assert_eq!(loop_kind(&vectorize_stmt(&ok, false)), ForKind::Serial);
        // Scalar condition and math intrinsic: vectorized.
        let n = Var::int32("n");
        let good = Stmt::for_loop(
            &i,
            0,
            8,
            ForKind::Vectorized,
            Stmt::if_then_else(
                n.lt(3),
                a.store(crate::op::exp(a.load(vec![i.to_expr()])), vec![i.to_expr()]),
                None,
            ),
        );
        let out = vectorize_stmt(&good, true);
        assert!(matches!(out.kind(), StmtKind::IfThenElse(_)), "{out}");
        assert!(out.to_string().contains("T.exp"), "{out}");
        // `if_then_else` with a lane-invariant condition (a padding row): one choice of
        // vectors; with a condition on the lane: serial (a load could leave the buffer).
        let pick = |cond: PrimExpr| {
            Stmt::for_loop(
                &i,
                0,
                8,
                ForKind::Vectorized,
                a.store(
                    crate::op::if_then_else(cond, a.load(vec![&i + &n]), PrimExpr::f32(0.0)),
                    vec![i.to_expr()],
                ),
            )
        };
        let out = vectorize_stmt(&pick(n.ge(1)), true);
        assert!(!matches!(out.kind(), StmtKind::For(_)), "{out}");
        let text = out.to_string();
        assert!(
            text.contains("T.if_then_else(n >= 1, A[T.Ramp(0 + n, 1, 8)]"),
            "{text}"
        );
        let per_lane = pick((&i + &n).ge(1));
        assert_eq!(loop_kind(&vectorize_stmt(&per_lane, true)), ForKind::Serial);
    }
}
