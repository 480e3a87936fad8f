//! MakePackedAPI: turns a function over tensors and scalars into the TVM-FFI packed form that
//! code generation compiles, `int32 f(self_handle, args, num_args, result)`, with the argument
//! checks and error texts of Apache TVM 0.27 (same kinds, same messages).
//!
//! The new function has parameters `self_handle: handle, args: handle, num_args: int32,
//! result: handle`, returns `int32`, has an empty `buffer_map`, keeps its attributes (with
//! `global_symbol`) and gains `calling_conv = 1`. Its body is, in order:
//!
//! 1. `assert num_args == N` (TypeError), `assert !isnullptr(args)` (TypeError);
//! 2. per parameter `i`: `p_type_index = tvm_struct_get(args, i, ANY_TYPE_INDEX)` and a type
//!    check; tensors accept 70 (`ffi.Tensor`: handle = `handle_add_byte_offset(ptr, 24)`), 7
//!    (`DLTensor*`), 4 (opaque pointer) and 0 (None, rejected below as a NULL handle): `let
//!    p_handle = select(p_type_index == 70, ...)`; floats accept float (3), int (1) and bool
//!    (2); ints accept int and bool; the scalar parameter variable itself is bound by `let`;
//! 3. per tensor: handle non-null, `ndim`, dtype code/bits/lanes, `let f_A_shape =
//!    DL_SHAPE` with a `DeclBuffer` over it (int64, `[ndim]`) whose loads read the dims, symbolic
//!    dims bound by `let` on first sight, `device_type == 1` (cpu; the function's
//!    `kiln.device_type` attribute when SplitHostDevice set one), `let dev_id` (first tensor);
//! 4. per tensor: dims already bound must match (`expected to match A.shape[0]`), strides NULL
//!    or compact (`let f_A_strides = DL_STRIDES` with its `DeclBuffer`; `if !isnullptr(..):
//!    assert ...`), same `device_id` as the first tensor, `let A_data = DL_DATA` (the buffer's
//!    data variable) and `assert size == 0 || !isnullptr(A_data)`;
//! 5. per tensor: constant dims (`Invalid A.shape[1]`), `byte_offset == 0`;
//! 6. the original body, then `Evaluate(tir.ret(0))`.
//!
//! Errors are `AssertStmt(cond, StringImm("<Kind>: <message>"), body)`; code generation raises
//! `<Kind>` with `<message>` (split at the first `": "`). Parallel loops are left as they are.

use super::{prim_func_pass, Pass};
use crate::buffer::Buffer;
use crate::dtype::DataTypeExt;
use crate::expr::{cast, logical_or, select, PrimExpr, Var};
use crate::function::{map_with, PrimFunc};
use crate::op::{builtin, struct_field};
use crate::stmt::Stmt;
use kiln_ffi::{DataType, Error, Result};
use std::collections::HashMap;

/// The MakePackedAPI pass (`tir.MakePackedAPI`, opt level 0). Functions already in packed form
/// (`calling_conv` set) are left alone.
pub fn make_packed_api() -> Pass {
    prim_func_pass("tir.MakePackedAPI", 0, |f, _| {
        if f.get_attr("calling_conv").is_some() {
            return Ok(f);
        }
        make_packed_func(&f)
    })
}

/// `tvm_struct_get(handle, index, field)` of type `dtype`.
pub fn struct_get(dtype: DataType, handle: &Var, index: i64, field: i64) -> PrimExpr {
    PrimExpr::call(
        dtype,
        builtin::TVM_STRUCT_GET,
        vec![handle.to_expr(), PrimExpr::i32(index), PrimExpr::i32(field)],
    )
}

fn is_null(v: &Var) -> PrimExpr {
    PrimExpr::call(DataType::bool(), builtin::ISNULLPTR, vec![v.to_expr()])
}

fn not(e: PrimExpr) -> PrimExpr {
    PrimExpr::not_raw(e)
}

fn dim_text(e: &PrimExpr) -> String {
    match e.as_int() {
        Some(v) => v.to_string(),
        None => e.to_string(),
    }
}

/// The `name(A: Tensor([n, 4], float32), x: float32)` text TVM shows in argument errors.
pub fn signature(name: &str, f: &PrimFunc) -> String {
    let params: Vec<String> = f
        .params()
        .iter()
        .map(|p| match f.buffer_map().get(p) {
            Some(b) => {
                let dims: Vec<String> = b.shape().iter().map(dim_text).collect();
                format!("{}: Tensor([{}], {})", p.name(), dims.join(", "), b.dtype())
            }
            None => format!("{}: {}", p.name(), p.dtype()),
        })
        .collect();
    format!("{name}({})", params.join(", "))
}

/// One step of the prologue, folded around the body at the end.
enum Step {
    Let(Var, PrimExpr),
    Assert(PrimExpr, String),
    Decl(Buffer),
    /// `if guard: assert cond, msg` (the strides check).
    GuardedAssert(PrimExpr, PrimExpr, String),
}

struct Builder {
    steps: Vec<Step>,
    sig: String,
    /// Where each bound variable came from (`A.shape[0]`), for "expected to match".
    bound: HashMap<Var, String>,
}

impl Builder {
    fn assert(&mut self, cond: PrimExpr, kind: &str, msg: String) {
        self.steps
            .push(Step::Assert(cond, format!("{kind}: {msg}")));
    }
    fn let_(&mut self, v: &Var, e: PrimExpr) {
        self.steps.push(Step::Let(v.clone(), e));
    }
    fn when(&self) -> String {
        format!(" when calling:\n  `{}`", self.sig)
    }
    fn arg_msg(&self, head: &str, i: usize, expected: &str) -> String {
        format!(
            "{head} on argument #{i}{},\n  expected {expected}",
            self.when()
        )
    }
}

/// Rewrites one function into packed form (see the module docs).
pub fn make_packed_func(f: &PrimFunc) -> Result<PrimFunc> {
    let name = f
        .global_symbol()
        .ok_or_else(|| Error::value_error("MakePackedAPI: function has no global_symbol"))?;
    let handle_t = DataType::handle();
    let i32t = DataType::int(32);
    let (self_handle, args, num_args, result) = (
        Var::new("self_handle", handle_t),
        Var::new("args", handle_t),
        Var::new("num_args", i32t),
        Var::new("result", handle_t),
    );
    let n = f.params().len();
    let device_type = super::split_host_device::device_type_of(f);
    let device_name = match device_type {
        2 => "cuda",
        4 => "opencl",
        _ => "cpu",
    };
    let mut b = Builder {
        steps: Vec::new(),
        sig: signature(&name, f),
        bound: HashMap::new(),
    };
    let when = b.when();
    b.assert(
        num_args.equal(n as i64),
        "TypeError",
        format!("Expected {n} arguments{when}"),
    );
    if n > 0 {
        b.assert(
            not(is_null(&args)),
            "TypeError",
            format!("args pointer is NULL{when}"),
        );
    }
    // 2. type indices and scalar values.
    let mut handles: Vec<(usize, Var, Buffer)> = Vec::new();
    for (i, p) in f.params().iter().enumerate() {
        let ti = Var::new(&format!("{}_type_index", p.name()), i32t);
        b.let_(
            &ti,
            struct_get(i32t, &args, i as i64, struct_field::ANY_TYPE_INDEX),
        );
        let is = |k: i64| ti.equal(k);
        let t = p.dtype();
        let ptr = struct_get(handle_t, &args, i as i64, struct_field::ANY_PTR);
        let mismatch = |b: &Builder, exp: &str| b.arg_msg("Mismatched type", i, exp);
        if let Some(buf) = f.buffer_map().get(p) {
            let ok = logical_or(logical_or(logical_or(is(0), is(4)), is(7)), is(70));
            let msg = mismatch(&b, "Tensor");
            b.assert(ok, "TypeError", msg);
            let h = Var::new(&format!("{}_handle", p.name()), handle_t);
            let obj = PrimExpr::call(
                handle_t,
                builtin::HANDLE_ADD_BYTE_OFFSET,
                vec![ptr.clone(), PrimExpr::i32(24)],
            );
            b.let_(&h, select(is(70), obj, ptr));
            handles.push((i, h, buf.clone()));
        } else if t.is_handle() {
            let ok = logical_or(logical_or(logical_or(is(0), is(4)), is(7)), is(70));
            let msg = mismatch(&b, "pointer");
            b.assert(ok, "TypeError", msg);
            b.let_(p, ptr);
        } else if t.is_floating() {
            let ok = logical_or(logical_or(is(3), is(1)), is(2));
            let msg = mismatch(&b, "float");
            b.assert(ok, "TypeError", msg);
            let fv = struct_get(
                DataType::float(64),
                &args,
                i as i64,
                struct_field::ANY_FLOAT64,
            );
            let iv = struct_get(DataType::int(64), &args, i as i64, struct_field::ANY_INT64);
            b.let_(p, select(is(3), cast(t, fv), cast(t, iv)));
        } else if t.is_bool() {
            let ok = logical_or(is(2), is(1));
            let msg = mismatch(&b, "bool");
            b.assert(ok, "TypeError", msg);
            let iv = struct_get(DataType::int(64), &args, i as i64, struct_field::ANY_INT64);
            b.let_(p, iv.not_equal(0i64));
        } else if t.is_integer() {
            let ok = logical_or(is(1), is(2));
            let msg = mismatch(&b, "int");
            b.assert(ok, "TypeError", msg);
            let iv = struct_get(DataType::int(64), &args, i as i64, struct_field::ANY_INT64);
            b.let_(p, cast(t, iv));
        } else {
            return Err(Error::type_error(format!(
                "MakePackedAPI `{name}`: parameter `{}` has unsupported type {t}",
                p.name()
            )));
        }
    }
    // 3. per tensor: handle, ndim, dtype, shape bindings, device type.
    let mut shape_bufs = Vec::new();
    let mut dev_id: Option<(Var, String)> = None;
    let mut deferred_const: Vec<(usize, PrimExpr, String)> = Vec::new();
    for (i, h, buf) in &handles {
        let (i, bn) = (*i, buf.name().to_string());
        let msg = b.arg_msg("Mismatched type", i, "Tensor");
        b.assert(not(is_null(h)), "TypeError", msg);
        let ndim = buf.ndim() as i64;
        let msg = b.arg_msg(&format!("Mismatched {bn}.ndim"), i, &ndim.to_string());
        b.assert(
            PrimExpr::i32(ndim).equal(struct_get(i32t, h, 0, struct_field::DL_NDIM)),
            "ValueError",
            msg,
        );
        let dt = buf.dtype();
        let code = struct_get(DataType::uint(8), h, 0, struct_field::DL_DTYPE_CODE);
        let bits = struct_get(DataType::uint(8), h, 0, struct_field::DL_DTYPE_BITS);
        let lanes = struct_get(DataType::uint(16), h, 0, struct_field::DL_DTYPE_LANES);
        let cond = code
            .equal(dt.code() as i64)
            .logical_and(bits.equal(dt.bits() as i64))
            .logical_and(lanes.equal(dt.lanes() as i64));
        let msg = b.arg_msg(&format!("Mismatched {bn}.dtype"), i, &dt.to_string());
        b.assert(cond, "TypeError", msg);
        let shape_var = Var::new(&format!("{name}_{bn}_shape"), handle_t);
        b.let_(
            &shape_var,
            struct_get(handle_t, h, 0, struct_field::DL_SHAPE),
        );
        let shape_buf = int64_array(&shape_var, ndim);
        b.steps.push(Step::Decl(shape_buf.clone()));
        let strides_var = Var::new(&format!("{name}_{bn}_strides"), handle_t);
        b.let_(
            &strides_var,
            struct_get(handle_t, h, 0, struct_field::DL_STRIDES),
        );
        let strides_buf = int64_array(&strides_var, ndim);
        b.steps.push(Step::Decl(strides_buf.clone()));
        for (k, e) in buf.shape().iter().enumerate() {
            let got = cast(e.dtype(), shape_buf.load(vec![PrimExpr::i32(k as i64)]));
            let what = format!("{bn}.shape[{k}]");
            match e.as_var() {
                Some(v) if !b.bound.contains_key(&v) => {
                    b.let_(&v, got);
                    b.bound.insert(v, what);
                }
                _ if e.as_var().is_none() => {
                    let msg = b.arg_msg(&format!("Invalid {what}"), i, &dim_text(e));
                    deferred_const.push((i, got.equal(e.clone()), msg));
                }
                _ => {}
            }
        }
        let dtype_ok = struct_get(i32t, h, 0, struct_field::DL_DEVICE_TYPE).equal(device_type);
        let msg = b.arg_msg(&format!("Mismatched {bn}.device_type"), i, device_name);
        b.assert(dtype_ok, "ValueError", msg);
        if dev_id.is_none() {
            let v = Var::new("dev_id", i32t);
            b.let_(&v, struct_get(i32t, h, 0, struct_field::DL_DEVICE_ID));
            dev_id = Some((v, format!("{bn}.device_id")));
        }
        shape_bufs.push((shape_buf, strides_buf));
    }
    // 4. per tensor: symbolic dims, strides, device id, data.
    for ((i, h, buf), (shape_buf, strides_buf)) in handles.iter().zip(&shape_bufs) {
        let (i, bn) = (*i, buf.name().to_string());
        for (k, e) in buf.shape().iter().enumerate() {
            let Some(v) = e.as_var() else { continue };
            let what = format!("{bn}.shape[{k}]");
            let src = b.bound.get(&v).cloned().unwrap_or_default();
            if src == what {
                continue;
            }
            let got = cast(e.dtype(), shape_buf.load(vec![PrimExpr::i32(k as i64)]));
            let msg = b.arg_msg(&format!("Mismatched {what}"), i, &format!("to match {src}"));
            b.assert(v.equal(got), "ValueError", msg);
        }
        if let Some(cond) = strides_check(buf, strides_buf) {
            let msg = b.arg_msg(
                &format!("Mismatched {bn}.strides"),
                i,
                "to be compact array",
            );
            let guard = not(is_null(strides_buf.data()));
            b.steps.push(Step::GuardedAssert(
                guard,
                cond,
                format!("ValueError: {msg}"),
            ));
        }
        let (dv, dsrc) = dev_id.clone().expect("set with the first tensor");
        let this = format!("{bn}.device_id");
        if dsrc != this {
            let got = struct_get(i32t, h, 0, struct_field::DL_DEVICE_ID);
            let msg = b.arg_msg(
                &format!("Mismatched {this}"),
                i,
                &format!("to match {dsrc}"),
            );
            b.assert(dv.equal(got), "ValueError", msg);
        }
        b.let_(
            buf.data(),
            struct_get(handle_t, h, 0, struct_field::DL_DATA),
        );
        let size = buf.shape().iter().fold(PrimExpr::i64(1), |acc, d| {
            acc * cast(DataType::int(64), d.clone())
        });
        let nonnull = not(is_null(buf.data()));
        let cond = if size.is_const_int(0) {
            PrimExpr::bool(true)
        } else if size.is_const() {
            nonnull
        } else {
            logical_or(size.equal(0i64), nonnull)
        };
        let msg = format!(
            "{bn} data pointer is NULL on argument #{i}{},\n  expected non-NULL data pointer",
            b.when()
        );
        b.assert(cond, "ValueError", msg);
    }
    // 5. constant dims and byte offsets.
    for (i, h, buf) in &handles {
        let bn = buf.name();
        for (j, c, m) in &deferred_const {
            if j == i {
                b.assert(c.clone(), "ValueError", m.clone());
            }
        }
        let off = struct_get(DataType::uint(64), h, 0, struct_field::DL_BYTE_OFFSET);
        let msg = b.arg_msg(&format!("Invalid {bn}.byte_offset"), *i, "0");
        b.assert(
            PrimExpr::const_int(DataType::uint(64), 0).equal(off),
            "ValueError",
            msg,
        );
    }
    // 6. body, return 0.
    let ret = Stmt::evaluate(PrimExpr::call(i32t, builtin::RET, vec![PrimExpr::i32(0)]));
    let mut body = Stmt::seq(vec![f.body().clone(), ret]);
    for step in b.steps.into_iter().rev() {
        body = match step {
            Step::Let(v, e) => Stmt::let_stmt(&v, e, body),
            Step::Assert(c, m) => Stmt::assert(c, &m, body),
            Step::Decl(buf) => Stmt::decl_buffer(buf, body),
            Step::GuardedAssert(g, c, m) => Stmt::seq(vec![
                Stmt::if_then_else(g, Stmt::assert(c, &m, Stmt::no_op()), None),
                body,
            ]),
        };
    }
    let attrs = map_with(f.attrs(), "calling_conv", 1i64);
    PrimFunc::new(
        vec![self_handle, args, num_args, result],
        body,
        i32t,
        Vec::new(),
        attrs,
    )
}

/// A 1-D int64 view of `len` elements at `data` (the shape and strides arrays).
fn int64_array(data: &Var, len: i64) -> Buffer {
    Buffer::new(
        data.clone(),
        DataType::int(64),
        vec![PrimExpr::i32(len)],
        Vec::new(),
        PrimExpr::i32(0),
        data.name(),
        "global",
        8,
        1,
    )
    .expect("a valid int64 array")
}

/// The compactness check of TVM: each stride equals the product of the later dims (a dim of
/// extent 1 may have any stride; a tensor without elements passes, whatever its strides, as
/// the runtime counts it contiguous). `None` for 0-d buffers.
fn strides_check(buf: &Buffer, strides: &Buffer) -> Option<PrimExpr> {
    let nd = buf.ndim();
    if nd == 0 {
        return None;
    }
    let mut cond: Option<PrimExpr> = None;
    let mut expect = PrimExpr::const_int(buf.shape()[nd - 1].dtype(), 1);
    for k in (0..nd).rev() {
        let d = &buf.shape()[k];
        let got = cast(d.dtype(), strides.load(vec![PrimExpr::i32(k as i64)]));
        let eq = if buf.strides().is_empty() {
            cast(d.dtype(), expect.clone()).equal(got)
        } else {
            cast(d.dtype(), buf.strides()[k].clone()).equal(got)
        };
        let term = if k == nd - 1 || d.is_const() {
            eq
        } else {
            logical_or(d.equal(1), eq)
        };
        cond = Some(match cond {
            None => term,
            Some(c) => c.logical_and(term),
        });
        expect = cast(d.dtype(), expect) * d;
    }
    let may_be_empty = buf
        .shape()
        .iter()
        .any(|d| !d.is_const() || d.is_const_int(0));
    if may_be_empty {
        let dt = expect.dtype();
        cond = cond.map(|c| logical_or(expect.equal(PrimExpr::const_int(dt, 0)), c));
    }
    cond
}

#[cfg(test)]
mod tests;
