//! InjectPrefetch: software prefetches where a schedule asked for them (TVM's
//! `InjectPrefetch`, after `Stage::prefetch`).
//!
//! An `AttrStmt(buffer, "prefetch_scope", offset)` around a loop asks that each iteration `v`
//! first prefetch the part of `buffer` that iteration `v + offset` will read. The pass finds
//! the loop body's loads of `buffer`, writes each index with `v + offset` for `v`, its lowest
//! value over the loops inside (the region's start, when the index grows with them) and the
//! span above it (constant bounds over those loops), and puts at the top of the body, guarded
//! by `v + offset` being an iteration of the loop, one `tir.prefetch` per cache line of each
//! distinct region (every index of the other dimensions). A load whose span is not known, or
//! a buffer whose element size is not whole bytes, is left without prefetches: they are hints,
//! and the attribute is removed either way. Runs on multi-dimensional buffers, before
//! StorageFlatten.

use super::{prim_func_pass, Pass};
use crate::arith::{Analyzer, POS_INF};
use crate::buffer::Buffer;
use crate::expr::{ExprKind, PrimExpr, Var};
use crate::mutator::{substitute, transform_stmt};
use crate::op::{builtin, PREFETCH};
use crate::stmt::{ForKind, Stmt, StmtKind};
use crate::structural::structural_equal;
use crate::visitor::{post_order_visit, IrRef};
use crate::Range;
use kiln_ffi::DataType;
use std::collections::HashMap;

/// The attribute key `Stage::prefetch` puts around a loop.
pub const PREFETCH_SCOPE: &str = "prefetch_scope";

/// Bytes a prefetch brings in (a cache line).
const LINE_BYTES: i64 = 64;

/// The InjectPrefetch pass (`tir.InjectPrefetch`, opt level 0).
pub fn inject_prefetch() -> Pass {
    prim_func_pass("tir.InjectPrefetch", 0, |f, _| {
        let body = transform_stmt(f.body(), rewrite, |e| e);
        Ok(if body.same_as(f.body()) {
            f
        } else {
            f.with_body(body)
        })
    })
}

/// A `prefetch_scope` attribute around a loop becomes the loop with its prefetches.
fn rewrite(s: Stmt) -> Stmt {
    let StmtKind::AttrStmt(a) = s.kind() else {
        return s;
    };
    if a.attr_key.as_str() != PREFETCH_SCOPE {
        return s;
    }
    let (Ok(buffer), Some(offset)) = (a.node.try_as::<Buffer>(), a.value.as_int()) else {
        return a.body.clone();
    };
    let StmtKind::For(f) = a.body.kind() else {
        return a.body.clone();
    };
    let prefetches = prefetch_nest(&buffer, &f.loop_var, offset, &f.min, &f.extent, &f.body);
    let Some(prefetches) = prefetches else {
        return a.body.clone();
    };
    let body = Stmt::seq(vec![prefetches, f.body.clone()]);
    Stmt::for_loop(&f.loop_var, f.min.clone(), f.extent.clone(), f.kind, body)
}

/// The prefetches of `buffer` for iteration `v + offset` of a loop (`min`, `extent`) over
/// `body`, guarded; `None` when there is nothing to prefetch.
fn prefetch_nest(
    buffer: &Buffer,
    v: &Var,
    offset: i64,
    min: &PrimExpr,
    extent: &PrimExpr,
    body: &Stmt,
) -> Option<Stmt> {
    let dtype = buffer.dtype();
    let elem_bits = dtype.bits() as i64 * dtype.lanes() as i64;
    if elem_bits % 8 != 0 || elem_bits == 0 {
        return None;
    }
    let per_line = (LINE_BYTES * 8 / elem_bits).max(1);
    // The loops inside the body and the loads of the buffer.
    let mut inner: Vec<(Var, Range)> = Vec::new();
    let mut loads: Vec<Vec<PrimExpr>> = Vec::new();
    post_order_visit(body, |n| match n {
        IrRef::Stmt(s) => {
            if let StmtKind::For(f) = s.kind() {
                inner.push((
                    f.loop_var.clone(),
                    Range::from_min_extent(f.min.clone(), f.extent.clone()),
                ));
            }
        }
        IrRef::Expr(e) => {
            if let ExprKind::BufferLoad { buffer: b, indices } = e.kind() {
                if b.data() == buffer.data() {
                    loads.push(indices.to_vec());
                }
            }
        }
    });
    let next = PrimExpr::from(v.clone()) + offset;
    let mut an = Analyzer::new();
    an.bind(v, &Range::from_min_extent(min.clone(), extent.clone()));
    for (var, r) in &inner {
        an.bind(var, r);
    }
    let at_next = HashMap::from([(v.clone(), next.clone())]);
    let at_start: HashMap<Var, PrimExpr> = inner
        .iter()
        .map(|(var, r)| (var.clone(), r.min().clone()))
        .collect();
    // Distinct regions: the start and span of each dimension.
    let mut regions: Vec<Vec<(PrimExpr, i64)>> = Vec::new();
    'loads: for indices in &loads {
        let mut region = Vec::with_capacity(indices.len());
        for idx in indices {
            if idx.dtype().lanes() != 1 {
                continue 'loads;
            }
            let idx = substitute(idx, &at_next);
            let start = an.simplify(&substitute(&idx, &at_start));
            let diff = an.simplify(&(idx.clone() - start.clone()));
            let span = an.const_int_bound(&diff);
            if span.min < 0 || span.max == POS_INF {
                continue 'loads;
            }
            region.push((start, span.max));
        }
        let same = |r: &Vec<(PrimExpr, i64)>| {
            r.len() == region.len()
                && r.iter()
                    .zip(&region)
                    .all(|(a, b)| a.1 == b.1 && structural_equal(&a.0, &b.0))
        };
        if !region.is_empty() && !regions.iter().any(same) {
            regions.push(region);
        }
    }
    if regions.is_empty() {
        return None;
    }
    let nests: Vec<Stmt> = regions
        .iter()
        .map(|r| region_prefetches(buffer, r, per_line))
        .collect();
    let inside = next.clone().lt(min.clone() + extent.clone());
    Some(Stmt::if_then_else(inside, Stmt::seq(nests), None))
}

/// One `tir.prefetch` per cache line of `region` (start and span per dimension): a loop over
/// each dimension that spans more than one index, the last one by lines.
fn region_prefetches(buffer: &Buffer, region: &[(PrimExpr, i64)], per_line: i64) -> Stmt {
    let last = region.len() - 1;
    let vars: Vec<Var> = (0..region.len())
        .map(|d| Var::new(&format!("pf{d}"), region[d].0.dtype()))
        .collect();
    let indices: Vec<PrimExpr> = region
        .iter()
        .enumerate()
        .map(|(d, (start, span))| match (d == last, *span) {
            (_, 0) => start.clone(),
            (true, _) => start.clone() + PrimExpr::from(vars[d].clone()) * per_line,
            (false, _) => start.clone() + PrimExpr::from(vars[d].clone()),
        })
        .collect();
    let addr = PrimExpr::call(
        DataType::handle(),
        builtin::ADDRESS_OF,
        vec![buffer.load(indices)],
    );
    let mut stmt = Stmt::evaluate(PrimExpr::call(DataType::int(32), PREFETCH, vec![addr]));
    for (d, (start, span)) in region.iter().enumerate().rev() {
        if *span == 0 {
            continue;
        }
        let count = if d == last {
            span / per_line + 1
        } else {
            span + 1
        };
        let zero = PrimExpr::const_int(start.dtype(), 0);
        let n = PrimExpr::const_int(start.dtype(), count);
        stmt = Stmt::for_loop(&vars[d], zero, n, ForKind::Serial, stmt);
    }
    stmt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IRModule, PrimFunc};

    /// `for i in 0..8 { for j in 0..100 { B[i, j] = A[i, j] + A[i, j] } }` with a prefetch of
    /// `what` around the `i` loop.
    fn rows(what: &Buffer, a: &Buffer, b: &Buffer) -> (Var, Stmt) {
        let (i, j) = (Var::int32("i"), Var::int32("j"));
        let idx = vec![PrimExpr::from(i.clone()), PrimExpr::from(j.clone())];
        let v = a.load(idx.clone());
        let inner = Stmt::for_loop(
            &j,
            PrimExpr::i32(0),
            PrimExpr::i32(100),
            ForKind::Serial,
            b.store(v.clone() + v, idx),
        );
        let outer = Stmt::for_loop(
            &i,
            PrimExpr::i32(0),
            PrimExpr::i32(8),
            ForKind::Parallel,
            inner,
        );
        (i, Stmt::attr(what.clone(), PREFETCH_SCOPE, 1i64, outer))
    }

    fn run(body: Stmt, bufs: &[Buffer]) -> Stmt {
        let m = IRModule::from_func("f", PrimFunc::from_buffers("f", bufs, body));
        let out = inject_prefetch().apply(m).unwrap();
        out.functions().get("f").unwrap().body().clone()
    }

    /// The `tir.prefetch` calls in `s`, with the loops around each.
    fn prefetches(s: &Stmt) -> (Vec<PrimExpr>, Vec<(Var, PrimExpr)>) {
        let (mut calls, mut loops) = (Vec::new(), Vec::new());
        post_order_visit(s, |n| match n {
            IrRef::Expr(e) => {
                if let ExprKind::Call { op, args } = e.kind() {
                    if op == PREFETCH {
                        calls.push(args[0].clone());
                    }
                }
            }
            IrRef::Stmt(st) => {
                if let StmtKind::For(f) = st.kind() {
                    if f.loop_var.name().starts_with("pf") {
                        loops.push((f.loop_var.clone(), f.extent.clone()));
                    }
                }
            }
        });
        (calls, loops)
    }

    #[test]
    fn each_row_prefetches_the_next_rows_lines() {
        let shape = vec![PrimExpr::i32(8), PrimExpr::i32(100)];
        let a = Buffer::decl("A", DataType::float(32), shape.clone());
        let b = Buffer::decl("B", DataType::float(32), shape);
        let (i, body) = rows(&a, &a, &b);
        let out = run(body, &[a.clone(), b.clone()]);
        let StmtKind::For(f) = out.kind() else {
            panic!("the attribute stays: {out}");
        };
        assert_eq!(f.kind, ForKind::Parallel);
        let (calls, loops) = prefetches(&out);
        // Two loads of one region: one prefetch, in a loop over the 7 lines of 100 floats.
        assert_eq!(calls.len(), 1, "{out}");
        assert_eq!(loops.len(), 1, "{out}");
        assert_eq!(loops[0].1.as_int(), Some(7), "{out}");
        let k = PrimExpr::from(loops[0].0.clone());
        let want = a.load(vec![PrimExpr::from(i.clone()) + 1, k * 16]);
        let ExprKind::Call { args, .. } = calls[0].kind() else {
            panic!("{out}");
        };
        assert!(
            structural_equal(&args[0], &want),
            "prefetch of {} in {out}",
            args[0]
        );
        // Guarded: the last row prefetches nothing.
        let StmtKind::Seq(seq) = f.body.kind() else {
            panic!("{out}");
        };
        let StmtKind::IfThenElse(guard) = seq.seq[0].kind() else {
            panic!("{out}");
        };
        let want = (PrimExpr::from(i) + 1).lt(PrimExpr::i32(8));
        assert!(structural_equal(&guard.condition, &want), "{out}");
    }

    #[test]
    fn a_buffer_the_loop_does_not_read_gets_nothing_and_the_attribute_goes() {
        let shape = vec![PrimExpr::i32(8), PrimExpr::i32(100)];
        let a = Buffer::decl("A", DataType::float(32), shape.clone());
        let b = Buffer::decl("B", DataType::float(32), shape.clone());
        let c = Buffer::decl("C", DataType::float(32), shape);
        let (_, body) = rows(&c, &a, &b);
        let out = run(body, &[a, b, c]);
        assert!(matches!(out.kind(), StmtKind::For(_)), "{out}");
        assert!(prefetches(&out).0.is_empty(), "{out}");
        // Around something that is not a loop: dropped.
        let d = Buffer::decl("D", DataType::float(32), vec![PrimExpr::i32(4)]);
        let store = d.store(PrimExpr::f32(1.0), vec![PrimExpr::i32(0)]);
        let out = run(Stmt::attr(d.clone(), PREFETCH_SCOPE, 1i64, store), &[d]);
        assert!(matches!(out.kind(), StmtKind::BufferStore(_)), "{out}");
    }
}
