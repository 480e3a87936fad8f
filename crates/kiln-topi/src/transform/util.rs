//! Shared helpers of the injective and reduction operators: static shapes, axis
//! normalization, tagged computes and constants of a dtype.

use kiln_ffi::{DataType, Error, Map, Result};
use kiln_te::tensor::compute_axes;
use kiln_te::{compute_op, Tensor};
use kiln_tir::{DataTypeExt, PrimExpr, Var};

/// The shape of `t` as integers, or a `ValueError` naming `op` when a dimension is symbolic.
pub fn const_shape(t: &Tensor, op: &str) -> Result<Vec<i64>> {
    t.shape()
        .iter()
        .enumerate()
        .map(|(d, e)| {
            e.as_int().ok_or_else(|| {
                Error::value_error(format!(
                    "{op}: dimension {d} of `{}` is symbolic ({e}); this operator needs static shapes",
                    t.name()
                ))
            })
        })
        .collect()
}

/// `axis` in `[-ndim, ndim)` as a non-negative axis, or a `ValueError` naming `op`.
pub fn normalize_axis(axis: i64, ndim: usize, op: &str) -> Result<usize> {
    let n = ndim as i64;
    if axis < -n || axis >= n {
        return Err(Error::value_error(format!(
            "{op}: axis {axis} is out of range for a tensor of rank {ndim} (valid: {}..{})",
            -n,
            n - 1
        )));
    }
    Ok(if axis < 0 { axis + n } else { axis } as usize)
}

/// The index type of `t` (its first dimension's type; `int32` for scalars).
pub fn index_dtype(t: &Tensor) -> DataType {
    t.shape()
        .first()
        .map(|e| e.dtype())
        .unwrap_or(DataType::int(32))
}

/// Integer dimensions as `dtype` constants.
pub fn shape_exprs(shape: &[i64], dtype: DataType) -> Vec<PrimExpr> {
    shape
        .iter()
        .map(|&d| PrimExpr::const_int(dtype, d))
        .collect()
}

/// A constant `v` of `dtype` (float or integer).
pub fn constant(dtype: DataType, v: f64) -> PrimExpr {
    if dtype.is_floating() {
        PrimExpr::const_float(dtype, v)
    } else {
        PrimExpr::const_int(dtype, v as i64)
    }
}

/// A compute of `shape` with a tag (TVM's `te.compute(..., tag=...)`).
pub fn compute_tagged(
    shape: &[PrimExpr],
    f: impl FnOnce(&[Var]) -> PrimExpr,
    name: &str,
    tag: &str,
) -> Result<Tensor> {
    let axis = compute_axes(shape);
    let vars: Vec<Var> = axis.iter().map(|iv| iv.var().clone()).collect();
    let body = f(&vars);
    let op = compute_op(name, tag, Map::new(Vec::new()), axis, vec![body])?;
    Ok(op.output(0))
}

/// The vars as expressions.
pub fn var_exprs(vars: &[Var]) -> Vec<PrimExpr> {
    vars.iter().map(Var::to_expr).collect()
}

/// A `ValueError` for operator `op`.
pub fn value_error(op: &str, msg: impl std::fmt::Display) -> Error {
    Error::value_error(format!("{op}: {msg}"))
}

/// A `TypeError` unless `t` is a float tensor.
pub fn require_float(t: &Tensor, op: &str) -> Result<()> {
    if t.dtype().is_floating() {
        Ok(())
    } else {
        Err(Error::type_error(format!(
            "{op}: `{}` has dtype {}, a float type is needed",
            t.name(),
            t.dtype()
        )))
    }
}

/// A loop `for v in 0..extent` of `kind` named `name` with index type `it`, its body built from
/// the loop variable (for statements written by hand: extern operations' bodies).
pub fn for_kind(
    name: &str,
    it: DataType,
    extent: i64,
    kind: kiln_tir::ForKind,
    body: impl FnOnce(PrimExpr) -> kiln_tir::Stmt,
) -> kiln_tir::Stmt {
    for_extent(name, it, PrimExpr::const_int(it, extent), kind, body)
}

/// [`for_kind`] over an extent that may be known only at run time (of type `it`).
pub fn for_extent(
    name: &str,
    it: DataType,
    extent: PrimExpr,
    kind: kiln_tir::ForKind,
    body: impl FnOnce(PrimExpr) -> kiln_tir::Stmt,
) -> kiln_tir::Stmt {
    let v = Var::new(name, it);
    let b = body(v.to_expr());
    let zero = PrimExpr::const_int(it, 0);
    kiln_tir::Stmt::for_loop(&v, zero, extent, kind, b)
}

/// [`for_kind`] for a serial loop.
pub fn for_n(
    name: &str,
    it: DataType,
    extent: i64,
    body: impl FnOnce(PrimExpr) -> kiln_tir::Stmt,
) -> kiln_tir::Stmt {
    for_kind(name, it, extent, kiln_tir::ForKind::Serial, body)
}
