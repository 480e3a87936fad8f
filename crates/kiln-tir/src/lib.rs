//! Kiln's tensor-level IR (TIR), in the design of Apache TVM's `tir`: what tensor expressions
//! lower to, what passes transform and what code generation reads.
//!
//! Every node is a reflected `kiln-ffi` object (type keys as TVM's: `tir.Add`, `tir.For`,
//! `tir.PrimFunc`, ...), so C and Python can build, walk, print and serialize the IR; Rust code
//! holds typed handles and matches on kind views.
//!
//! | module | what |
//! | --- | --- |
//! | [`expr`] | [`PrimExpr`] (constants, [`Var`], arithmetic, comparisons, logic, cast, select, let, buffer loads, ramp, broadcast, calls), [`ExprKind`], builders and operators |
//! | [`stmt`] | [`Stmt`] (for, buffer store, allocate, decl buffer, if, let, sequence, attribute, assert, evaluate), [`StmtKind`], [`ForKind`] |
//! | [`buffer`] | [`Buffer`] |
//! | [`cpu`] | [`CpuDesc`]: the CPU a program is compiled for (vector width, registers, FMA, caches), read by schedules and layout passes |
//! | [`function`] | [`Range`], [`PrimFunc`], [`IRModule`] |
//! | [`op`] | intrinsics and builtins called by name (`tir.exp`, `tir.call_packed`, ...) |
//! | [`printer`] | the TVMScript-like text form (`Display` of every handle) |
//! | [`structural`] | structural equality and hashing with variables matched by definition |
//! | [`thread_axis`] | GPU thread tags (`blockIdx.x`, `threadIdx.y`, ...) and the `thread_extent` attribute that launches them |
//! | [`visitor`], [`mutator`] | traversal and copy-on-write rewriting, substitution, use/def analysis |
//! | [`arith`] | the [`Analyzer`]: constant folding, canonical linear forms, division rules, bounds, proofs, simplification |
//! | [`dtype`] | [`DataTypeExt`]: predicates and limits of `kiln_ffi::DataType` |
//!
//! ```
//! use kiln_tir::*;
//! let f32 = DataType::float(32);
//! let (a, b, c) = (
//!     Buffer::decl("A", f32, vec![PrimExpr::i32(128)]),
//!     Buffer::decl("B", f32, vec![PrimExpr::i32(128)]),
//!     Buffer::decl("C", f32, vec![PrimExpr::i32(128)]),
//! );
//! let i = Var::int32("i");
//! let body = Stmt::for_loop(&i, 0, 128, ForKind::Serial,
//!     c.store(a.load(vec![i.to_expr()]) + b.load(vec![i.to_expr()]), vec![i.to_expr()]));
//! assert_eq!(body.to_string(), "for i in range(0, 128):\n    C[i] = A[i] + B[i]");
//! let f = PrimFunc::from_buffers("add", &[a, b, c], body);
//! let back: PrimFunc = from_json(&to_json(&f).unwrap()).unwrap();
//! assert!(structural_equal(&f, &back));
//! ```
//!
//! # Global functions
//!
//! Registered at start-up for C and Python (a later `kiln.tir` binds them as TVM's `_ffi_api`).
//! Arguments in order; `?` marks optional (None) ones. Expression arguments also accept Python
//! `int` (an `int32` constant, `int64` when large), `float` (`float32`) and `bool`.
//!
//! - Expressions: `tir.Var(name, dtype)`, `tir.SizeVar(name, dtype)`, `tir.IntImm(dtype, value)`,
//!   `tir.FloatImm(dtype, value)`, `tir.StringImm(value)`, `tir.Add`/`Sub`/`Mul`/`Div`/`Mod`/
//!   `FloorDiv`/`FloorMod`/`Min`/`Max`/`EQ`/`NE`/`LT`/`LE`/`GT`/`GE`/`And`/`Or(a, b)`,
//!   `tir.Not(a)`, `tir.Cast(dtype, value)`, `tir.Select(cond, t, f)`, `tir.Let(var, value,
//!   body)`, `tir.BufferLoad(buffer, indices)`, `tir.Ramp(base, stride, lanes)`,
//!   `tir.Broadcast(value, lanes)`, `tir.Call(dtype, op_name, args)`. These build exactly the
//!   node (dtype-checked: a literal operand adapts to the other operand's type).
//! - Operator builders with constant folding (TVM's `tir._Op*`): `tir._OpAdd`, `_OpSub`,
//!   `_OpMul`, `_OpDiv`, `_OpMod`, `_OpFloorDiv`, `_OpFloorMod`, `_OpMin`, `_OpMax`, `_OpEQ`,
//!   `_OpNE`, `_OpLT`, `_OpLE`, `_OpGT`, `_OpGE`, `_OpAnd`, `_OpOr` `(a, b)`.
//! - Statements: `tir.For(loop_var, min, extent, kind, body, annotations?)` (kind: 0 serial,
//!   1 parallel, 2 vectorized, 3 unrolled, 4 thread binding), `tir.BufferStore(buffer, value,
//!   indices)`, `tir.Allocate(buffer_var, dtype, extents, condition, body, annotations?,
//!   scope?)`, `tir.DeclBuffer(buffer, body)`, `tir.IfThenElse(cond, then, else?)`,
//!   `tir.LetStmt(var, value, body)`, `tir.SeqStmt(stmts)`, `tir.AttrStmt(node, key, value,
//!   body)`, `tir.AssertStmt(cond, message, body)`, `tir.Evaluate(value)`.
//! - Buffers and functions: `tir.Buffer(data, dtype, shape, strides, elem_offset, name, scope,
//!   data_alignment, offset_factor)`, `tir.decl_buffer(shape, dtype, name, scope?)`,
//!   `tir.PrimFunc(params, body, ret_type?, buffer_map?, attrs?)`, `ir.IRModule(functions)`,
//!   `ir.Range(begin, end)`, `ir.Range_from_min_extent(min, extent)`.
//! - Text, comparison, analysis: `tir.AsText(node)`, `node.StructuralEqual(a, b, assert_mode,
//!   map_free_vars)`, `node.StructuralHash(node, map_free_vars)`, `arith.Simplify(expr,
//!   ranges?)`, `arith.CanProve(cond, ranges?)`, `arith.ConstIntBound(expr, ranges?)` (`[min,
//!   max]`), `tir.Simplify(stmt)`, `tir.Substitute(expr_or_stmt, {var: expr})`,
//!   `tir.analysis.UndefinedVars(stmt)`. `ranges` maps variables to `ir.Range`s.
//! - JSON goes through `kiln-ffi`'s `kiln.ffi.ToJSON` / `kiln.ffi.FromJSON` (every node is
//!   reflected); [`to_json`] / [`from_json`] here are typed shortcuts.
//!
//! Nodes can also be built field by field from C/Python through `kiln.ffi.MakeObject` (no dtype
//! checks there, as with JSON).

pub mod arith;
pub mod buffer;
pub mod cpu;
pub mod dtype;
pub mod expr;
pub mod fast_math;
pub mod function;
mod globals;
pub mod mutator;
pub mod node;
pub mod op;
pub mod printer;
pub mod stmt;
pub mod structural;
pub mod thread_axis;
pub mod transform;
pub mod visitor;

pub use arith::{Analyzer, ConstIntBound};
pub use buffer::Buffer;
pub use cpu::{CacheSizes, CpuDesc};
pub use dtype::DataTypeExt;
pub use expr::{
    cast, floordiv, floormod, let_expr, logical_and, logical_not, logical_or, max, min, select,
    truncdiv, truncmod, BinOp, ExprKind, Operand, PrimExpr, Var,
};
pub use function::{IRModule, PrimFunc, Range};
pub use globals::link_globals;
pub use kiln_ffi::DataType;
pub use node::{NodeList, NodeMap};
pub use stmt::{ForKind, Stmt, StmtKind};
pub use structural::{
    assert_structural_equal, structural_equal, structural_equal_with, structural_hash,
    structural_hash_with, Structural,
};

/// Serializes any IR node (or value) to `kiln-ffi`'s JSON graph format.
pub fn to_json(node: &(impl Clone + Into<kiln_ffi::Any>)) -> kiln_ffi::Result<String> {
    let any: kiln_ffi::Any = node.clone().into();
    kiln_ffi::json::to_json(&any.view())
}

/// Rebuilds a node of type `T` from [`to_json`]'s output.
pub fn from_json<T: kiln_ffi::TryFromAny>(text: &str) -> kiln_ffi::Result<T> {
    kiln_ffi::json::from_json(text)?.try_as::<T>()
}
