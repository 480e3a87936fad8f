//! VectorizeLoop: a loop of kind `vectorized` with a constant extent `lanes` becomes vector
//! code: the loop variable becomes `Ramp(min, 1, lanes)`, expressions that depend on it
//! become vectors (`ramp + scalar` and `ramp * scalar` stay ramps, other scalars are
//! broadcast), loads and stores take vector indices, lets bind vector variables.
//!
//! A `tir.if_then_else` whose condition does not depend on the loop variable, or holds for
//! whole vectors (`base + lane < bound` with `base` and `bound` multiples of the lanes: the
//! inputs of a concatenation along its innermost axis), chooses between vectors (still
//! evaluating one side only). One whose condition depends on the lane becomes a vector
//! `if_then_else` when both sides are [`maskable`]: code generation evaluates each side under
//! the lanes that choose it, its loads masked (a padding stage reading the interior of a row,
//! zeros at its edges, is vector code with masked loads instead of a loop of branches).
//!
//! Correctness first: when the body holds something this pass does not turn into vectors — an
//! inner loop, an allocation, an `if` whose condition depends on the loop variable, a store
//! that does not depend on it, a vector index in a non-last dimension, a call other than a
//! float math intrinsic with vector arguments — the loop becomes a serial loop instead.
//! Non-constant extents also give a serial loop. `tir.disable_vectorize` in the context makes
//! every vectorized loop serial.

use super::{prim_func_pass, Pass};
use crate::dtype::DataTypeExt;
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
                    let stride = product(stride, &b);
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
                    let stride = product(&a, stride);
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
            ExprKind::Call { op, args } if op == op::IF_THEN_ELSE && args.len() == 3 => {
                // A choice the whole vector makes alike (its condition does not depend on
                // the lane, or holds for whole vectors): one branch of vectors, only the
                // chosen side evaluated.
                let c = match self.whole_vector_lt(&args[0]) {
                    Some(c) => c,
                    None => self.expr(&args[0])?,
                };
                let (x, y) = (self.expr(&args[1])?, self.expr(&args[2])?);
                let lanes = lanes_of(&c).max(lanes_of(&x)).max(lanes_of(&y));
                if lanes == 1 {
                    return Some(PrimExpr::call(e.dtype(), op, vec![c, x, y]));
                }
                let t = e.dtype().with_lanes(lanes as u16);
                if lanes_of(&c) == 1 {
                    let (x, y) = (self.broadcast(x, lanes), self.broadcast(y, lanes));
                    return Some(PrimExpr::call(t, op, vec![c, x, y]));
                }
                // A per-lane choice: each side evaluated under the lanes choosing it, which
                // code generation does with masked loads.
                if !(maskable(&x) && maskable(&y)) {
                    return None;
                }
                let a = [c, x, y].map(|v| self.broadcast(v, lanes)).to_vec();
                PrimExpr::call(t, op, a)
            }
            ExprKind::Call { op, args } => {
                let a = self.exprs(args)?;
                let lanes = a.iter().map(lanes_of).max().unwrap_or(1);
                if lanes == 1 {
                    return Some(PrimExpr::call(e.dtype(), op, a));
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

    /// An `if`'s condition as vector code: `likely(c)` stays a hint for a condition alike in
    /// every lane and is dropped for a per-lane one (a predicate).
    fn condition(&mut self, cond: &PrimExpr) -> Option<PrimExpr> {
        if let ExprKind::Call { op, args: [inner] } = cond.kind() {
            if op == op::LIKELY {
                let c = self.expr(inner)?;
                return Some(if lanes_of(&c) == 1 { op::likely(c) } else { c });
            }
        }
        self.expr(cond)
    }

    /// A split's guard `likely(base + lane < bound)` that holds for all lanes or none: `base`
    /// and `bound` multiples of the lane count (a tile of whole vectors, its last one past a
    /// plane of whole vectors), as the scalar `likely(base < bound)`.
    fn whole_vector_guard(&mut self, cond: &PrimExpr) -> Option<PrimExpr> {
        let ExprKind::Call { op, args } = cond.kind() else {
            return None;
        };
        let [inner] = args else { return None };
        if op != op::LIKELY {
            return None;
        }
        self.whole_vector_lt(inner).map(op::likely)
    }

    /// A comparison `base + lane < bound` that holds for all lanes or none (`base` and `bound`
    /// multiples of the lane count), as the scalar `base < bound`: the choice between the
    /// inputs of a concatenation along its innermost axis at offsets of whole vectors.
    fn whole_vector_lt(&mut self, cond: &PrimExpr) -> Option<PrimExpr> {
        let ExprKind::Binary(BinOp::Lt, a, b) = cond.kind() else {
            return None;
        };
        let (va, vb) = (self.expr(a)?, self.expr(b)?);
        let ExprKind::Ramp {
            base,
            stride,
            lanes,
        } = va.kind()
        else {
            return None;
        };
        let bound = vb.as_int()?;
        let whole = stride.is_const_int(1) && bound % lanes == 0 && multiple_of(base, lanes);
        whole.then(|| base.clone().lt(vb))
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
                // `a && b` without an else: `if a { if b { .. } }`, the condition alike in
                // every lane outside, so the other stays a per-lane predicate (a last tile of
                // both rows and columns: `likely(row < 26) && likely(col < 97)`).
                if let (ExprKind::Binary(BinOp::And, a, b), None) =
                    (i.condition.kind(), &i.else_case)
                {
                    let uniform = |this: &mut Self, c: &PrimExpr| {
                        this.condition(c).is_some_and(|v| lanes_of(&v) == 1)
                    };
                    let (outer, inner) = if uniform(self, a) {
                        (a, b)
                    } else if uniform(self, b) {
                        (b, a)
                    } else {
                        return None;
                    };
                    let nested = Stmt::if_then_else_raw(
                        outer.clone(),
                        Stmt::if_then_else_raw(inner.clone(), i.then_case.clone(), None),
                        None,
                    );
                    return self.stmt(&nested);
                }
                let c = match self.whole_vector_guard(&i.condition) {
                    Some(c) => c,
                    None => self.condition(&i.condition)?,
                };
                if lanes_of(&c) != 1 {
                    // A per-lane condition predicates the lanes of the stores it guards.
                    if i.else_case.is_some() {
                        return None;
                    }
                    let t = self.stmt(&i.then_case)?;
                    if predicable(&t, false) {
                        return Some(Stmt::if_then_else_raw(c, t, None));
                    }
                    // Loads of one address (a weight broadcast to every lane) are not per
                    // lane: they run where the scalar loop ran them, under some lane holding.
                    let first = first_lane_guard(&c)?;
                    return predicable(&t, true).then(|| {
                        let inner = Stmt::if_then_else_raw(c, t, None);
                        Stmt::if_then_else_raw(op::likely(first), inner, None)
                    });
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

/// Whether vector expression `e` may be evaluated for lanes whose result is discarded, once
/// its loads are masked to the lanes kept: loads of a ramp index of a small constant stride
/// (whose own index computation is maskable), arithmetic without integer division (a lane's zero divisor would
/// trap), casts, selects, float math and nested `if_then_else`. A load of one scalar index is
/// not: it is not per lane, so no mask guards it.
pub fn maskable(e: &PrimExpr) -> bool {
    maskable_with(e, false)
}

/// [`maskable`], loads of one scalar index also allowed where `scalar_loads` (the vector code
/// runs only when some lane holds, see [`first_lane_guard`]).
fn maskable_with(e: &PrimExpr, scalar_loads: bool) -> bool {
    let maskable = |x: &PrimExpr| maskable_with(x, scalar_loads);
    match e.kind() {
        ExprKind::IntImm(_) | ExprKind::FloatImm(_) | ExprKind::Var(_) => true,
        ExprKind::Binary(op, a, b) => {
            let traps = matches!(
                op,
                BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod
            ) && !e.dtype().is_float()
                && !constant(b);
            !traps && maskable(a) && maskable(b)
        }
        ExprKind::Not(a) | ExprKind::Cast(a) => maskable(a),
        ExprKind::Select { cond, t, f } => maskable(cond) && maskable(t) && maskable(f),
        ExprKind::Ramp { base, stride, .. } => maskable(base) && maskable(stride),
        ExprKind::Broadcast { value, .. } => maskable(value),
        ExprKind::BufferLoad { indices, .. } => {
            let last = indices.last();
            let per_lane = last.is_some_and(strided);
            let scalar = scalar_loads && last.is_some_and(|i| lanes_of(i) == 1);
            (per_lane || scalar) && indices.iter().all(maskable)
        }
        ExprKind::Call { op, args } => {
            let pure = op == op::IF_THEN_ELSE
                || op::FLOAT_UNARY.contains(&op)
                || op::FLOAT_BINARY.contains(&op);
            pure && args.iter().all(maskable)
        }
        _ => false,
    }
}

/// Whether vector statement `s` may run under a per-lane predicate: contiguous vector stores
/// of [`maskable`] values (code generation masks the stores and their loads).
/// With `scalar_loads`, values may also load one scalar address (see [`maskable_with`]).
fn predicable(s: &Stmt, scalar_loads: bool) -> bool {
    match s.kind() {
        StmtKind::BufferStore(st) => {
            st.indices.last().is_some_and(|i| match i.kind() {
                ExprKind::Ramp { stride, .. } => stride.is_const_int(1),
                _ => false,
            }) && st.indices.iter().all(maskable)
                && maskable_with(&st.value, scalar_loads)
        }
        StmtKind::Seq(q) => q.seq.iter().all(|x| predicable(x, scalar_loads)),
        _ => false,
    }
}

/// For a per-lane condition `ramp(base, stride, n) < bound` (or `<=`) with a positive
/// constant stride, as a split's guard is once vectorized: lanes hold in order, so some lane
/// holds exactly when lane 0 does. Returns lane 0's condition, `base < bound`.
fn first_lane_guard(c: &PrimExpr) -> Option<PrimExpr> {
    let ExprKind::Binary(op @ (BinOp::Lt | BinOp::Le), a, b) = c.kind() else {
        return None;
    };
    let ExprKind::Ramp { base, stride, .. } = a.kind() else {
        return None;
    };
    if stride.as_int()? <= 0 {
        return None;
    }
    let bound = match b.kind() {
        ExprKind::Broadcast { value, .. } => value.clone(),
        _ if lanes_of(b) == 1 => b.clone(),
        _ => return None,
    };
    Some(PrimExpr::binary_raw(op, base.clone(), bound))
}

/// Lane `k` (an int32 expression) of vector expression `e` as a scalar expression: how code
/// generators without masked memory operations run predicated vector code lane by lane
/// (loads at one lane's index, so a lane that is not chosen reads nothing). `None` for what
/// has no per-lane form here (a let-bound vector variable, a buffer of vector elements).
pub fn lane(e: &PrimExpr, k: &PrimExpr) -> Option<PrimExpr> {
    if lanes_of(e) == 1 {
        return Some(e.clone());
    }
    Some(match e.kind() {
        ExprKind::Ramp { base, stride, .. } => {
            let kk = PrimExpr::cast_raw(base.dtype(), k.clone());
            let step = PrimExpr::binary_raw(BinOp::Mul, kk, stride.clone());
            PrimExpr::binary_raw(BinOp::Add, base.clone(), step)
        }
        ExprKind::Broadcast { value, .. } => value.clone(),
        ExprKind::Binary(op, a, b) => PrimExpr::binary_raw(op, lane(a, k)?, lane(b, k)?),
        ExprKind::Not(a) => PrimExpr::not_raw(lane(a, k)?),
        ExprKind::Cast(a) => PrimExpr::cast_raw(e.dtype().element_of(), lane(a, k)?),
        ExprKind::Select { cond, t, f } => {
            PrimExpr::select_raw(lane(cond, k)?, lane(t, k)?, lane(f, k)?)
        }
        ExprKind::BufferLoad { buffer, indices } if buffer.dtype().lanes() == 1 => {
            let idx: Option<Vec<_>> = indices.iter().map(|i| lane(i, k)).collect();
            PrimExpr::buffer_load_raw(buffer.clone(), idx?)
        }
        ExprKind::Call { op, args } => {
            let a: Option<Vec<_>> = args.iter().map(|x| lane(x, k)).collect();
            PrimExpr::call(e.dtype().element_of(), op, a?)
        }
        _ => return None,
    })
}

/// A ramp with a constant stride of 1 to [`MAX_MASKED_STRIDE`]: masked, one contiguous load of
/// its span (a masked gather of scattered lanes costs about what a scalar loop does).
fn strided(index: &PrimExpr) -> bool {
    match index.kind() {
        ExprKind::Ramp { stride, .. } => stride
            .as_int()
            .is_some_and(|s| (1..=MAX_MASKED_STRIDE).contains(&s)),
        _ => false,
    }
}

/// The widest ramp stride a masked load reads as one span (code generation's limit too).
pub const MAX_MASKED_STRIDE: i64 = 4;

/// `a * b`, folded when both are integer constants (so a ramp's stride stays a constant the
/// masked loads and code generation recognize).
fn product(a: &PrimExpr, b: &PrimExpr) -> PrimExpr {
    match (a.as_int(), b.as_int()) {
        (Some(x), Some(y)) => PrimExpr::const_int(a.dtype(), x * y),
        _ => PrimExpr::binary_raw(BinOp::Mul, a.clone(), b.clone()),
    }
}

/// Whether integer expression `e` is a multiple of `k` whatever its variables: constants that
/// are, sums and differences of such, products with one such factor.
fn multiple_of(e: &PrimExpr, k: i64) -> bool {
    match e.kind() {
        ExprKind::IntImm(v) => v % k == 0,
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => multiple_of(a, k) && multiple_of(b, k),
        ExprKind::Binary(BinOp::Mul, a, b) => multiple_of(a, k) || multiple_of(b, k),
        _ => false,
    }
}

/// A constant, or a constant in every lane.
fn constant(e: &PrimExpr) -> bool {
    match e.kind() {
        ExprKind::Broadcast { value, .. } => value.is_const(),
        _ => e.is_const(),
    }
}

#[cfg(test)]
mod tests;
