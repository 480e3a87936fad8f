//! Kiln's graph-level IR and optimizer (TVM's Relay graph level).
//!
//! - [`ir`]: the IR, reflected `kiln-ffi` objects (`graph.Var`, `graph.Constant`, `graph.Call`,
//!   `graph.Tuple`, `graph.TupleGetItem`, `graph.Function`, `graph.TensorType`,
//!   `graph.TupleType`, `graph.IRModule`), a Relay-like printer and structural equality;
//! - [`op`]: the operator registry (attributes with defaults, type relations, fusion patterns,
//!   reference evaluators), one operator (family) per file;
//! - [`transform`]: the passes (InferType, SimplifyInference, CanonicalizeOps,
//!   EliminateCommonSubexpr, FoldConstant, FoldScaleAxis, AlterOpLayout, DeadCodeElimination,
//!   FuseOps), one per file, with the pass infrastructure and [`transform::default_pipeline`];
//! - [`build`]: the graph build (`relay.build`): fused functions lowered through TOPI, graph
//!   codegen (graph JSON, storage plan, params) and the graph executor factory.
//!
//! Building a graph:
//!
//! ```
//! use kiln_graph::ir::{Function, IRModule, Type, Var};
//! use kiln_graph::op::mk;
//! let x = Var::new("x", Type::f32(&[1, 8]));
//! let y = mk("nn.relu", vec![x.expr()], &[]);
//! let m = IRModule::from_main(Function::new(vec![x], y));
//! let m = kiln_graph::transform::infer_type().apply(m).unwrap();
//! assert!(m.to_string().contains("nn.relu(%x) /* ty=Tensor[(1, 8), float32] */"));
//! ```

pub mod build;
pub mod ir;
pub mod op;
pub mod transform;

pub use ir::{Expr, Function, IRModule, Type, Var};

/// Links this crate's registrations into a final library (called from `kiln::link_all`):
/// the `graph.build` global ([`build::link_globals`]). Operators are registered from a list at
/// first use, so they need no linking.
pub fn link_globals() -> *const () {
    std::hint::black_box(build::link_globals());
    link_globals as *const ()
}
