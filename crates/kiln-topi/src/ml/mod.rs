//! Classical machine-learning operators (ONNX's `ai.onnx.ml` domain): [`tree_ensemble()`].

pub mod tree_ensemble;

pub use tree_ensemble::{mode, tree_ensemble, Aggregate, TreeTables};
