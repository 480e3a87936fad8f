//! Kiln's operator library (TOPI): tensor-expression computes and schedules for neural-network
//! operators, one operator per file.
//!
//! - [`nn`]: convolutions, dense/matmul, pooling, softmax, normalization.
//! - [`elemwise`], [`broadcast`], [`reduce`], [`transform`]: injective, reduction and layout ops.
//! - [`linalg`]: the determinant; [`ml`]: decision-tree ensembles.
//! - [`schedule`]: x86 schedules and the generic fallback (which operator takes which is
//!   declared with the operator in `kiln-graph`'s op registry).

pub mod broadcast;
pub mod elemwise;
pub mod extent;
pub mod linalg;
pub mod ml;
pub mod nn;
pub mod reduce;
pub mod schedule;
pub mod tag;
pub mod transform;
pub mod tuning;
