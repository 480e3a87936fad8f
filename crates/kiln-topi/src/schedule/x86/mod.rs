//! x86 schedules (AVX2 / AVX-512 through `llvm -mcpu=native`): outer loops parallel, the
//! innermost output dimension vectorized, register tiles for convolutions and products.
//!
//! Tiles only use factors that divide the extents, so no stage is guarded; odd extents fall
//! back to smaller or no vectors.

pub mod conv2d;
pub mod conv2d_flat;
pub mod dense;
pub mod norm;
pub mod pool;

pub use conv2d::schedule_conv2d_nchw;
pub use dense::schedule_dense;
pub use norm::{schedule_layer_norm, schedule_softmax};
pub use pool::schedule_pool;

use kiln_ffi::Result;

/// The tuning choices for how many column or channel blocks one register tile holds: 1 to 4,
/// dividing `blocks` (the tiles [`dense::matrix_tile`] and [`conv2d::register_tile`] pick from).
pub fn block_choices(blocks: i64) -> Vec<i64> {
    (1..=4).filter(|t| blocks.max(1) % t == 0).collect()
}
use kiln_te::{Operation, Schedule, Stage, Tensor};

/// The stage computing `op` with its results written by a cache stage when `op` is the
/// output (so the reduction accumulates in a local buffer), or `op`'s own stage computed inside
/// the output's tile when `out` is an epilogue: `(main stage, main tensor, compute stage)`.
pub(crate) fn main_and_compute(
    s: &Schedule,
    out: &Tensor,
    op: &Operation,
) -> Result<(Stage, Tensor, Stage)> {
    if out.op().same_as(op) {
        let cl = s.cache_write(out, "local")?;
        Ok((s.stage(out), out.clone(), s.stage(&cl)))
    } else {
        Ok((s.stage(out), out.clone(), s.stage_op(op)))
    }
}
