//! The graph-level IR: types, expressions, attributes, modules, traversal, printing and
//! structural equality.

pub mod attrs;
pub mod expr;
pub mod module;
pub mod printer;
pub mod structural;
pub mod ty;
pub mod visit;

pub use attrs::{AttrValue, Attrs};
pub use expr::{
    CallObj, ConstantObj, Expr, Function, FunctionObj, OpObj, TupleGetItemObj, TupleObj, Var,
    VarObj,
};
pub use module::{IRModule, IRModuleObj};
pub use structural::{assert_structural_equal, structural_equal};
pub use ty::{TensorTypeObj, TupleTypeObj, Type};
