//! Decisions from TIR that the C source back end ([`crate::c`]) and the LLVM back end
//! ([`crate::llvm::codegen`]) share: which TIR math ops are plain libm calls and under which
//! name, whether a function has the packed-API parameter list, a function's exported name,
//! how an assert's message splits into error kind and text, an allocation's constant element
//! count, which buffer indices are contiguous, and
//! which runtime struct field a `tvm_struct_get` / `tvm_struct_set` reaches. Emission stays in each back end.

use crate::llvm::abi::{AnyField, DlTensorField};
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::op::struct_field as sf;
use kiln_tir::stmt::AllocateObj;
use kiln_tir::{DataTypeExt, ExprKind, PrimExpr, PrimFunc};

/// TIR math ops that lower to a plain libm call, with the libm function's (double) name; the
/// float version adds an `f` suffix.
const LIBM_OPS: &[(&str, &str)] = &[
    ("tir.exp", "exp"),
    ("tir.exp2", "exp2"),
    ("tir.expm1", "expm1"),
    ("tir.log", "log"),
    ("tir.log2", "log2"),
    ("tir.log10", "log10"),
    ("tir.log1p", "log1p"),
    ("tir.sqrt", "sqrt"),
    ("tir.sin", "sin"),
    ("tir.cos", "cos"),
    ("tir.tan", "tan"),
    ("tir.sinh", "sinh"),
    ("tir.cosh", "cosh"),
    ("tir.tanh", "tanh"),
    ("tir.asin", "asin"),
    ("tir.acos", "acos"),
    ("tir.atan", "atan"),
    ("tir.asinh", "asinh"),
    ("tir.acosh", "acosh"),
    ("tir.atanh", "atanh"),
    ("tir.erf", "erf"),
    ("tir.fabs", "fabs"),
    ("tir.floor", "floor"),
    ("tir.ceil", "ceil"),
    ("tir.round", "nearbyint"),
    ("tir.nearbyint", "nearbyint"),
    ("tir.trunc", "trunc"),
    ("tir.pow", "pow"),
    ("tir.atan2", "atan2"),
    ("tir.fmod", "fmod"),
    ("tir.copysign", "copysign"),
    ("tir.hypot", "hypot"),
];

/// The libm (double) name of a one- or two-operand TIR float op, when it is a plain libm call.
pub(crate) fn libm_name(op: &str) -> Option<&'static str> {
    LIBM_OPS
        .iter()
        .find(|(o, _)| *o == op)
        .map(|(_, name)| *name)
}

/// True when `name` is a libm function that some TIR op lowers to, in its double (`exp`) or
/// float (`expf`) version.
pub(crate) fn is_libm_function(name: &str) -> bool {
    LIBM_OPS
        .iter()
        .any(|(_, b)| name == *b || name.strip_suffix('f') == Some(*b))
}

/// True when `func` has the packed-API parameters `(handle, handle, int32, handle)`.
pub(crate) fn has_packed_params(func: &PrimFunc) -> bool {
    let p = func.params();
    p.len() == 4
        && p[0].dtype().is_handle()
        && p[1].dtype().is_handle()
        && p[2].dtype() == DataType::int(32)
        && p[3].dtype().is_handle()
}

/// The exported name of a function: its `global_symbol`, else its key in the module.
pub fn function_symbol(key: &str, func: &PrimFunc) -> String {
    func.global_symbol().unwrap_or_else(|| key.to_string())
}

/// The error kind and message of an assert: `"Kind: message"` split at the first `": "` when
/// the part before is one word (`RuntimeError` otherwise).
pub fn assert_kind_message(message: &PrimExpr) -> (String, String) {
    let text = match message.kind() {
        ExprKind::StringImm(s) => s.to_string(),
        _ => message.to_string(),
    };
    match text.split_once(": ") {
        Some((k, m))
            if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            (k.to_string(), m.to_string())
        }
        _ => ("RuntimeError".to_string(), text),
    }
}

/// The element count of an allocation when every extent is a constant (their saturating
/// product), else `None`.
pub(crate) fn constant_element_count(a: &AllocateObj) -> Option<i64> {
    a.extents
        .iter()
        .try_fold(1i64, |acc, e| e.as_int().map(|v| acc.saturating_mul(v)))
}

/// The base of a unit-stride ramp index (`ramp(base, 1, lanes)`): the first of the contiguous
/// elements it addresses.
pub(crate) fn unit_stride_base(index: &PrimExpr) -> Option<&PrimExpr> {
    match index.kind() {
        ExprKind::Ramp { base, stride, .. } if stride.is_const_int(1) => Some(base),
        _ => None,
    }
}

/// The first element of a contiguous vector access at `index`: the base of a unit-stride
/// ramp, or a scalar index itself; `None` for a gather or scatter.
pub(crate) fn contiguous_base(index: &PrimExpr) -> Option<PrimExpr> {
    match unit_stride_base(index) {
        Some(base) => Some(base.clone()),
        None if index.dtype().lanes() <= 1 => Some(index.clone()),
        None => None,
    }
}

/// A field that `tir.tvm_struct_get` / `tir.tvm_struct_set` reach: of a `TVMFFIAny` or of a
/// `DLTensor`.
pub(crate) enum Field {
    /// A `TVMFFIAny` field.
    Any(AnyField),
    /// A `DLTensor` field.
    Dl(DlTensorField),
}

/// The field a `kiln_tir::op::struct_field` number names.
pub(crate) fn field_of(code: i64) -> Result<Field> {
    Ok(match code {
        sf::DL_DATA => Field::Dl(DlTensorField::Data),
        sf::DL_SHAPE => Field::Dl(DlTensorField::Shape),
        sf::DL_STRIDES => Field::Dl(DlTensorField::Strides),
        sf::DL_NDIM => Field::Dl(DlTensorField::Ndim),
        sf::DL_DTYPE_CODE => Field::Dl(DlTensorField::DtypeCode),
        sf::DL_DTYPE_BITS => Field::Dl(DlTensorField::DtypeBits),
        sf::DL_DTYPE_LANES => Field::Dl(DlTensorField::DtypeLanes),
        sf::DL_BYTE_OFFSET => Field::Dl(DlTensorField::ByteOffset),
        sf::DL_DEVICE_ID => Field::Dl(DlTensorField::DeviceId),
        sf::DL_DEVICE_TYPE => Field::Dl(DlTensorField::DeviceType),
        sf::ANY_TYPE_INDEX => Field::Any(AnyField::TypeIndex),
        sf::ANY_INT64 => Field::Any(AnyField::Int64),
        sf::ANY_FLOAT64 => Field::Any(AnyField::Float64),
        sf::ANY_PTR => Field::Any(AnyField::Pointer),
        other => {
            return Err(Error::value_error(format!(
                "tvm_struct_get/set: unknown field kind {other}"
            )))
        }
    })
}

/// The TIR type a field holds in memory (how its bits are read).
pub(crate) fn field_dtype(f: &Field) -> DataType {
    match f {
        Field::Any(AnyField::TypeIndex | AnyField::ZeroPadding) => DataType::int(32),
        Field::Any(AnyField::Int64) => DataType::int(64),
        Field::Any(AnyField::Float64) => DataType::float(64),
        Field::Any(AnyField::Pointer) => DataType::handle(),
        Field::Dl(d) => match d {
            DlTensorField::Data | DlTensorField::Shape | DlTensorField::Strides => {
                DataType::handle()
            }
            DlTensorField::DeviceType | DlTensorField::DeviceId | DlTensorField::Ndim => {
                DataType::int(32)
            }
            DlTensorField::DtypeCode | DlTensorField::DtypeBits => DataType::uint(8),
            DlTensorField::DtypeLanes => DataType::uint(16),
            DlTensorField::ByteOffset => DataType::uint(64),
        },
    }
}

/// Checks the arguments of a struct access, `(handle, index, field...)` with a constant field
/// number, and returns that number; `what` names the operation in errors.
pub(crate) fn struct_field_code(args: &[PrimExpr], what: &str) -> Result<i64> {
    if args.len() < 3 {
        return Err(Error::value_error(format!(
            "{what} takes (handle, index, field...), got {} arguments",
            args.len()
        )));
    }
    args[2]
        .as_int()
        .ok_or_else(|| Error::value_error(format!("{what}: the field must be a constant")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libm_names() {
        assert_eq!(libm_name("tir.exp"), Some("exp"));
        assert_eq!(libm_name("tir.round"), Some("nearbyint"));
        assert_eq!(libm_name("tir.exp10"), None);
        assert!(is_libm_function("expf"));
        assert!(is_libm_function("nearbyint"));
        assert!(!is_libm_function("sigmoid"));
    }
}
