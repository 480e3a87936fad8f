//! `det`: the determinant of each square matrix of a batch (ONNX `Det`), by LU decomposition
//! with partial pivoting, one matrix at a time in a scratch copy (an extern operation: the
//! elimination is sequential).

use crate::transform::util::{const_shape, constant, index_dtype, require_float, value_error};
use kiln_ffi::Result;
use kiln_te::{extern_op, ExternOutput, Tensor};
use kiln_tir::{op, Buffer, ForKind, PrimExpr, Stmt, Var};

/// A serial loop over `[lo, hi)`.
fn for_range(name: &str, lo: PrimExpr, hi: PrimExpr, body: impl FnOnce(PrimExpr) -> Stmt) -> Stmt {
    let v = Var::new(name, lo.dtype());
    let extent = hi - lo.clone();
    let b = body(v.to_expr() + lo.clone());
    Stmt::for_loop(
        &v,
        PrimExpr::const_int(lo.dtype(), 0),
        extent,
        ForKind::Serial,
        b,
    )
}

/// The determinant of every `[n, n]` matrix of `x` (`[..., n, n]`, float): a tensor of the
/// leading dimensions. A singular matrix gives 0 (no division by its zero pivot).
///
/// # Errors
/// A `TypeError` for a non-float input, a `ValueError` for a shape that is not `[..., n, n]`.
pub fn det(x: &Tensor) -> Result<Tensor> {
    require_float(x, "det")?;
    let s = const_shape(x, "det")?;
    let r = s.len();
    if r < 2 || s[r - 1] != s[r - 2] {
        return Err(value_error(
            "det",
            format!("the input must be [..., n, n], got {s:?}"),
        ));
    }
    let n = s[r - 1];
    let batch: i64 = s[..r - 2].iter().product();
    let dt = x.dtype();
    let it = index_dtype(x);
    let c = |v: i64| PrimExpr::const_int(it, v);
    let out_shape: Vec<PrimExpr> = s[..r - 2].iter().map(|&d| c(d)).collect();
    let outs = extern_op(
        "det",
        "linalg",
        std::slice::from_ref(x),
        &[ExternOutput::new(out_shape, dt)],
        |ins, outs| {
            // Matrix `b` of the flattened batch, the input read and the output written through
            // their own (unflattened) indices.
            let inp = ins[0].clone();
            let out = outs[0].clone();
            let a = Buffer::decl_in("lu", dt, vec![c(n * n)], "global");
            let acc = Buffer::decl_in("det_acc", dt, vec![c(1)], "local");
            let piv = Buffer::decl_in("pivot", it, vec![c(1)], "local");
            let at = |i: PrimExpr, j: PrimExpr| i * c(n) + j;
            let batch_index = |b: PrimExpr| {
                let mut idx = Vec::with_capacity(r);
                let mut rest = b;
                for d in (0..r - 2).rev() {
                    idx.push(kiln_tir::floormod(rest.clone(), c(s[d])));
                    rest = kiln_tir::floordiv(rest, c(s[d]));
                }
                idx.reverse();
                idx
            };
            let read = |b: PrimExpr, flat: PrimExpr| {
                let mut idx = batch_index(b);
                idx.push(kiln_tir::floordiv(flat.clone(), c(n)));
                idx.push(kiln_tir::floormod(flat, c(n)));
                inp.load(idx)
            };
            let write = |b: PrimExpr, v: PrimExpr| out.store(v, batch_index(b));
            let zero = constant(dt, 0.0);
            let per_matrix = for_range("b", c(0), c(batch), |b| {
                let copy = for_range("e", c(0), c(n * n), |e| {
                    a.store(read(b.clone(), e.clone()), vec![e])
                });
                let init = acc.store(constant(dt, 1.0), vec![c(0)]);
                let elim = for_range("k", c(0), c(n), |k| {
                    let kk = a.load(vec![at(k.clone(), k.clone())]);
                    // The row with the largest |a[i, k]| for i >= k.
                    let find = Stmt::seq(vec![
                        piv.store(k.clone(), vec![c(0)]),
                        for_range("i", k.clone() + c(1), c(n), |i| {
                            let best = a.load(vec![at(piv.load(vec![c(0)]), k.clone())]);
                            let cand = a.load(vec![at(i.clone(), k.clone())]);
                            Stmt::if_then_else(
                                op::abs(cand).gt(op::abs(best)),
                                piv.store(i, vec![c(0)]),
                                None,
                            )
                        }),
                    ]);
                    let p = piv.load(vec![c(0)]);
                    let swap = Stmt::if_then_else(
                        p.clone().not_equal(k.clone()),
                        Stmt::seq(vec![
                            for_range("j", c(0), c(n), |j| {
                                let t = Var::new("t", dt);
                                let (x1, x2) = (at(k.clone(), j.clone()), at(p.clone(), j.clone()));
                                Stmt::let_stmt(
                                    &t,
                                    a.load(vec![x1.clone()]),
                                    Stmt::seq(vec![
                                        a.store(a.load(vec![x2.clone()]), vec![x1]),
                                        a.store(t.to_expr(), vec![x2]),
                                    ]),
                                )
                            }),
                            acc.store(zero.clone() - acc.load(vec![c(0)]), vec![c(0)]),
                        ]),
                        None,
                    );
                    let scale = acc.store(acc.load(vec![c(0)]) * kk.clone(), vec![c(0)]);
                    let eliminate = Stmt::if_then_else(
                        kk.clone().not_equal(zero.clone()),
                        for_range("i", k.clone() + c(1), c(n), |i| {
                            let f = Var::new("f", dt);
                            let body = for_range("j", k.clone() + c(1), c(n), |j| {
                                let dst = at(i.clone(), j.clone());
                                a.store(
                                    a.load(vec![dst.clone()])
                                        - f.to_expr() * a.load(vec![at(k.clone(), j)]),
                                    vec![dst],
                                )
                            });
                            Stmt::let_stmt(&f, a.load(vec![at(i, k.clone())]) / kk.clone(), body)
                        }),
                        None,
                    );
                    Stmt::seq(vec![find, swap, scale, eliminate])
                });
                let fin = write(b, acc.load(vec![c(0)]));
                Stmt::seq(vec![copy, init, elim, fin])
            });
            let body = Stmt::allocate_buffer(&acc, Stmt::allocate_buffer(&piv, per_matrix));
            Ok(Stmt::allocate_buffer(&a, body))
        },
    )?;
    Ok(outs.into_iter().next().expect("one output"))
}
