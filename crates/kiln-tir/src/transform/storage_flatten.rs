//! StorageFlatten: multi-dimensional buffers become one-dimensional.
//!
//! Every buffer that is not already flat (one dimension, no strides, zero `elem_offset`) gets a
//! flat view over the same `data` variable: shape `[extent]` (the product of the shape, or the
//! span of the strides), row-major or strided offsets, `elem_offset` folded into the index.
//! Loads and stores use the view with one index; `DeclBuffer`s declare the view; `Allocate`
//! extents become their product.
//!
//! Parameters keep their N-d buffers in `buffer_map` (MakePackedAPI checks shapes and strides
//! against them); the body starts with a `DeclBuffer` of each parameter's flat view (as TVM
//! 0.27's FlattenBuffer: `A_1 = A.view(n * 4)`), and the body's accesses go through the view.

use super::{prim_func_pass, Pass};
use crate::buffer::Buffer;
use crate::dtype::DataTypeExt;
use crate::expr::{cast, ExprKind, PrimExpr};
use crate::function::PrimFunc;
use crate::mutator::{mutate_expr_children, mutate_stmt_children, ExprMutator, StmtMutator};
use crate::stmt::{AllocateObj, Stmt, StmtKind, StmtObj};
use std::collections::HashMap;

/// The StorageFlatten pass (`tir.StorageFlatten`, opt level 0).
pub fn storage_flatten() -> Pass {
    prim_func_pass("tir.StorageFlatten", 0, |f, _| Ok(flatten_func(&f)))
}

/// Flattens one function (see the module docs).
pub fn flatten_func(f: &PrimFunc) -> PrimFunc {
    let mut fl = Flattener::default();
    let body = fl.mutate_stmt(f.body());
    // Views already declared at the top (a second run) are not declared again.
    let mut declared = Vec::new();
    let mut top = f.body().clone();
    while let StmtKind::DeclBuffer(d) = top.kind() {
        declared.push(d.buffer.data().clone());
        let next = d.body.clone();
        top = next;
    }
    let mut views = Vec::new();
    for (_, b) in f.buffer_map().iter() {
        let flat = fl.flat(b);
        if !flat.same_as(b) && !declared.contains(b.data()) {
            views.push(flat);
        }
    }
    if body.same_as(f.body()) && views.is_empty() {
        return f.clone();
    }
    let body = views
        .into_iter()
        .rev()
        .fold(body, |acc, v| Stmt::decl_buffer(v, acc));
    f.with_body(body)
}

/// True when `b` is already one-dimensional, compact and at offset 0.
pub fn is_flat(b: &Buffer) -> bool {
    b.ndim() == 1 && b.strides().is_empty() && b.elem_offset().is_const_int(0)
}

fn product(es: &[PrimExpr]) -> PrimExpr {
    let mut it = es.iter();
    let first = it.next().cloned().unwrap_or_else(|| PrimExpr::i32(1));
    it.fold(first, |acc, e| {
        let (acc, e) = unify(acc, e.clone());
        acc * e
    })
}

/// Casts the narrower integer operand to the wider one's type.
fn unify(a: PrimExpr, b: PrimExpr) -> (PrimExpr, PrimExpr) {
    let (ta, tb) = (a.dtype(), b.dtype());
    if ta == tb {
        return (a, b);
    }
    if ta.bits() >= tb.bits() {
        let t = ta.element_of().with_lanes(tb.lanes());
        (a, cast(t, b))
    } else {
        let t = tb.element_of().with_lanes(ta.lanes());
        (cast(t, a), b)
    }
}

/// The flat element offset of `indices` in `b` (row-major or strided, plus `elem_offset`).
pub fn flat_index(b: &Buffer, indices: &[PrimExpr]) -> PrimExpr {
    let mut offset: Option<PrimExpr> = None;
    for (k, idx) in indices.iter().enumerate() {
        offset = Some(if b.strides().is_empty() {
            match offset {
                None => idx.clone(),
                Some(acc) => {
                    let (acc, s) = unify(acc, b.shape()[k].clone());
                    let (m, i) = unify(acc * s, idx.clone());
                    m + i
                }
            }
        } else {
            let (i, s) = unify(idx.clone(), b.strides()[k].clone());
            match offset {
                None => i * s,
                Some(acc) => {
                    let (a, t) = unify(acc, i * s);
                    a + t
                }
            }
        });
    }
    let off = offset.unwrap_or_else(|| PrimExpr::i32(0));
    if b.elem_offset().is_const_int(0) {
        off
    } else {
        let (o, e) = unify(off, b.elem_offset().clone());
        o + e
    }
}

#[derive(Default)]
struct Flattener {
    views: HashMap<Buffer, Buffer>,
}

impl Flattener {
    fn flat(&mut self, b: &Buffer) -> Buffer {
        if is_flat(b) {
            return b.clone();
        }
        if let Some(v) = self.views.get(b) {
            return v.clone();
        }
        let extent = if b.strides().is_empty() {
            product(b.shape())
        } else {
            // The span of the strided layout: 1 + sum((shape_k - 1) * stride_k).
            let mut span = PrimExpr::i32(1);
            for (s, st) in b.shape().iter().zip(b.strides()) {
                let (s, st) = unify(s.clone(), st.clone());
                let (acc, term) = unify(span, (s - 1) * st);
                span = acc + term;
            }
            span
        };
        let extent = if b.elem_offset().is_const_int(0) {
            extent
        } else {
            let (e, o) = unify(extent, b.elem_offset().clone());
            e + o
        };
        let zero = PrimExpr::const_int(extent.dtype(), 0);
        let v = Buffer::new(
            b.data().clone(),
            b.dtype(),
            vec![extent],
            Vec::new(),
            zero,
            b.name(),
            b.scope(),
            b.object().data_alignment,
            1,
        )
        .expect("a flat view of a valid buffer is valid");
        self.views.insert(b.clone(), v.clone());
        v
    }
}

impl ExprMutator for Flattener {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        if let ExprKind::BufferLoad { buffer, indices } = e.kind() {
            if !is_flat(buffer) {
                let idx: Vec<PrimExpr> = indices.iter().map(|i| self.mutate_expr(i)).collect();
                let view = self.flat(buffer);
                return PrimExpr::buffer_load_raw(view, vec![flat_index(buffer, &idx)]);
            }
        }
        mutate_expr_children(self, e)
    }
}

impl StmtMutator for Flattener {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.kind() {
            StmtKind::BufferStore(st) if !is_flat(&st.buffer) => {
                let value = self.mutate_expr(&st.value);
                let idx: Vec<PrimExpr> = st.indices.iter().map(|i| self.mutate_expr(i)).collect();
                let view = self.flat(&st.buffer);
                Stmt::buffer_store_raw(view, value, vec![flat_index(&st.buffer, &idx)])
            }
            StmtKind::DeclBuffer(d) if !is_flat(&d.buffer) => {
                let view = self.flat(&d.buffer);
                Stmt::decl_buffer(view, self.mutate_stmt(&d.body))
            }
            StmtKind::Allocate(a) if a.extents.len() != 1 => {
                let body = self.mutate_stmt(&a.body);
                Stmt::from_node(AllocateObj {
                    parent: StmtObj {},
                    buffer_var: a.buffer_var.clone(),
                    dtype: a.dtype,
                    extents: vec![product(&a.extents)].into(),
                    condition: a.condition.clone(),
                    body,
                    annotations: a.annotations.clone(),
                    scope: a.scope.clone(),
                })
            }
            _ => mutate_stmt_children(self, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Var;
    use crate::stmt::ForKind;
    use crate::structural::assert_structural_equal;
    use kiln_ffi::DataType;

    #[test]
    fn params_get_flat_views_and_indices_flatten() {
        let f32 = DataType::float(32);
        let n = Var::int32("n");
        let a = Buffer::decl("A", f32, vec![n.to_expr(), PrimExpr::i32(4)]);
        let c = Buffer::decl("C", f32, vec![n.to_expr(), PrimExpr::i32(4)]);
        let (i, j) = (Var::int32("i"), Var::int32("j"));
        let body = Stmt::for_loop(
            &i,
            0,
            &n,
            ForKind::Serial,
            Stmt::for_loop(
                &j,
                0,
                4,
                ForKind::Serial,
                c.store(
                    a.load(vec![i.to_expr(), j.to_expr()]),
                    vec![i.to_expr(), j.to_expr()],
                ),
            ),
        );
        let f = PrimFunc::from_buffers("f", &[a.clone(), c.clone()], body);
        let out = flatten_func(&f);
        let av = Buffer::decl("A", f32, vec![&n * 4]).with_data(a.data());
        let cv = Buffer::decl("C", f32, vec![&n * 4]).with_data(c.data());
        let idx = &i * 4 + &j;
        let expected = Stmt::decl_buffer(
            av.clone(),
            Stmt::decl_buffer(
                cv.clone(),
                Stmt::for_loop(
                    &i,
                    0,
                    &n,
                    ForKind::Serial,
                    Stmt::for_loop(
                        &j,
                        0,
                        4,
                        ForKind::Serial,
                        cv.store(av.load(vec![idx.clone()]), vec![idx]),
                    ),
                ),
            ),
        );
        assert_structural_equal(out.body(), &expected);
        assert!(out.buffer_map().get(&f.params()[0]).unwrap().same_as(&a));
        // Already flat: nothing changes.
        assert!(flatten_func(&out).body().same_as(out.body()));
    }

    #[test]
    fn allocations_and_strides_flatten() {
        let f32 = DataType::float(32);
        let t = Buffer::decl("T", f32, vec![PrimExpr::i32(2), PrimExpr::i32(3)]);
        let s = Buffer::new(
            Var::handle("S"),
            f32,
            vec![PrimExpr::i32(2), PrimExpr::i32(3)],
            vec![PrimExpr::i32(8), PrimExpr::i32(1)],
            PrimExpr::i32(5),
            "S",
            "global",
            64,
            1,
        )
        .unwrap();
        let (one, two) = (PrimExpr::i32(1), PrimExpr::i32(2));
        let body = Stmt::allocate_buffer(
            &t,
            t.store(s.load(vec![one.clone(), two.clone()]), vec![one, two]),
        );
        let f = PrimFunc::from_buffers("f", std::slice::from_ref(&s), body);
        let out = flatten_func(&f);
        let tv = Buffer::decl("T", f32, vec![PrimExpr::i32(6)]).with_data(t.data());
        let sv = Buffer::decl("S", f32, vec![PrimExpr::i32(1 + 8 + 2 + 5)]).with_data(s.data());
        let expected = Stmt::decl_buffer(
            sv.clone(),
            Stmt::try_allocate(
                t.data().clone(),
                f32,
                vec![PrimExpr::i32(6)],
                PrimExpr::bool(true),
                Stmt::decl_buffer(
                    tv.clone(),
                    tv.store(
                        sv.load(vec![PrimExpr::i32(8 + 2 + 5)]),
                        vec![PrimExpr::i32(5)],
                    ),
                ),
                kiln_ffi::Map::new(vec![]),
                "global",
            )
            .unwrap(),
        );
        assert_structural_equal(out.body(), &expected);
    }
}
