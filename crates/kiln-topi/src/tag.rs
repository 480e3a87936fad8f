//! Operation tags (TOPI's `tag.py`): set by the computes of this crate, read by schedules and
//! fusion.

/// Each output point reads the same point of each input.
pub const ELEMWISE: &str = "elemwise";
/// Elementwise with numpy broadcasting.
pub const BROADCAST: &str = "broadcast";
/// Each output point reads input points at computed indices (layout operators, pad, bias
/// add, ...).
pub const INJECTIVE: &str = "injective";
/// A commutative reduction over some axes.
pub const COMM_REDUCE: &str = "comm_reduce";
/// A reduction that returns an index (argmax/argmin).
pub const COMM_REDUCE_IDX: &str = "comm_reduce_idx";
/// Generic (grouped) 2-D convolution, NCHW.
pub const CONV2D_NCHW: &str = "conv2d_nchw";
/// 2-D convolution computed in blocks of output channels (`[N, O/b, OH, OW, b]`).
pub const CONV2D_NCHWC: &str = "conv2d_nchwc";
/// One pass of a [`CONV2D_NCHWC`] summed over a chunk of its input channels
/// (`[passes, N, O/b, OH, OW, b]`), which the blocked product adds up.
pub const CONV2D_NCHWC_PARTIAL: &str = "conv2d_nchwc_partial";
/// A 1x1 [`CONV2D_NCHWC`] over its flattened output positions (`[N, O/b, OH*OW, b]`).
pub const CONV2D_NCHWC_FLAT: &str = "conv2d_nchwc_flat";
/// [`CONV2D_NCHWC`] whose groups are padded to whole blocks (blocks do not line up with
/// output channels).
pub const CONV2D_NCHWC_GROUP_PADDED: &str = "conv2d_nchwc_group_padded";
/// The output transform of a Winograd convolution (`crate::nn::conv2d_winograd`).
pub const CONV2D_WINOGRAD: &str = "conv2d_winograd";
/// A 1x1 convolution as a product over flattened spatial positions (`[N, O, H*W]`).
pub const CONV2D_1X1_SPATIAL: &str = "conv2d_1x1_spatial";
/// Depthwise 2-D convolution, NCHW.
pub const DEPTHWISE_CONV2D_NCHW: &str = "depthwise_conv2d_nchw";
/// Depthwise 2-D convolution in channel blocks (`[N, C/b, OH, OW, b]`, a vector of `b`
/// channels meeting a vector of their `b` filters' taps).
pub const DEPTHWISE_CONV2D_NCHWC: &str = "depthwise_conv2d_nchwc";
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
