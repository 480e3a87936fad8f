//! Neural-network operators: computes in NCHW layout (float32 first), one operator per file.
//!
//! Every compute takes `kiln_te::Tensor`s with constant shapes plus a plain attribute struct
//! and returns the output tensor; the matching schedules live in [`crate::schedule`]. Operation
//! tags (see [`tag`]) name what an operation is so schedules can find it from the output.

pub mod batch_matmul;
pub mod batch_norm;
pub mod col2im;
pub mod conv2d;
pub mod conv2d_1x1;
pub mod conv2d_packed;
pub mod conv2d_transpose;
pub mod conv2d_winograd;
pub mod deformable_conv2d;
pub mod dense;
pub mod dense_dot4;
pub mod global_pool2d;
pub mod im2col;
pub mod layer_norm;
pub mod log_softmax;
pub mod matmul;
pub mod pad;
pub mod pool2d;
pub mod recurrent;
pub mod row_reduce;
pub mod softmax;

pub use batch_matmul::batch_matmul;
pub use batch_norm::{batch_norm_inference, BatchNormAttrs};
pub use conv2d::{conv2d, conv2d_run_time, Conv2dAttrs};
pub use conv2d_1x1::conv2d_1x1;
pub use conv2d_packed::{conv2d_packed, conv2d_packed_in, PackedLayouts};
pub use conv2d_transpose::{conv2d_transpose, Conv2dTransposeAttrs};
pub use deformable_conv2d::{deformable_conv2d, schedule_deformable_conv2d};
pub use dense::{dense, dense_packed};
pub use dense_dot4::{dense_dot4, pack_dot4_weight};
pub use global_pool2d::{global_avg_pool2d, global_max_pool2d};
pub use im2col::{im2col, schedule_im2col};
pub use layer_norm::{layer_norm, layer_norm_in_lanes, LayerNormAttrs};
pub use log_softmax::log_softmax;
pub use matmul::{matmul, MatmulAttrs};
pub use pad::{pad_nchw, Padding2d};
pub use pool2d::{avg_pool2d, max_pool2d, Pool2dAttrs};
pub use recurrent::{recurrent, Activation, ActivationKind, Cell, RecurrentInputs};
pub use softmax::softmax;

use kiln_ffi::{DataType, Error, Result};
use kiln_te::Tensor;
use kiln_tir::{DataTypeExt, PrimExpr};

/// A compute of `shape` with an operation `tag` (the one of [`crate::transform::util`]).
pub use crate::transform::util::compute_tagged;

/// The constant shape of `t`, or an error naming `what`.
pub fn const_shape(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    t.shape()
        .iter()
        .map(|d| {
            d.as_int().ok_or_else(|| {
                Error::value_error(format!(
                    "{what}: `{}` needs a constant shape, got dimension {d}",
                    t.name()
                ))
            })
        })
        .collect()
}

/// `const_shape` checked to have `ndim` dimensions.
pub fn shape_nd(t: &Tensor, ndim: usize, what: &str) -> Result<Vec<i64>> {
    let s = const_shape(t, what)?;
    if s.len() != ndim {
        return Err(Error::value_error(format!(
            "{what}: `{}` must be {ndim}-D, got shape {s:?}",
            t.name()
        )));
    }
    Ok(s)
}

/// The shape of NCHW data (4-D) or of data in channel blocks (`[N, C/b, H, W, b]`, 5-D), the
/// two layouts spatial operators (padding, pooling) take; an error names `what` otherwise.
pub fn nchw_or_blocks_shape(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    shape_nd(t, if t.ndim() == 5 { 5 } else { 4 }, what)
}

/// The dimensions of `t`, `NCHW` or `NCHW{b}c` (rank 4 or 5), any of them possibly known only
/// at run time.
pub fn nchw_or_blocks_dims(t: &Tensor, what: &str) -> Result<Vec<PrimExpr>> {
    if t.ndim() != 4 && t.ndim() != 5 {
        return Err(invalid(
            what,
            format!("`{}` must have rank 4 or 5, got {}", t.name(), t.ndim()),
        ));
    }
    Ok(t.shape().to_vec())
}

/// `d + n`, folded when `d` is a constant.
pub fn plus(d: &PrimExpr, n: i64) -> PrimExpr {
    match d.as_int() {
        Some(v) => PrimExpr::i32(v + n),
        None => d.clone() + n,
    }
}

/// Whether every dimension of `t` is static.
pub fn is_static(t: &Tensor) -> bool {
    t.shape().iter().all(|d| d.is_const())
}

/// [`window_out`] over an input extent that may be known only at run time (then the output's
/// extent is an expression; a window longer than the padded input gives a negative extent,
/// which the shape's computation refuses at run time).
pub fn window_out_expr(
    input: &PrimExpr,
    pad_sum: i64,
    k: i64,
    stride: i64,
    dilation: i64,
    what: &str,
) -> Result<PrimExpr> {
    if let Some(n) = input.as_int() {
        return window_out(n, pad_sum, k, stride, dilation, what).map(c);
    }
    // The checks of the attributes, on a size that always fits.
    window_out(dilation * (k - 1) + 1, 0, k, stride, dilation, what)?;
    let span = dilation * (k - 1) + 1;
    Ok(kiln_tir::floordiv(input.clone() + (pad_sum - span), stride) + 1)
}

/// An int32 constant.
pub fn c(v: i64) -> PrimExpr {
    PrimExpr::i32(v)
}

/// int32 constants for every entry of `dims`.
pub fn consts(dims: &[i64]) -> Vec<PrimExpr> {
    dims.iter().map(|&d| c(d)).collect()
}

/// The dtype a matrix product (dense, matmul) of operands of dtypes `a` (data) and `b`
/// (weight) computes and returns: their common dtype, or `a` when `a` is a float and `b` an
/// integer (weight-only quantization: the integer weight is converted on each read, so it stays
/// 8-bit in memory); `None` for any other mix.
pub fn product_dtype(a: DataType, b: DataType) -> Option<DataType> {
    if a == b || (a.is_floating() && b.is_integer() && !b.is_bool() && !b.is_byte_code()) {
        Some(a)
    } else {
        None
    }
}

/// Element `idx` of operand `t` of a product computing in `dtype` (see [`product_dtype`]),
/// converted when stored in another dtype.
pub(crate) fn read_as(t: &Tensor, idx: &[PrimExpr], dtype: DataType) -> PrimExpr {
    let v = t.at(idx);
    if t.dtype() == dtype {
        v
    } else {
        v.cast(dtype)
    }
}

/// [`product_dtype`] of `a` and `b`, or an error naming `what` and both dtypes.
pub(crate) fn product_dtype_of(a: &Tensor, b: &Tensor, what: &str) -> Result<DataType> {
    product_dtype(a.dtype(), b.dtype()).ok_or_else(|| {
        invalid(
            what,
            format!(
                "`{}` is {} and `{}` is {}: a product needs one dtype, or float data and an integer weight",
                a.name(),
                a.dtype(),
                b.name(),
                b.dtype()
            ),
        )
    })
}

/// A value error for `what`.
pub fn invalid(what: &str, msg: impl std::fmt::Display) -> Error {
    Error::value_error(format!("{what}: {msg}"))
}

/// The output extent of a sliding window: `(in + pad_sum - dilation*(k-1) - 1) / stride + 1`.
pub fn window_out(
    input: i64,
    pad_sum: i64,
    k: i64,
    stride: i64,
    dilation: i64,
    what: &str,
) -> Result<i64> {
    if stride < 1 || dilation < 1 || k < 1 {
        return Err(invalid(
            what,
            format!("stride {stride}, dilation {dilation}, kernel {k} must be >= 1"),
        ));
    }
    let span = dilation * (k - 1) + 1;
    let out = (input + pad_sum - span).div_euclid(stride) + 1;
    if input + pad_sum < span || out < 1 {
        return Err(invalid(
            what,
            format!("window {span} larger than padded input {}", input + pad_sum),
        ));
    }
    Ok(out)
}
