//! UnrollLoop: loops of kind `unrolled` with a constant extent become their bodies repeated
//! with the loop variable replaced by each value; small constant serial loops are unrolled
//! automatically when the context asks for it (TVM's `UnrollLoop` config):
//!
//! - `tir.UnrollLoop.auto_max_step` (default 0, off): a serial loop nest whose total number of
//!   unrolled statements (extent times the statements of the body) is at most this is unrolled,
//! - `tir.UnrollLoop.auto_max_depth` (default 8): ... if it has at most this many loop levels,
//! - `tir.UnrollLoop.auto_max_extent` (default 0): a serial loop with a constant extent up to
//!   this is unrolled whatever its body.
//!
//! An `unrolled` loop with a non-constant extent becomes serial.

use super::{prim_func_pass, Pass};
use crate::expr::PrimExpr;
use crate::mutator::{mutate_stmt_children, substitute_stmt, ExprMutator, StmtMutator};
use crate::stmt::{ForKind, ForObj, Stmt, StmtKind, StmtObj};
use std::collections::HashMap;

/// Configuration of [`unroll_stmt`].
#[derive(Clone, Copy, Debug)]
pub struct UnrollConfig {
    /// Unroll serial nests of at most this many statements (0: off).
    pub auto_max_step: i64,
    /// ... and at most this many loop levels.
    pub auto_max_depth: i64,
    /// Unroll serial loops with a constant extent up to this (0: off).
    pub auto_max_extent: i64,
}

impl Default for UnrollConfig {
    fn default() -> Self {
        UnrollConfig {
            auto_max_step: 0,
            auto_max_depth: 8,
            auto_max_extent: 0,
        }
    }
}

/// The UnrollLoop pass (`tir.UnrollLoop`, opt level 0); reads its config from the context.
pub fn unroll_loop() -> Pass {
    prim_func_pass("tir.UnrollLoop", 0, |f, ctx| {
        let cfg = UnrollConfig {
            auto_max_step: ctx.config_int("tir.UnrollLoop.auto_max_step", 0),
            auto_max_depth: ctx.config_int("tir.UnrollLoop.auto_max_depth", 8),
            auto_max_extent: ctx.config_int("tir.UnrollLoop.auto_max_extent", 0),
        };
        let body = unroll_stmt(f.body(), cfg);
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// Unrolls the loops of `s` (see the module docs).
pub fn unroll_stmt(s: &Stmt, cfg: UnrollConfig) -> Stmt {
    Unroller {
        cfg,
        steps: 0,
        depth: 0,
    }
    .mutate_stmt(s)
}

struct Unroller {
    cfg: UnrollConfig,
    /// Statements in the last rewritten subtree (for the auto rule).
    steps: i64,
    /// Loop levels in the last rewritten subtree.
    depth: i64,
}

impl ExprMutator for Unroller {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

/// The body repeated for each value of the loop variable.
pub fn unroll_for(f: &ForObj) -> Option<Stmt> {
    let ext = f.extent.as_int()?;
    let min = f.min.clone();
    let seq = (0..ext)
        .map(|k| {
            let v = crate::arith::simplify(&(&min + PrimExpr::const_int(min.dtype(), k)));
            let map: HashMap<_, _> = [(f.loop_var.clone(), v)].into_iter().collect();
            substitute_stmt(&f.body, &map)
        })
        .collect();
    Some(Stmt::seq(seq))
}

impl StmtMutator for Unroller {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.kind() {
            StmtKind::For(f) => {
                let body = self.mutate_stmt(&f.body);
                let (inner_steps, inner_depth) = (self.steps, self.depth);
                let ext = f.extent.as_int();
                let rebuilt = |kind: ForKind| {
                    Stmt::from_node(ForObj {
                        parent: StmtObj {},
                        loop_var: f.loop_var.clone(),
                        min: f.min.clone(),
                        extent: f.extent.clone(),
                        kind,
                        body: body.clone(),
                        annotations: f.annotations.clone(),
                    })
                };
                let auto = f.kind == ForKind::Serial
                    && ext.is_some_and(|e| {
                        (self.cfg.auto_max_step > 0
                            && e.saturating_mul(inner_steps) <= self.cfg.auto_max_step
                            && inner_depth < self.cfg.auto_max_depth)
                            || (e <= self.cfg.auto_max_extent)
                    });
                self.steps = ext.unwrap_or(i64::MAX / 4).saturating_mul(inner_steps);
                self.depth = inner_depth + 1;
                if f.kind == ForKind::Unrolled || auto {
                    match ext {
                        Some(_) => {
                            self.depth = inner_depth;
                            let node = rebuilt(f.kind);
                            let StmtKind::For(nf) = node.kind() else {
                                unreachable!()
                            };
                            unroll_for(nf).expect("constant extent")
                        }
                        None => rebuilt(ForKind::Serial),
                    }
                } else if body.same_as(&f.body) {
                    s.clone()
                } else {
                    rebuilt(f.kind)
                }
            }
            StmtKind::Seq(q) => {
                let (mut steps, mut depth) = (0i64, 0i64);
                let new: Vec<Stmt> = q
                    .seq
                    .iter()
                    .map(|x| {
                        let y = self.mutate_stmt(x);
                        steps = steps.saturating_add(self.steps);
                        depth = depth.max(self.depth);
                        y
                    })
                    .collect();
                self.steps = steps;
                self.depth = depth;
                if new.iter().zip(q.seq.iter()).all(|(a, b)| a.same_as(b)) {
                    s.clone()
                } else {
                    Stmt::seq_raw(new)
                }
            }
            StmtKind::BufferStore(_) | StmtKind::Evaluate(_) => {
                self.steps = 1;
                self.depth = 0;
                s.clone()
            }
            _ => {
                let out = mutate_stmt_children(self, s);
                // Wrappers (let, if, allocate, ...) count as one more step.
                self.steps = self.steps.saturating_add(1);
                out
            }
        }
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

    fn mul(a: i64, b: i64) -> PrimExpr {
        PrimExpr::binary_raw(BinOp::Mul, PrimExpr::i32(a), PrimExpr::i32(b))
    }

    #[test]
    fn explicit_and_auto_unroll() {
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(16)]);
        let (i, j) = (Var::int32("i"), Var::int32("j"));
        let s = Stmt::for_loop(&i, 1, 3, ForKind::Unrolled, a.store(1.0, vec![&i * 2]));
        let out = unroll_stmt(&s, UnrollConfig::default());
        let expected = Stmt::seq(vec![
            a.store(1.0, vec![mul(1, 2)]),
            a.store(1.0, vec![mul(2, 2)]),
            a.store(1.0, vec![mul(3, 2)]),
        ]);
        assert_structural_equal(&out, &expected);

        let serial = Stmt::for_loop(&j, 0, 2, ForKind::Serial, a.store(2.0, vec![j.to_expr()]));
        assert!(unroll_stmt(&serial, UnrollConfig::default()).same_as(&serial));
        let cfg = UnrollConfig {
            auto_max_step: 4,
            ..Default::default()
        };
        let expected = Stmt::seq(vec![
            a.store(2.0, vec![PrimExpr::i32(0)]),
            a.store(2.0, vec![PrimExpr::i32(1)]),
        ]);
        assert_structural_equal(&unroll_stmt(&serial, cfg), &expected);
        let nest = Stmt::for_loop(&i, 0, 8, ForKind::Serial, serial.clone());
        let out = unroll_stmt(&nest, cfg);
        // The inner loop (2 steps) unrolls; the outer (16 steps) stays.
        let StmtKind::For(f) = out.kind() else {
            panic!("{out}")
        };
        assert_structural_equal(&f.body, &expected);

        let n = Var::int32("n");
        let sym = Stmt::for_loop(
            &i,
            0,
            &n,
            ForKind::Unrolled,
            a.store(1.0, vec![i.to_expr()]),
        );
        assert_eq!(loop_kind(&unroll_stmt(&sym, cfg)), ForKind::Serial);
    }
}
