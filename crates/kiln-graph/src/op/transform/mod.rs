//! Data-movement operators (pattern `Injective`, `broadcast_to`: `Broadcast`; the scatters:
//! `Opaque`).

pub mod broadcast_to;
pub mod concatenate;
pub mod depth_to_space;
pub mod expand_dims;
pub mod flatten;
pub mod gather_elements;
pub mod gather_nd;
pub mod layout_transform;
pub mod pad;
pub mod resample;
pub mod reshape;
pub mod resize2d;
pub mod run_time;
pub mod scatter;
pub mod split;
pub mod squeeze;
pub mod strided_slice;
pub mod take;
pub mod transpose;
pub mod trilu;

use super::OpDef;

/// The definitions of this family.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    broadcast_to::defs(v);
    concatenate::defs(v);
    depth_to_space::defs(v);
    expand_dims::defs(v);
    flatten::defs(v);
    gather_elements::defs(v);
    gather_nd::defs(v);
    layout_transform::defs(v);
    pad::defs(v);
    reshape::defs(v);
    resample::defs(v);
    resize2d::defs(v);
    run_time::defs(v);
    scatter::defs(v);
    split::defs(v);
    squeeze::defs(v);
    strided_slice::defs(v);
    take::defs(v);
    transpose::defs(v);
    trilu::defs(v);
}
