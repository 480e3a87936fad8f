//! Hand-built packed-API functions in the shape MakePackedAPI + LowerTVMBuiltin produce, and
//! helpers to run them (shared by the `codegen_*` tests).
#![allow(dead_code)]

use kiln_ffi::DataType;
use kiln_runtime::tensor::Tensor;
use kiln_tir::op::builtin::{TVM_STRUCT_GET, TVM_STRUCT_SET};
use kiln_tir::op::struct_field as sf;
use kiln_tir::op::{self};
use kiln_tir::{Buffer, DataTypeExt, IRModule, PrimExpr, PrimFunc, Stmt, Var};
use std::path::PathBuf;

/// A parameter of a hand-built function.
pub enum Param {
    /// A 1-D tensor; its shape entry is a constant or a (int32) variable bound from the shape.
    Tensor(Buffer),
    /// An int64/int32/float scalar.
    Scalar(Var),
}

fn struct_get(t: DataType, h: &Var, i: i64, field: i64) -> PrimExpr {
    PrimExpr::call(
        t,
        TVM_STRUCT_GET,
        vec![h.to_expr(), PrimExpr::i32(i), PrimExpr::i32(field)],
    )
}

/// A 1-D float/int buffer with shape `[n]`.
pub fn buf(name: &str, dtype: DataType, n: impl Into<kiln_tir::Operand>) -> Buffer {
    Buffer::decl(name, dtype, vec![n.into().into_expr()])
}

/// Builds `name(params...)` in the packed calling convention around `body`: arity check,
/// argument type checks (TypeError texts as TVM's), DLTensor unpacking (ndim, dtype, shape
/// binding or checking), the data pointers bound by LetStmt, and a None result.
pub fn packed_func(name: &str, params: &[Param], body: Stmt) -> PrimFunc {
    let self_h = Var::handle("self_handle");
    let args = Var::handle("args");
    let num_args = Var::int32("num_args");
    let result = Var::handle("result");
    let i32t = DataType::int(32);
    let set_result = Stmt::evaluate(PrimExpr::call(
        i32t,
        TVM_STRUCT_SET,
        vec![
            result.to_expr(),
            PrimExpr::i32(0),
            PrimExpr::i32(sf::ANY_TYPE_INDEX),
            PrimExpr::i32(0),
        ],
    ));
    let ret = Stmt::evaluate(PrimExpr::call(
        i32t,
        op::builtin::RET,
        vec![PrimExpr::i32(0)],
    ));
    let mut stmt = Stmt::seq(vec![body, set_result, ret]);
    let mut bound: Vec<Var> = Vec::new();
    // Build from the last parameter outwards; each wraps what follows.
    let mut wrappers: Vec<Box<dyn Fn(Stmt) -> Stmt>> = Vec::new();
    for (i, p) in params.iter().enumerate() {
        let i = i as i64;
        let args = args.clone();
        let fname = name.to_string();
        match p {
            Param::Scalar(v) => {
                let v = v.clone();
                wrappers.push(Box::new(move |s| {
                    let ti = Var::int32(&format!("arg{i}.type_index"));
                    let (want, field, tname) = if v.dtype().is_floating() {
                        (3, sf::ANY_FLOAT64, "float")
                    } else {
                        (1, sf::ANY_INT64, "int")
                    };
                    let val = struct_get(v.dtype(), &args, i, field);
                    Stmt::let_stmt(
                        &ti,
                        struct_get(i32t, &args, i, sf::ANY_TYPE_INDEX),
                        Stmt::assert(
                            ti.equal(want),
                            &format!(
                                "TypeError: Mismatched type on argument #{i} when calling: \
                                 `{fname}`, expected {tname}"
                            ),
                            Stmt::let_stmt(&v, val, s),
                        ),
                    )
                }));
            }
            Param::Tensor(b) => {
                let b = b.clone();
                let shape_var = b.shape()[0].as_var();
                let bind_shape = match &shape_var {
                    Some(v) if !bound.contains(v) => {
                        bound.push(v.clone());
                        true
                    }
                    _ => false,
                };
                wrappers.push(Box::new(move |s| {
                    let ti = Var::int32(&format!("arg{i}.type_index"));
                    let raw = Var::handle(&format!("arg{i}.ptr"));
                    let dl = Var::handle(&format!("{}.dl", b.name()));
                    let shape_h = Var::handle(&format!("{}.shape", b.name()));
                    let shape_buf = Buffer::new(
                        shape_h.clone(),
                        DataType::int(64),
                        vec![PrimExpr::i32(1)],
                        vec![],
                        PrimExpr::i32(0),
                        &format!("{}_shape", b.name()),
                        "global",
                        8,
                        1,
                    )
                    .unwrap();
                    let dims = shape_buf.load(vec![PrimExpr::i32(0)]);
                    let shape0 = &b.shape()[0];
                    let (inner, check_n): (Stmt, Option<PrimExpr>) = match (&shape0.as_var(), bind_shape) {
                        (Some(v), true) => (
                            Stmt::let_stmt(v, dims.cast(v.dtype()), s.clone()),
                            None,
                        ),
                        _ => (s.clone(), Some(dims.equal(shape0.cast(DataType::int(64))))),
                    };
                    let data_stmt = Stmt::let_stmt(
                        b.data(),
                        struct_get(DataType::handle(), &dl, 0, sf::DL_DATA),
                        Stmt::decl_buffer(b.clone(), inner),
                    );
                    let body = match check_n {
                        Some(c) => Stmt::assert(
                            c,
                            &format!(
                                "ValueError: Argument {}.shape[0] has an unsatisfied constraint",
                                b.name()
                            ),
                            data_stmt,
                        ),
                        None => data_stmt,
                    };
                    let dt = b.dtype();
                    let dtype_ok = struct_get(DataType::uint(8), &dl, 0, sf::DL_DTYPE_CODE)
                        .equal(PrimExpr::const_int(DataType::uint(8), dt.code() as i64))
                        .logical_and(
                            struct_get(DataType::uint(8), &dl, 0, sf::DL_DTYPE_BITS)
                                .equal(PrimExpr::const_int(DataType::uint(8), dt.bits() as i64)),
                        );
                    let with_shape = Stmt::let_stmt(
                        &shape_h,
                        struct_get(DataType::handle(), &dl, 0, sf::DL_SHAPE),
                        Stmt::decl_buffer(shape_buf, body),
                    );
                    let checks = Stmt::assert(
                        struct_get(i32t, &dl, 0, sf::DL_NDIM).equal(1),
                        &format!(
                            "ValueError: Argument {}.ndim has an unsatisfied constraint: 1 == {}.ndim",
                            b.name(),
                            b.name()
                        ),
                        Stmt::assert(
                            dtype_ok,
                            &format!(
                                "TypeError: Argument {}.dtype has an unsatisfied constraint: expected {}",
                                b.name(),
                                dt
                            ),
                            with_shape,
                        ),
                    );
                    // dl = ti == 70 ? ptr + 24 : ptr
                    let as_int = PrimExpr::call(
                        DataType::int(64),
                        op::REINTERPRET,
                        vec![raw.to_expr()],
                    );
                    let plus = PrimExpr::call(DataType::handle(), op::REINTERPRET, vec![&as_int + 24i64]);
                    let dl_val = op::if_then_else(ti.equal(70), plus, raw.to_expr());
                    let ok_type = ti.equal(7).logical_or(ti.equal(70));
                    Stmt::let_stmt(
                        &ti,
                        struct_get(i32t, &args, i, sf::ANY_TYPE_INDEX),
                        Stmt::assert(
                            ok_type,
                            &format!(
                                "TypeError: Mismatched type on argument #{i} when calling: \
                                 `{fname}`, expected Tensor"
                            ),
                            Stmt::let_stmt(
                                &raw,
                                struct_get(DataType::handle(), &args, i, sf::ANY_PTR),
                                Stmt::let_stmt(&dl, dl_val, checks),
                            ),
                        ),
                    )
                }));
            }
        }
    }
    for w in wrappers.iter().rev() {
        stmt = w(stmt);
    }
    let n = params.len() as i64;
    let body = Stmt::assert(
        num_args.equal(n as i32),
        &format!("TypeError: Expected {n} arguments when calling: `{name}`"),
        stmt,
    );
    let attrs = kiln_ffi::Map::new(vec![
        ("global_symbol".into(), name.into()),
        ("calling_conv".into(), 1i64.into()),
    ]);
    PrimFunc::new(
        vec![self_h, args, num_args, result],
        body,
        DataType::int(32),
        vec![],
        attrs,
    )
    .unwrap()
}

/// An IRModule of the given functions.
pub fn module(funcs: Vec<PrimFunc>) -> IRModule {
    IRModule::new(
        funcs
            .into_iter()
            .map(|f| (f.global_symbol().unwrap(), f))
            .collect(),
    )
    .unwrap()
}

/// `llvm -mcpu=native`.
pub fn native() -> kiln_codegen::Target {
    kiln_codegen::Target::host()
}

/// A float32 vector of `n` seeded pseudo-random values in [lo, hi).
pub use kiln_testing::random_in as rand_f32;

/// A tensor holding `data`.
pub fn tensor<T: kiln_runtime::tensor::Element>(data: &[T]) -> Tensor {
    Tensor::from_slice(data, &[data.len() as i64]).unwrap()
}

/// A float32 tensor of `n` NaNs (outputs start poisoned).
pub fn nan_f32(n: usize) -> Tensor {
    tensor(&kiln_testing::nan_vec(n))
}

/// Asserts two float slices agree within `tol` (relative to magnitude, at least absolute); a NaN
/// matches a NaN.
pub fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let tol = kiln_testing::Tolerance::Scaled(tol.into());
    if let Some(m) = kiln_testing::compare::worst_mismatch(got, want, tol, true) {
        panic!("{what}{m}");
    }
}

/// `.venv/bin/python` when it can import tvm.
pub fn tvm_python() -> Option<PathBuf> {
    kiln_testing::process::python_with(&["tvm"])
}

/// A fresh scratch directory for this test process.
pub fn work_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-codegen-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
