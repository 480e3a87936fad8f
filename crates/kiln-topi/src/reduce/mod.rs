//! Reductions over an axis list: [`sum`], [`mean`], [`max`], [`min`], [`prod`], and the index
//! reductions [`argmax`] / [`argmin`]; with [`schedule_reduce`] as their generic schedule. Two
//! operators along one axis are reductions in form: [`cumsum`] (a masked sum per point) and
//! [`topk`] (ranks by counting, then a selection per output slot).
//!
//! [`reduce_to_shape`] reduces the axes its output's run-time shape implies.
//!
//! Axes may be negative (counted from the end); `None` reduces every axis; `keepdims` keeps
//! reduced axes as size 1. Results are tagged `comm_reduce` (`comm_reduce_idx` for the index
//! reductions).

mod arg;
mod common;
mod cumsum;
mod schedule;
mod to_shape;
mod topk;

pub use arg::{arg_extreme, argmax, argmin};
pub use common::{max, mean, min, prod, reduce_axes, reduce_with, sum};
pub use cumsum::cumsum;
pub use schedule::schedule_reduce;
pub use to_shape::{reduce_to_shape, Reducer};
pub use topk::topk;
