//! LoopPartition: a loop whose body is guarded by `if likely(cond)` (what TE's `split` emits
//! when the factor does not divide the extent) is split into a main loop, where the guard
//! always holds and is dropped, and a tail loop that keeps it:
//!
//! ```text
//! for io in range(ceildiv(n, 4)):            for io in range(main):
//!   for ii in range(4):                  =>    for ii in range(4): body
//!     if likely(io * 4 + ii < n): body       for io in range(main, ceildiv(n, 4)):
//!                                              for ii in range(4): if likely(...): body
//! ```
//!
//! The guard is searched through loops, sequences, attributes, buffer declarations,
//! allocations (a `local` accumulator allocated inside the loop) and guards of other loops; of
//! a guard `likely(a) && likely(b)` (two split axes), the conjunct using the loop variable is
//! dropped from the main loop and the other kept. The condition must be
//! `a < b` (or `<=`, `>`, `>=`) with `a - b` linear in the loop variable (constant positive or
//! negative coefficient) and in the loop variables between the loop and the `if` (constant
//! coefficients, ranges independent of the loop variable); `main`
//! is then the last value of the loop variable for which the condition holds at the worst
//! inner values, clamped to the loop's range. Other loops are left alone.

use super::{prim_func_pass, Pass};
use crate::arith::Analyzer;
use crate::dtype::DataTypeExt;
use crate::expr::{floordiv, max, min, BinOp, ExprKind, PrimExpr, Var};
use crate::mutator::{mutate_stmt, mutate_stmt_children, substitute, ExprMutator, StmtMutator};
use crate::op;
use crate::stmt::{ForObj, Stmt, StmtKind, StmtObj};
use crate::visitor::uses_var_where;
use std::collections::HashMap;

/// The LoopPartition pass (`tir.LoopPartition`, opt level 1).
pub fn loop_partition() -> Pass {
    prim_func_pass("tir.LoopPartition", 1, |f, _| {
        let body = partition_stmt(f.body());
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// Partitions the loops of `s` (see the module docs).
pub fn partition_stmt(s: &Stmt) -> Stmt {
    Partitioner.mutate_stmt(s)
}

struct Partitioner;

impl ExprMutator for Partitioner {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

impl StmtMutator for Partitioner {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        if let StmtKind::For(f) = s.kind() {
            if let Some(out) = try_partition(f) {
                return out;
            }
        }
        mutate_stmt_children(self, s)
    }
}

/// The conjuncts of `c` (`a && b && ...`).
fn conjuncts(c: &PrimExpr, out: &mut Vec<PrimExpr>) {
    match c.kind() {
        ExprKind::Binary(BinOp::And, a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        _ => out.push(c.clone()),
    }
}

/// A guard of `v` found by [`find_guard`]: the `if` statement, the guarded condition `cond`
/// (inside its `likely`), and the other conjuncts of the `if`'s condition (`None`: none).
struct Guard {
    stmt: Stmt,
    cond: PrimExpr,
    rest: Option<PrimExpr>,
}

/// The first `if` without else inside `s` one of whose conjuncts is `likely(cond)` with `cond`
/// using `v` (guards on other variables are passed through into their bodies), reached through
/// loops (collected as `(var, min, extent)`), sequences' first guarded statement, lets and
/// attributes.
fn find_guard(s: &Stmt, v: &Var, inner: &mut Vec<(Var, PrimExpr, PrimExpr)>) -> Option<Guard> {
    match s.kind() {
        StmtKind::IfThenElse(i) if i.else_case.is_none() => {
            let mut parts = Vec::new();
            conjuncts(&i.condition, &mut parts);
            let pick = parts.iter().position(|c| match c.kind() {
                ExprKind::Call { op: name, args } if name == op::LIKELY && args.len() == 1 => {
                    crate::visitor::uses_var(&args[0], v)
                }
                _ => false,
            });
            let Some(k) = pick else {
                return find_guard(&i.then_case, v, inner);
            };
            let ExprKind::Call { args, .. } = parts[k].kind() else {
                unreachable!()
            };
            let cond = args[0].clone();
            parts.remove(k);
            let rest = parts.into_iter().reduce(|a, b| a.logical_and(b));
            Some(Guard {
                stmt: s.clone(),
                cond,
                rest,
            })
        }
        StmtKind::For(f) => {
            inner.push((f.loop_var.clone(), f.min.clone(), f.extent.clone()));
            find_guard(&f.body, v, inner)
        }
        StmtKind::Seq(q) => q.seq.iter().find_map(|x| {
            let mut tmp = inner.clone();
            let r = find_guard(x, v, &mut tmp)?;
            *inner = tmp;
            Some(r)
        }),
        StmtKind::AttrStmt(a) => find_guard(&a.body, v, inner),
        StmtKind::DeclBuffer(d) => find_guard(&d.body, v, inner),
        StmtKind::Allocate(a) => find_guard(&a.body, v, inner),
        _ => None,
    }
}

/// `d(e)/d(v)` when `e` is linear in `v` with a constant coefficient.
fn coefficient(an: &mut Analyzer, e: &PrimExpr, v: &Var) -> Option<i64> {
    let at = |k: i64| {
        let map: HashMap<Var, PrimExpr> = [(v.clone(), PrimExpr::const_int(v.dtype(), k))]
            .into_iter()
            .collect();
        substitute(e, &map)
    };
    let (e0, e1, e2) = (at(0), at(1), at(2));
    let c1 = an.simplify(&(&e1 - &e0)).as_int()?;
    let c2 = an.simplify(&(&e2 - &e1)).as_int()?;
    (c1 == c2).then_some(c1)
}

fn try_partition(f: &ForObj) -> Option<Stmt> {
    let mut inner = Vec::new();
    let v = &f.loop_var;
    let guard = find_guard(&f.body, v, &mut inner)?;
    let cond = guard.cond.clone();
    // d = lhs - rhs; the guard holds when d < 0 (after normalising the comparison).
    let (d, strict) = match cond.kind() {
        ExprKind::Binary(BinOp::Lt, a, b) => (a - b, true),
        ExprKind::Binary(BinOp::Le, a, b) => (a - b, false),
        ExprKind::Binary(BinOp::Gt, a, b) => (b - a, true),
        ExprKind::Binary(BinOp::Ge, a, b) => (b - a, false),
        _ => return None,
    };
    if !d.dtype().is_int() || !crate::visitor::uses_var(&d, v) {
        return None;
    }
    // The condition may only use v, the inner loop variables and variables defined outside.
    let inner_vars: Vec<Var> = inner.iter().map(|(x, _, _)| x.clone()).collect();
    let outer = crate::visitor::undefined_vars(&f.body);
    if uses_var_where(&d, |x| {
        x != v && !inner_vars.contains(x) && !outer.contains(x)
    }) {
        return None;
    }
    let mut an = Analyzer::new();
    // Worst case over the inner loops: the largest d.
    let mut worst = d.clone();
    for (x, lo, ext) in &inner {
        if uses_var_where(lo, |y| y == v || inner_vars.contains(y))
            || uses_var_where(ext, |y| y == v || inner_vars.contains(y))
        {
            return None;
        }
        let c = coefficient(&mut an, &worst, x)?;
        let at = if c > 0 { lo + ext - 1 } else { lo.clone() };
        let map: HashMap<Var, PrimExpr> = [(x.clone(), at)].into_iter().collect();
        worst = substitute(&worst, &map);
    }
    let c = coefficient(&mut an, &worst, v)?;
    let zero = PrimExpr::const_int(v.dtype(), 0);
    let map: HashMap<Var, PrimExpr> = [(v.clone(), zero)].into_iter().collect();
    let r = an.simplify(&substitute(&worst, &map));
    // Holds when c*v + r < 0 (strict) or <= 0.
    let bound = if strict { -&r - 1 } else { -&r };
    let (lo, ext) = (&f.min, &f.extent);
    let (main_min, main_ext, tail_min, tail_ext) = if c > 0 {
        // v <= floor(bound / c): the main part is the head.
        let last = floordiv(bound, c);
        let m = an.simplify(&max(min(&last - lo + 1, ext.clone()), 0));
        (
            lo.clone(),
            m.clone(),
            an.simplify(&(lo + &m)),
            an.simplify(&(ext - &m)),
        )
    } else if c < 0 {
        // v >= ceil(bound / c): the main part is the tail.
        let first = -floordiv(bound, -c);
        let h = an.simplify(&max(min(&first - lo, ext.clone()), 0));
        (
            an.simplify(&(lo + &h)),
            an.simplify(&(ext - &h)),
            lo.clone(),
            h,
        )
    } else {
        return None;
    };
    let main_body = mutate_stmt(
        &f.body,
        |s| {
            if s.same_as(&guard.stmt) {
                let StmtKind::IfThenElse(i) = s.kind() else {
                    unreachable!()
                };
                Some(match &guard.rest {
                    Some(r) => Stmt::if_then_else(r.clone(), i.then_case.clone(), None),
                    None => i.then_case.clone(),
                })
            } else {
                None
            }
        },
        |_| None,
    );
    let make = |m: PrimExpr, e: PrimExpr, body: Stmt| {
        Stmt::from_node(ForObj {
            parent: StmtObj {},
            loop_var: f.loop_var.clone(),
            min: m,
            extent: e,
            kind: f.kind,
            body,
            annotations: f.annotations.clone(),
        })
    };
    // The main loop may hold more guards of `v` (a cached stage's and its consumer's, two
    // conjuncts): each further pass drops one.
    let main = Partitioner.mutate_stmt(&make(main_min, main_ext.clone(), main_body));
    let tail = make(tail_min, tail_ext.clone(), f.body.clone());
    let parts = if c > 0 {
        vec![main, tail]
    } else {
        vec![tail, main]
    };
    let parts: Vec<Stmt> = parts
        .into_iter()
        .filter(|p| match p.kind() {
            StmtKind::For(x) => !x.extent.is_const_int(0),
            _ => true,
        })
        .collect();
    Some(Stmt::seq(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn split_with_guard_gets_a_tail() {
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(10)]);
        let (io, ii) = (Var::int32("io"), Var::int32("ii"));
        let idx = &io * 4 + &ii;
        let store = a.store(1.0, vec![idx.clone()]);
        let guarded = Stmt::if_then_else(op::likely(idx.lt(10)), store.clone(), None);
        let s = Stmt::for_loop(
            &io,
            0,
            3,
            ForKind::Serial,
            Stmt::for_loop(&ii, 0, 4, ForKind::Serial, guarded.clone()),
        );
        let out = partition_stmt(&s);
        let expected = Stmt::seq(vec![
            Stmt::for_loop(
                &io,
                0,
                2,
                ForKind::Serial,
                Stmt::for_loop(&ii, 0, 4, ForKind::Serial, store),
            ),
            Stmt::for_loop(
                &io,
                2,
                1,
                ForKind::Serial,
                Stmt::for_loop(&ii, 0, 4, ForKind::Serial, guarded),
            ),
        ]);
        assert_structural_equal(&out, &expected);
    }

    #[test]
    fn symbolic_extent_partitions_and_stays_correct() {
        let n = Var::int32("n");
        let a = Buffer::decl("A", DataType::float(32), vec![n.to_expr()]);
        let (io, ii) = (Var::int32("io"), Var::int32("ii"));
        let idx = &io * 4 + &ii;
        let guarded = Stmt::if_then_else(
            op::likely(idx.lt(&n)),
            a.store(1.0, vec![idx.clone()]),
            None,
        );
        let ext = floordiv(&n + 3, 4);
        let s = Stmt::for_loop(
            &io,
            0,
            ext.clone(),
            ForKind::Serial,
            Stmt::for_loop(&ii, 0, 4, ForKind::Serial, guarded),
        );
        let out = partition_stmt(&s);
        let StmtKind::Seq(q) = out.kind() else {
            panic!("{out}")
        };
        assert_eq!(q.seq.len(), 2);
        // The main loop has no guard; check the split point numerically.
        let StmtKind::For(main) = q.seq[0].kind() else {
            panic!()
        };
        assert!(!main.body.to_string().contains("likely"), "{out}");
        for nv in [0i64, 1, 4, 7, 8, 13] {
            let m: HashMap<Var, PrimExpr> = [(n.clone(), PrimExpr::i32(nv))].into_iter().collect();
            let got = crate::arith::simplify(&substitute(&main.extent, &m))
                .as_int()
                .unwrap();
            assert_eq!(got, nv / 4, "n = {nv}: {}", main.extent);
        }
        // A loop without a guard is left alone.
        let plain = Stmt::for_loop(&io, 0, 4, ForKind::Serial, a.store(1.0, vec![io.to_expr()]));
        assert!(partition_stmt(&plain).same_as(&plain));
    }

    #[test]
    fn guard_under_a_local_allocation_partitions_the_outer_loop() {
        // A `local` accumulator allocated inside the row-block loop (cache_write + compute_at
        // on a ragged tile): the guard under the allocation still partitions the outer loop.
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(10)]);
        let acc = Buffer::decl("acc", DataType::float(32), vec![PrimExpr::i32(4)]);
        let (io, ii) = (Var::int32("io"), Var::int32("ii"));
        let idx = &io * 4 + &ii;
        let guarded = Stmt::if_then_else(
            op::likely(idx.lt(10)),
            a.store(acc.load(vec![ii.to_expr()]), vec![idx.clone()]),
            None,
        );
        let s = Stmt::for_loop(
            &io,
            0,
            3,
            ForKind::Serial,
            Stmt::allocate_buffer(&acc, Stmt::for_loop(&ii, 0, 4, ForKind::Serial, guarded)),
        );
        let out = partition_stmt(&s);
        let StmtKind::Seq(q) = out.kind() else {
            panic!("not partitioned:\n{out}")
        };
        let StmtKind::For(main) = q.seq[0].kind() else {
            panic!("{out}")
        };
        assert!(main.extent.is_const_int(2), "{out}");
        assert!(!main.body.to_string().contains("likely"), "{out}");
        assert!(q.seq[1].to_string().contains("likely"), "{out}");
    }

    #[test]
    fn two_split_axes_and_two_guarded_stages_all_partition() {
        // A 10 x 7 output in 4 x 4 tiles, its guard `likely(rows) && likely(cols)`, computed
        // into a tile cache by one nest and copied out by another (each guarded): the column
        // tile loop's main part drops the column conjunct from both nests and keeps the rows'.
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(70)]);
        let acc = Buffer::decl("acc", DataType::float(32), vec![PrimExpr::i32(16)]);
        let (jo, io, ii, ji) = (
            Var::int32("jo"),
            Var::int32("io"),
            Var::int32("ii"),
            Var::int32("ji"),
        );
        let (row, col) = (&io * 4 + &ii, &jo * 4 + &ji);
        let cond = op::likely(row.lt(10)).logical_and(op::likely(col.lt(7)));
        let tile = |store: Stmt| {
            Stmt::for_loop(
                &ii,
                0,
                4,
                ForKind::Serial,
                Stmt::for_loop(
                    &ji,
                    0,
                    4,
                    ForKind::Serial,
                    Stmt::if_then_else(cond.clone(), store, None),
                ),
            )
        };
        let cache = tile(acc.store(1.0, vec![&ii * 4 + &ji]));
        let out = tile(a.store(acc.load(vec![&ii * 4 + &ji]), vec![&row * 7 + &col]));
        let body = Stmt::allocate_buffer(&acc, Stmt::seq(vec![cache, out]));
        let s = Stmt::for_loop(
            &jo,
            0,
            2,
            ForKind::Serial,
            Stmt::for_loop(&io, 0, 3, ForKind::Serial, body),
        );
        let got = partition_stmt(&s);
        let StmtKind::Seq(q) = got.kind() else {
            panic!("not partitioned:\n{got}")
        };
        let main = q.seq[0].to_string();
        assert!(main.contains("jo"), "{got}");
        assert!(
            !main.contains("< 7"),
            "a column guard is left in the main part:\n{got}"
        );
        assert!(main.contains("< 10"), "the row guard is dropped:\n{got}");
        assert!(q.seq[1].to_string().contains("< 7"), "{got}");
    }
}
