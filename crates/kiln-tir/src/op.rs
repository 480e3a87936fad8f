//! Calls by name: math intrinsics (`tir.exp`, `tir.sqrt`, `tir.pow`, ...) and builtins
//! (`tir.if_then_else`, `tir.likely`, `tir.call_packed`, `tir.call_extern`, bit operations,
//! and the names lowering passes use), with builders that check their operand types.
//!
//! Names are TVM's op names, so TVMScript-like text (`T.exp(x)`) and passes agree with TVM's.

use crate::dtype::DataTypeExt;
use crate::expr::{select, Operand, PrimExpr};
use kiln_ffi::{DataType, Error, Result};

macro_rules! float_unary {
    ($($fn:ident => $name:literal,)*) => {
        $(
            #[doc = concat!("`", $name, "(x)` of a float `x` (any lanes).\n\n# Panics\nWhen `x` is not a float.")]
            pub fn $fn(x: impl Into<Operand>) -> PrimExpr {
                float_call($name, vec![x.into().into_expr()]).unwrap_or_else(|e| panic!("{e}"))
            }
        )*
        /// The float math intrinsics of one operand that return their operand's type.
        pub const FLOAT_UNARY: &[&str] = &[$($name),*];
    };
}

float_unary! {
    exp => "tir.exp",
    exp2 => "tir.exp2",
    exp10 => "tir.exp10",
    expm1 => "tir.expm1",
    log => "tir.log",
    log2 => "tir.log2",
    log10 => "tir.log10",
    log1p => "tir.log1p",
    sqrt => "tir.sqrt",
    rsqrt => "tir.rsqrt",
    sin => "tir.sin",
    cos => "tir.cos",
    tan => "tir.tan",
    sinh => "tir.sinh",
    cosh => "tir.cosh",
    tanh => "tir.tanh",
    asin => "tir.asin",
    acos => "tir.acos",
    atan => "tir.atan",
    asinh => "tir.asinh",
    acosh => "tir.acosh",
    atanh => "tir.atanh",
    sigmoid => "tir.sigmoid",
    erf => "tir.erf",
    fabs => "tir.fabs",
    floor => "tir.floor",
    ceil => "tir.ceil",
    round => "tir.round",
    nearbyint => "tir.nearbyint",
    trunc => "tir.trunc",
}

/// The float math intrinsics of two operands (`pow`, `atan2`, `fmod`, `copysign`, `hypot`).
pub const FLOAT_BINARY: &[&str] = &[
    "tir.pow",
    "tir.atan2",
    "tir.fmod",
    "tir.copysign",
    "tir.hypot",
];

/// `tir.if_then_else(cond, t, f)`: only the chosen side is evaluated (unlike `Select`).
pub const IF_THEN_ELSE: &str = "tir.if_then_else";
/// `tir.likely(cond)`: a branch-prediction hint; the value is `cond`.
pub const LIKELY: &str = "tir.likely";
/// `tir.call_packed("name", args...)`: calls a global packed function.
pub const CALL_PACKED: &str = "tir.call_packed";
/// `tir.call_extern("name", args...)`: calls a C function.
pub const CALL_EXTERN: &str = "tir.call_extern";
/// `tir.call_pure_extern("name", args...)`: a C function without side effects.
pub const CALL_PURE_EXTERN: &str = "tir.call_pure_extern";
/// `tir.reinterpret(x)`: the bits of `x` as the call's type.
pub const REINTERPRET: &str = "tir.reinterpret";
/// `tir.dot4_u8s8(a, b)` (int32 lanes): per lane, the sum of the four products of the bytes
/// of `a` read as `uint8` and the bytes of `b` read as `int8` (byte 0 with byte 0, ...), exact in
/// int32. VNNI's `vpdpbusd` computes `acc + dot4_u8s8(a, b)` in one instruction; other CPUs
/// expand it ([`dot4_u8s8_expanded`]).
pub const DOT4_U8S8: &str = "tir.dot4_u8s8";
/// `tir.prefetch(tir.address_of(load))`: a hint that the cache line holding the element will
/// be read soon (LLVM's `llvm.prefetch`, for reading, into all cache levels); no effect on
/// values, evaluates to 0.
pub const PREFETCH: &str = "tir.prefetch";
/// Integer calls that vectorize lane by lane.
pub const INT_LANEWISE: &[&str] = &[DOT4_U8S8];

/// Bitwise and, or, xor, not; shifts.
pub const BITWISE_AND: &str = "tir.bitwise_and";
/// Bitwise or.
pub const BITWISE_OR: &str = "tir.bitwise_or";
/// Bitwise xor.
pub const BITWISE_XOR: &str = "tir.bitwise_xor";
/// Bitwise not.
pub const BITWISE_NOT: &str = "tir.bitwise_not";
/// Left shift.
pub const SHIFT_LEFT: &str = "tir.shift_left";
/// Right shift (arithmetic for signed types).
pub const SHIFT_RIGHT: &str = "tir.shift_right";
/// Names used by lowering passes (MakePackedAPI and friends), as in TVM's `builtin` namespace.
pub mod builtin {
    /// `tir.tvm_struct_get(handle, index, field)`: reads a field of a runtime struct.
    pub const TVM_STRUCT_GET: &str = "tir.tvm_struct_get";
    /// `tir.tvm_struct_set(handle, index, field, value)`.
    pub const TVM_STRUCT_SET: &str = "tir.tvm_struct_set";
    /// `tir.tvm_stack_alloca("kind", n)`: stack space for call arguments.
    pub const TVM_STACK_ALLOCA: &str = "tir.tvm_stack_alloca";
    /// `tir.tvm_call_packed_lowered(...)`: a packed call after argument packing.
    pub const TVM_CALL_PACKED_LOWERED: &str = "tir.tvm_call_packed_lowered";
    /// `tir.tvm_throw_last_error()`: returns the pending error to the caller.
    pub const TVM_THROW_LAST_ERROR: &str = "tir.tvm_throw_last_error";
    /// `tir.handle_add_byte_offset(handle, offset)`: `handle + offset` bytes (a handle); how
    /// MakePackedAPI reaches the `DLTensor` inside an `ffi.Tensor` object (offset 24).
    pub const HANDLE_ADD_BYTE_OFFSET: &str = "tir.handle_add_byte_offset";
    /// `tir.isnullptr(handle)`.
    pub const ISNULLPTR: &str = "tir.isnullptr";
    /// `tir.address_of(buffer_load)`.
    pub const ADDRESS_OF: &str = "tir.address_of";
    /// `tir.ret(value)`: returns from the function.
    pub const RET: &str = "tir.ret";
    /// `tir.type_annotation()`: a typed placeholder.
    pub const TYPE_ANNOTATION: &str = "tir.type_annotation";
    /// `tir.lookup_param("name")`: a constant parameter linked into the module.
    pub const LOOKUP_PARAM: &str = "tir.lookup_param";
    /// `tir.TVMBackendAllocWorkspace(device_type, device_id, nbytes, dtype_code, dtype_bits)`:
    /// a handle to workspace memory (codegen calls the runtime through its context slot).
    pub const ALLOC_WORKSPACE: &str = "tir.TVMBackendAllocWorkspace";
    /// `tir.TVMBackendFreeWorkspace(device_type, device_id, ptr)`: releases it (returns int32).
    pub const FREE_WORKSPACE: &str = "tir.TVMBackendFreeWorkspace";
    /// `tir.tvm_storage_sync("shared")`: a barrier of the threads of a block over their
    /// `shared` memory (device code).
    pub const TVM_STORAGE_SYNC: &str = "tir.tvm_storage_sync";
}

/// The `field` argument of `tir.tvm_struct_get` / `tir.tvm_struct_set`: which field of a runtime
/// struct is read or written. This is the contract between the lowering passes (MakePackedAPI,
/// LowerTVMBuiltin) and the code generators.
///
/// - DLTensor fields: `tvm_struct_get(tensor_handle, 0, DL_*)`, where `tensor_handle` points at
///   a `DLTensor` (for an `ffi.Tensor` object argument, the object pointer + 24).
/// - TVMFFIAny fields: `tvm_struct_get(array_handle, i, ANY_*)` reads item `i` of a `TVMFFIAny`
///   array (the packed arguments); `tvm_struct_set(result_handle, 0, ANY_*, value)` writes the
///   result.
pub mod struct_field {
    /// `void* data` (handle).
    pub const DL_DATA: i64 = 1;
    /// `int64_t* shape` (handle).
    pub const DL_SHAPE: i64 = 2;
    /// `int64_t* strides` (handle, may be NULL).
    pub const DL_STRIDES: i64 = 3;
    /// `int32_t ndim`.
    pub const DL_NDIM: i64 = 4;
    /// `uint8_t dtype.code` (codegen widens it to the call's dtype).
    pub const DL_DTYPE_CODE: i64 = 5;
    /// `uint8_t dtype.bits`.
    pub const DL_DTYPE_BITS: i64 = 6;
    /// `uint16_t dtype.lanes`.
    pub const DL_DTYPE_LANES: i64 = 7;
    /// `uint64_t byte_offset`.
    pub const DL_BYTE_OFFSET: i64 = 8;
    /// `int32_t device.device_id`.
    pub const DL_DEVICE_ID: i64 = 9;
    /// `int32_t device.device_type`.
    pub const DL_DEVICE_TYPE: i64 = 10;
    /// `int32_t type_index` of a TVMFFIAny.
    pub const ANY_TYPE_INDEX: i64 = 20;
    /// The union read as `int64_t`.
    pub const ANY_INT64: i64 = 21;
    /// The union read as `double`.
    pub const ANY_FLOAT64: i64 = 22;
    /// The union read as a pointer (handle).
    pub const ANY_PTR: i64 = 23;
}

fn float_call(name: &str, args: Vec<PrimExpr>) -> Result<PrimExpr> {
    let t = args[0].dtype();
    if !t.is_floating() {
        return Err(Error::type_error(format!(
            "{name} needs float operands, got {t} ({})",
            args[0]
        )));
    }
    if let Some(bad) = args.iter().find(|a| a.dtype() != t) {
        return Err(Error::type_error(format!(
            "{name} needs operands of one dtype, got {t} and {}",
            bad.dtype()
        )));
    }
    Ok(PrimExpr::call(t, name, args))
}

/// A float intrinsic by name (one of [`FLOAT_UNARY`] or [`FLOAT_BINARY`]) with type checks.
pub fn try_float_intrinsic(name: &str, args: Vec<PrimExpr>) -> Result<PrimExpr> {
    let arity = if FLOAT_UNARY.contains(&name) {
        1
    } else if FLOAT_BINARY.contains(&name) {
        2
    } else {
        return Err(Error::value_error(format!(
            "`{name}` is not a float intrinsic"
        )));
    };
    if args.len() != arity {
        return Err(Error::type_error(format!(
            "{name} takes {arity} arguments, got {}",
            args.len()
        )));
    }
    float_call(name, args)
}

fn float_binary(name: &str, x: impl Into<Operand>, y: impl Into<Operand>) -> PrimExpr {
    let (x, y) = crate::expr::operands(x, y).unwrap_or_else(|e| panic!("{e}"));
    float_call(name, vec![x, y]).unwrap_or_else(|e| panic!("{e}"))
}

/// `x ** y` of floats.
///
/// # Panics
/// When the operands are not floats of one type.
pub fn pow(x: impl Into<Operand>, y: impl Into<Operand>) -> PrimExpr {
    float_binary("tir.pow", x, y)
}

/// `atan2(y, x)` of floats.
///
/// # Panics
/// When the operands are not floats of one type.
pub fn atan2(y: impl Into<Operand>, x: impl Into<Operand>) -> PrimExpr {
    float_binary("tir.atan2", y, x)
}

/// `|x|`: `fabs` for floats, `select(x >= 0, x, -x)` for integers.
pub fn abs(x: impl Into<Operand>) -> PrimExpr {
    let x = x.into().into_expr();
    if x.dtype().is_floating() {
        fabs(x)
    } else if x.dtype().is_uint() {
        x
    } else {
        select(x.ge(0), &x, -&x)
    }
}

/// `cond ? t : f` evaluating only the chosen side (constant conditions fold).
///
/// # Panics
/// When `cond` is not bool or the values' types differ.
pub fn if_then_else(
    cond: impl Into<Operand>,
    t: impl Into<Operand>,
    f: impl Into<Operand>,
) -> PrimExpr {
    let cond = cond.into().into_expr();
    assert!(
        cond.dtype().is_bool(),
        "tir.if_then_else needs a bool condition, got {}",
        cond.dtype()
    );
    let (t, f) = crate::expr::operands(t, f).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.dtype(),
        f.dtype(),
        "tir.if_then_else needs both values of one dtype"
    );
    match cond.as_int() {
        Some(0) => f,
        Some(_) => t,
        None => PrimExpr::call(t.dtype(), IF_THEN_ELSE, vec![cond, t, f]),
    }
}

/// `likely(cond)`: marks a condition as usually true.
pub fn likely(cond: impl Into<Operand>) -> PrimExpr {
    let cond = cond.into().into_expr();
    PrimExpr::call(cond.dtype(), LIKELY, vec![cond])
}

/// Calls global packed function `name` with `args` (returns `int32`: 0 on success).
pub fn call_packed(name: &str, args: Vec<PrimExpr>) -> PrimExpr {
    let mut all = vec![PrimExpr::string(name)];
    all.extend(args);
    PrimExpr::call(DataType::int(32), CALL_PACKED, all)
}

/// Calls C function `name` returning `dtype`.
pub fn call_extern(dtype: DataType, name: &str, args: Vec<PrimExpr>) -> PrimExpr {
    let mut all = vec![PrimExpr::string(name)];
    all.extend(args);
    PrimExpr::call(dtype, CALL_EXTERN, all)
}

/// The bits of `x` as `dtype` (same total width; byte-coded narrow types count 8 bits).
///
/// # Panics
/// When the widths differ.
pub fn reinterpret(dtype: DataType, x: impl Into<Operand>) -> PrimExpr {
    let x = x.into().into_expr();
    assert_eq!(
        dtype.storage_bits() * dtype.lanes() as u32,
        x.dtype().storage_bits() * x.dtype().lanes() as u32,
        "tir.reinterpret needs equal widths: {} to {dtype}",
        x.dtype()
    );
    PrimExpr::call(dtype, REINTERPRET, vec![x])
}

fn int_binary(name: &str, x: impl Into<Operand>, y: impl Into<Operand>) -> PrimExpr {
    let (x, y) = crate::expr::operands(x, y).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        x.dtype().is_integer() && x.dtype() == y.dtype(),
        "{name} needs integer operands of one dtype, got {} and {}",
        x.dtype(),
        y.dtype()
    );
    PrimExpr::call(x.dtype(), name, vec![x, y])
}

/// `x & y` of integers.
pub fn bitwise_and(x: impl Into<Operand>, y: impl Into<Operand>) -> PrimExpr {
    int_binary(BITWISE_AND, x, y)
}
/// `x | y` of integers.
pub fn bitwise_or(x: impl Into<Operand>, y: impl Into<Operand>) -> PrimExpr {
    int_binary(BITWISE_OR, x, y)
}
/// `x ^ y` of integers.
pub fn bitwise_xor(x: impl Into<Operand>, y: impl Into<Operand>) -> PrimExpr {
    int_binary(BITWISE_XOR, x, y)
}
/// `~x` of an integer.
pub fn bitwise_not(x: impl Into<Operand>) -> PrimExpr {
    let x = x.into().into_expr();
    assert!(
        x.dtype().is_integer(),
        "bitwise_not needs an integer, got {}",
        x.dtype()
    );
    PrimExpr::call(x.dtype(), BITWISE_NOT, vec![x])
}
/// `x << y` of integers.
pub fn shift_left(x: impl Into<Operand>, y: impl Into<Operand>) -> PrimExpr {
    int_binary(SHIFT_LEFT, x, y)
}
/// `x >> y` of integers.
pub fn shift_right(x: impl Into<Operand>, y: impl Into<Operand>) -> PrimExpr {
    int_binary(SHIFT_RIGHT, x, y)
}

/// [`DOT4_U8S8`] of int32 `a` and `b` (any lanes).
pub fn dot4_u8s8(a: impl Into<Operand>, b: impl Into<Operand>) -> PrimExpr {
    let (a, b) = (a.into().into_expr(), b.into().into_expr());
    PrimExpr::call(a.dtype(), DOT4_U8S8, vec![a, b])
}

/// [`DOT4_U8S8`] as plain integer arithmetic (shifts, masks, multiplies and adds), for targets
/// without a dot-product instruction.
pub fn dot4_u8s8_expanded(a: &PrimExpr, b: &PrimExpr) -> PrimExpr {
    let t = a.dtype();
    let c = |v: i64| PrimExpr::const_int(t, v);
    let mut acc: Option<PrimExpr> = None;
    for j in 0..4 {
        let ua = bitwise_and(shift_right(a.clone(), c(8 * j)), c(0xff));
        // The signed byte: shifted to the top, then arithmetically back down.
        let sb = shift_right(shift_left(b.clone(), c(24 - 8 * j)), c(24));
        let p = ua * sb;
        acc = Some(match acc {
            Some(x) => x + p,
            None => p,
        });
    }
    acc.expect("four products")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{ExprKind, Var};

    #[test]
    fn intrinsics_check_types() {
        let x = Var::new("x", DataType::float(32));
        let e = exp(&x);
        assert_eq!(e.to_string(), "T.exp(x)");
        assert_eq!(e.dtype(), DataType::float(32));
        assert_eq!(pow(&x, 2.0).to_string(), "T.pow(x, T.float32(2.0))");
        assert!(std::panic::catch_unwind(|| sqrt(Var::int32("i"))).is_err());
        assert!(try_float_intrinsic("tir.tanh", vec![x.to_expr()]).is_ok());
        assert!(try_float_intrinsic("tir.tanh", vec![]).is_err());
        let i = Var::int32("i");
        assert!(matches!(abs(&i).kind(), ExprKind::Select { .. }));
        assert_eq!(
            call_packed("f", vec![i.to_expr()]).to_string(),
            "T.call_packed(\"f\", i)"
        );
        assert!(if_then_else(true, 1, 2).is_const_int(1));
    }
}
