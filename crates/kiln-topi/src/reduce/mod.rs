//! Reductions over an axis list: [`sum`], [`mean`], [`max`], [`min`], [`prod`], and the index
//! reductions [`argmax`] / [`argmin`]; with [`schedule_reduce`] as their generic schedule.
//!
//! Axes may be negative (counted from the end); `None` reduces every axis; `keepdims` keeps
//! reduced axes as size 1. Results are tagged `comm_reduce` (`comm_reduce_idx` for the index
//! reductions).

mod arg;
mod common;
mod schedule;

pub use arg::{arg_extreme, argmax, argmin};
pub use common::{max, mean, min, prod, reduce_axes, reduce_with, sum};
pub use schedule::schedule_reduce;
