//! Binary operators with numpy broadcasting, `where`, and `broadcast_to` / `expand`.
//!
//! Broadcasting follows numpy: shapes align on the right, a missing or size-1 dimension
//! stretches to the other operand's size, anything else must match
//! ([`broadcast_shape`] says which dimension does not, with both shapes).

mod binary;
mod broadcast_to;
mod shape;
mod where_;

pub use binary::*;
pub use broadcast_to::{broadcast_to, expand};
pub use shape::{broadcast_index, broadcast_shape, broadcast_shapes};
pub use where_::where_;
