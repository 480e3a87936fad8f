//! The commutative reductions: sum, mean, max, min, prod.

use crate::tag;
use crate::transform::util::{compute_tagged, constant, normalize_axis};
use kiln_ffi::{Error, Result};
use kiln_te::{reduce_axis_n, IterVar, Tensor};
use kiln_tir::{DataTypeExt, PrimExpr, Var};

/// The sorted, distinct, non-negative axes of `axes` for a tensor of rank `ndim` (`None`: all).
///
/// # Errors
/// A `ValueError` for an axis out of range or given twice.
pub fn reduce_axes(axes: Option<&[i64]>, ndim: usize, op: &str) -> Result<Vec<usize>> {
    let Some(axes) = axes else {
        return Ok((0..ndim).collect());
    };
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let a = normalize_axis(a, ndim, op)?;
        if out.contains(&a) {
            return Err(Error::value_error(format!(
                "{op}: axis {a} is given twice in {axes:?}"
            )));
        }
        out.push(a);
    }
    out.sort_unstable();
    Ok(out)
}

/// The output shape of reducing `axes` of `shape`.
pub(crate) fn reduced_shape(shape: &[PrimExpr], axes: &[usize], keepdims: bool) -> Vec<PrimExpr> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(d, e)| {
            if !axes.contains(&d) {
                Some(e.clone())
            } else if keepdims {
                Some(PrimExpr::const_int(e.dtype(), 1))
            } else {
                None
            }
        })
        .collect()
}

/// The input indices of an output point `vars` (of [`reduced_shape`]) with reduced
/// dimensions reading `rvars` (one per reduced axis, in order).
pub(crate) fn input_indices(
    ndim: usize,
    axes: &[usize],
    keepdims: bool,
    vars: &[Var],
    rvars: &[PrimExpr],
) -> Vec<PrimExpr> {
    let mut out = Vec::with_capacity(ndim);
    let (mut o, mut r) = (0, 0);
    for d in 0..ndim {
        if axes.contains(&d) {
            out.push(rvars[r].clone());
            r += 1;
            if keepdims {
                o += 1;
            }
        } else {
            out.push(vars[o].to_expr());
            o += 1;
        }
    }
    out
}

/// `reducer(x[...], axes)` over `axes` of `x` (see the module docs), named `name`.
///
/// # Errors
/// A `ValueError` for bad axes.
pub fn reduce_with(
    x: &Tensor,
    axes: Option<&[i64]>,
    keepdims: bool,
    name: &str,
    reducer: impl FnOnce(PrimExpr, &[IterVar]) -> PrimExpr,
) -> Result<Tensor> {
    let axes = reduce_axes(axes, x.ndim(), name)?;
    let shape = reduced_shape(x.shape(), &axes, keepdims);
    let raxes: Vec<IterVar> = axes
        .iter()
        .enumerate()
        .map(|(k, &d)| reduce_axis_n(x.shape()[d].clone(), &format!("k{k}")))
        .collect();
    let rvars: Vec<PrimExpr> = raxes.iter().map(IterVar::expr).collect();
    let ndim = x.ndim();
    compute_tagged(
        &shape,
        |i| {
            let v = x.at(&input_indices(ndim, &axes, keepdims, i, &rvars));
            if raxes.is_empty() {
                v
            } else {
                reducer(v, &raxes)
            }
        },
        name,
        tag::COMM_REDUCE,
    )
}

macro_rules! reduction {
    ($($name:ident => $f:path, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// # Errors
        /// A `ValueError` for an axis out of range or repeated.
        pub fn $name(x: &Tensor, axes: Option<&[i64]>, keepdims: bool) -> Result<Tensor> {
            reduce_with(x, axes, keepdims, stringify!($name), $f)
        }
    )*};
}

reduction! {
    sum => kiln_te::sum, "The sum over `axes` (`None`: all).";
    max => kiln_te::max, "The maximum over `axes` (`None`: all).";
    min => kiln_te::min, "The minimum over `axes` (`None`: all).";
    prod => kiln_te::prod, "The product over `axes` (`None`: all).";
}

/// The mean over `axes` (`None`: all): a sum stage (`mean_sum`) then a division by the number
/// of reduced elements (the output, tagged `elemwise`); integer means truncate toward zero.
///
/// # Errors
/// A `ValueError` for bad axes or symbolic reduced dimensions; a `TypeError` for bool inputs.
pub fn mean(x: &Tensor, axes: Option<&[i64]>, keepdims: bool) -> Result<Tensor> {
    if x.dtype().is_bool() {
        return Err(Error::type_error("mean: bool tensors have no mean"));
    }
    let ax = reduce_axes(axes, x.ndim(), "mean")?;
    let mut count = 1i64;
    for &d in &ax {
        count *= x.shape()[d].as_int().ok_or_else(|| {
            Error::value_error(format!("mean: reduced dimension {d} is symbolic"))
        })?;
    }
    let s = reduce_with(x, axes, keepdims, "mean_sum", kiln_te::sum)?;
    let inv = 1.0 / count.max(1) as f64;
    // Integers: the sum divided by the count, truncated toward zero (ONNX's reference and
    // onnxruntime).
    let integer = !s.dtype().is_floating();
    compute_tagged(
        s.shape(),
        |i| {
            if integer {
                kiln_tir::truncdiv(s.at_vars(i), constant(s.dtype(), count.max(1) as f64))
            } else {
                s.at_vars(i) * constant(s.dtype(), inv)
            }
        },
        "mean",
        tag::ELEMWISE,
    )
}
