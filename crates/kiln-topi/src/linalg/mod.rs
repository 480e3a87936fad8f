//! Linear algebra beyond matrix products: [`det()`] (ONNX `Det`).

mod det;

pub use det::det;
