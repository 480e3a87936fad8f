//! Layout and other injective operators: each output point reads input points at computed
//! indices. All need static shapes (a `ValueError` names the symbolic dimension otherwise)
//! and are tagged `injective`; [`schedule_injective`] is their generic schedule.
//!
//! | operator | ONNX |
//! | --- | --- |
//! | [`reshape()`] (`0` copies, `-1` infers) | `Reshape` |
//! | [`transpose()`] | `Transpose` |
//! | [`flatten()`] | `Flatten` |
//! | [`squeeze()`], [`unsqueeze()`], [`expand_dims()`] | `Squeeze`, `Unsqueeze` |
//! | [`concatenate()`] | `Concat` |
//! | [`split()`] ([`SplitSpec`]) | `Split` |
//! | [`strided_slice()`] | `Slice` |
//! | [`pad()`] ([`PadMode`]) | `Pad` |
//! | [`take()`], [`gather_elements()`], [`gather_nd()`] | `Gather`, `GatherElements`, `GatherND` |
//! | [`scatter_elements()`], [`scatter_nd()`] | `ScatterElements`, `ScatterND` |
//! | [`resize2d()`] ([`ResizeMethod`], [`CoordMode`], [`NearestMode`]) | `Resize` |
//! | [`tile()`] | `Tile` |
//! | [`depth_to_space()`] ([`DepthToSpaceMode`]) | `DepthToSpace` |
//! | [`layout_transform()`] ([`Layout`]) | (packed weights, from `AlterOpLayout`) |
//!
//! [`run_time`] holds the operators whose extents are known only at run time (ConstantOfShape,
//! Range and Slice by run-time inputs).

mod concatenate;
mod depth_to_space;
mod flatten;
pub mod layout;
mod pad;
pub mod resample;
mod reshape;
mod resize;
pub mod run_time;
mod scatter;
pub mod schedule;
pub mod spectral;
mod split;
mod squeeze;
mod strided_slice;
mod take;
mod tile;
mod transpose;
mod trilu;
pub mod util;

pub use concatenate::concatenate;
pub use depth_to_space::{depth_to_space, DepthToSpaceMode};
pub use flatten::flatten;
pub use layout::{layout_transform, Layout};
pub use pad::{pad, PadMode};
pub use reshape::{infer_reshape, reshape};
pub use resize::{resize2d, resize2d_inner, CoordMode, NearestMode, ResizeMethod};
pub use scatter::{scatter_elements, scatter_nd, ScatterReduction};
pub use schedule::{create_injective_schedule, schedule_injective};
pub use split::{split, SplitSpec};
pub use squeeze::{expand_dims, squeeze, unsqueeze};
pub use strided_slice::{slice_params, strided_slice};
pub use take::{clamp_index, gather_elements, gather_nd, take, wrap_index};
pub use tile::tile;
pub use transpose::transpose;
pub use trilu::trilu;
