//! Neural-network operators: computes in NCHW layout (float32 first), one operator per file.
//!
//! Every compute takes `kiln_te::Tensor`s with constant shapes plus a plain attribute struct
//! and returns the output tensor; the matching schedules live in [`crate::schedule`]. Operation
//! tags (see [`tag`]) name what an operation is so schedules can find it from the output.

pub mod batch_matmul;
pub mod batch_norm;
pub mod conv2d;
pub mod conv2d_1x1;
pub mod conv2d_packed;
pub mod conv2d_transpose;
pub mod deformable_conv2d;
pub mod dense;
pub mod global_pool2d;
pub mod layer_norm;
pub mod log_softmax;
pub mod matmul;
pub mod pad;
pub mod pool2d;
pub mod recurrent;
pub mod softmax;

pub use batch_matmul::batch_matmul;
pub use batch_norm::{batch_norm_inference, BatchNormAttrs};
pub use conv2d::{conv2d, Conv2dAttrs};
pub use conv2d_1x1::conv2d_1x1;
pub use conv2d_packed::conv2d_packed;
pub use conv2d_transpose::{conv2d_transpose, Conv2dTransposeAttrs};
pub use deformable_conv2d::{deformable_conv2d, schedule_deformable_conv2d};
pub use dense::{dense, dense_packed};
pub use global_pool2d::{global_avg_pool2d, global_max_pool2d};
pub use layer_norm::{layer_norm, LayerNormAttrs};
pub use log_softmax::log_softmax;
pub use matmul::{matmul, MatmulAttrs};
pub use pad::{pad_nchw, Padding2d};
pub use pool2d::{avg_pool2d, max_pool2d, Pool2dAttrs};
pub use recurrent::{recurrent, Activation, ActivationKind, Cell, RecurrentInputs};
pub use softmax::softmax;

use kiln_ffi::{Error, Result};
use kiln_te::tensor::compute_axes;
use kiln_te::{compute_op, Tensor};
use kiln_tir::{PrimExpr, Var};

/// Operation tags set by the computes of this module (TOPI's `tag`).
pub mod tag {
    /// A point-by-point op whose output index maps to input indices (pad, bias add, ...).
    pub const INJECTIVE: &str = "injective";
    /// Elementwise op of one shape.
    pub const ELEMWISE: &str = "elemwise";
    /// Elementwise op with broadcasting.
    pub const BROADCAST: &str = "broadcast";
    /// A reduction over some axes.
    pub const COMM_REDUCE: &str = "comm_reduce";
    /// Generic (grouped) 2-D convolution, NCHW.
    pub const CONV2D_NCHW: &str = "conv2d_nchw";
    /// 2-D convolution computed in blocks of output channels (`[N, O/b, OH, OW, b]`).
    pub const CONV2D_NCHWC: &str = "conv2d_nchwc";
    /// [`CONV2D_NCHWC`] whose groups are padded to whole blocks (blocks do not line up with
    /// output channels).
    pub const CONV2D_NCHWC_GROUP_PADDED: &str = "conv2d_nchwc_group_padded";
    /// A 1x1 convolution as a product over flattened spatial positions (`[N, O, H*W]`).
    pub const CONV2D_1X1_SPATIAL: &str = "conv2d_1x1_spatial";
    /// Depthwise 2-D convolution, NCHW.
    pub const DEPTHWISE_CONV2D_NCHW: &str = "depthwise_conv2d_nchw";
    /// Transposed 2-D convolution, NCHW.
    pub const CONV2D_TRANSPOSE_NCHW: &str = "conv2d_transpose_nchw";
    /// `x · Wᵀ`.
    pub const DENSE: &str = "dense";
    /// `A · B` (2-D, optional transposes).
    pub const MATMUL: &str = "matmul";
    /// Batched `A · B`.
    pub const BATCH_MATMUL: &str = "batch_matmul";
    /// 2-D pooling (max or average).
    pub const POOL2D: &str = "pool2d";
    /// Global pooling over H and W.
    pub const GLOBAL_POOL2D: &str = "global_pool2d";
    /// The output of softmax / log-softmax.
    pub const SOFTMAX_OUTPUT: &str = "softmax_output";
    /// The output of layer norm.
    pub const LAYER_NORM_OUTPUT: &str = "layer_norm_output";

    /// Whether `tag` names an injective op (injective, elementwise or broadcast).
    pub fn is_injective(tag: &str) -> bool {
        tag.starts_with(INJECTIVE) || tag.starts_with(ELEMWISE) || tag.starts_with(BROADCAST)
    }
}

/// A compute like [`kiln_te::compute`] with an operation `tag`.
pub fn compute_tagged(
    shape: &[PrimExpr],
    f: impl FnOnce(&[Var]) -> PrimExpr,
    name: &str,
    tag: &str,
) -> Result<Tensor> {
    let axis = compute_axes(shape);
    let vars: Vec<Var> = axis.iter().map(|iv| iv.var().clone()).collect();
    let body = f(&vars);
    let op = compute_op(name, tag, kiln_ffi::Map::new(Vec::new()), axis, vec![body])?;
    Ok(op.output(0))
}

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

/// An int32 constant.
pub fn c(v: i64) -> PrimExpr {
    PrimExpr::i32(v)
}

/// int32 constants for every entry of `dims`.
pub fn consts(dims: &[i64]) -> Vec<PrimExpr> {
    dims.iter().map(|&d| c(d)).collect()
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
