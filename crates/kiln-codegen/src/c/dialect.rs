//! The C-family languages the C printer writes: host C ([`Dialect::C`], the `c` target) and
//! the device dialects OpenCL C and CUDA C++ ([`crate::device`]). Expressions and statements
//! are printed once ([`super::expr`], [`super::stmt`]); what differs (type names, literals,
//! `min`/`max`, math function names) is decided here.
//!
//! Device code has no vector types, strings or handles as values: those are errors there.

use super::expr::{scalar_binary, scalar_cast, scalar_math};
use super::scalar_ctype;
use crate::lower_common::libm_name;
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::{BinOp, DataTypeExt};

/// Which language the printer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dialect {
    /// C11 with GNU extensions, for the host (`c` target).
    #[default]
    C,
    /// OpenCL C 1.2 kernels.
    OpenCl,
    /// CUDA C++ kernels.
    Cuda,
}

impl Dialect {
    /// True for the device dialects.
    pub fn is_device(self) -> bool {
        self != Dialect::C
    }

    /// The dialect's name in errors.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::C => "c",
            Dialect::OpenCl => "opencl",
            Dialect::Cuda => "cuda",
        }
    }

    /// The type name of a scalar TIR type.
    pub fn scalar_type(self, t: DataType) -> Result<&'static str> {
        if self == Dialect::C {
            return scalar_ctype(t);
        }
        let t = t.element_of();
        let cuda = self == Dialect::Cuda;
        let unsupported = || {
            Error::value_error(format!(
                "{} code generation has no type for {t} (supported: bool, int/uint 8-64, \
                 float32, float64)",
                self.name()
            ))
        };
        Ok(if t.is_bool() || (t.is_uint() && t.bits() == 1) {
            "bool"
        } else if t.is_int() {
            match (t.bits(), cuda) {
                (8, false) => "char",
                (8, true) => "signed char",
                (16, _) => "short",
                (32, _) => "int",
                (64, false) => "long",
                (64, true) => "long long",
                _ => return Err(unsupported()),
            }
        } else if t.is_uint() {
            match (t.bits(), cuda) {
                (8, false) => "uchar",
                (8, true) => "unsigned char",
                (16, false) => "ushort",
                (16, true) => "unsigned short",
                (32, false) => "uint",
                (32, true) => "unsigned int",
                (64, false) => "ulong",
                (64, true) => "unsigned long long",
                _ => return Err(unsupported()),
            }
        } else if t.is_float() && t.bits() == 32 {
            "float"
        } else if t.is_float() && t.bits() == 64 {
            "double"
        } else {
            return Err(unsupported());
        })
    }

    /// The literal of an integer (or bool) constant of type `t`. Host C spells the 64-bit
    /// and minimum values with `<stdint.h>` macros; the device dialects with suffixes.
    pub fn int_literal(self, t: DataType, v: i64) -> Result<String> {
        let ty = self.scalar_type(t)?;
        let host = self == Dialect::C;
        let sfx = if self == Dialect::Cuda { "LL" } else { "L" };
        Ok(if t.is_bool() || (t.is_uint() && t.bits() == 1) {
            if v != 0 { "true" } else { "false" }.to_string()
        } else if t.is_handle() {
            // Only host C has handle values (the device dialects have no type for them).
            format!("((void*)(intptr_t){v})")
        } else if t.is_floating() {
            self.float_literal(t, v as f64)?
        } else if t.is_int() && t.bits() == 64 {
            match (host, v) {
                (true, i64::MIN) => "INT64_MIN".to_string(),
                (true, _) => format!("INT64_C({v})"),
                (false, i64::MIN) => format!("(-9223372036854775807{sfx} - 1{sfx})"),
                (false, v) if v < 0 => format!("({v}{sfx})"),
                (false, v) => format!("{v}{sfx}"),
            }
        } else if t.is_uint() && t.bits() == 64 {
            if host {
                format!("UINT64_C({})", v as u64)
            } else {
                format!("{}U{sfx}", v as u64)
            }
        } else if t.is_int() && t.bits() == 32 {
            if v == i32::MIN as i64 {
                if host {
                    "INT32_MIN"
                } else {
                    "(-2147483647 - 1)"
                }
                .to_string()
            } else if v < 0 {
                format!("({v})")
            } else {
                v.to_string()
            }
        } else if t.is_uint() && t.bits() == 32 {
            format!("{}u", v as u32)
        } else {
            format!("(({ty}){v})")
        })
    }

    /// The literal of a float constant of type `t` (host C float16 constants are cast).
    pub fn float_literal(self, t: DataType, v: f64) -> Result<String> {
        let ty = self.scalar_type(t)?;
        let double = t.bits() == 64;
        let special = |nan: bool| -> String {
            let name = if nan { "NAN" } else { "INFINITY" };
            match (self, double) {
                (Dialect::Cuda, false) => {
                    let bits = if nan { "0x7fc00000" } else { "0x7f800000" };
                    format!("__int_as_float({bits})")
                }
                (Dialect::Cuda, true) => {
                    let bits = if nan {
                        "0x7ff8000000000000ULL"
                    } else {
                        "0x7ff0000000000000ULL"
                    };
                    format!("__longlong_as_double({bits})")
                }
                (Dialect::OpenCl, true) => format!("((double){name})"),
                _ => name.to_string(),
            }
        };
        let body = if v.is_nan() {
            special(true)
        } else if v.is_infinite() {
            let inf = special(false);
            if v > 0.0 {
                inf
            } else {
                format!("(-{inf})")
            }
        } else if double {
            format!("{v:?}")
        } else {
            format!("{:?}f", v as f32)
        };
        let body = if body.starts_with('-') {
            format!("({body})")
        } else {
            body
        };
        Ok(if t.bits() == 16 {
            format!("(({ty}){body})")
        } else {
            body
        })
    }

    /// A scalar binary operation on expressions `a`, `b` of operand type `t`.
    pub fn binary(self, op: BinOp, t: DataType, a: &str, b: &str) -> String {
        if self == Dialect::C {
            return scalar_binary(op, t, a, b);
        }
        let ty = self.scalar_type(t).unwrap_or("int");
        let small_int = t.is_integer() && t.bits() < 32;
        let wrap = |s: String| {
            if small_int {
                format!("(({ty}){s})")
            } else {
                s
            }
        };
        let float = t.is_floating();
        let f = |name: &str| self.math_name(name, t);
        match op {
            BinOp::Add => wrap(format!("({a} + {b})")),
            BinOp::Sub => wrap(format!("({a} - {b})")),
            BinOp::Mul => wrap(format!("({a} * {b})")),
            BinOp::Div => wrap(format!("({a} / {b})")),
            BinOp::Mod if float => format!("{}({a}, {b})", f("fmod")),
            BinOp::Mod => wrap(format!("({a} % {b})")),
            BinOp::FloorDiv if float => format!("{}({a} / {b})", f("floor")),
            BinOp::FloorMod if float => {
                format!("({a} - {}({a} / {b}) * {b})", f("floor"))
            }
            BinOp::FloorDiv if t.is_int() => format!("kiln_floordiv_i{}({a}, {b})", t.bits()),
            BinOp::FloorMod if t.is_int() => format!("kiln_floormod_i{}({a}, {b})", t.bits()),
            BinOp::FloorDiv => wrap(format!("({a} / {b})")),
            BinOp::FloorMod => wrap(format!("({a} % {b})")),
            BinOp::Min if float => format!("{}({a}, {b})", f("fmin")),
            BinOp::Max if float => format!("{}({a}, {b})", f("fmax")),
            BinOp::Min => wrap(format!("min({a}, {b})")),
            BinOp::Max => wrap(format!("max({a}, {b})")),
            BinOp::Eq => format!("({a} == {b})"),
            BinOp::Ne => format!("({a} != {b})"),
            BinOp::Lt => format!("({a} < {b})"),
            BinOp::Le => format!("({a} <= {b})"),
            BinOp::Gt => format!("({a} > {b})"),
            BinOp::Ge => format!("({a} >= {b})"),
            BinOp::And => format!("({a} && {b})"),
            BinOp::Or => format!("({a} || {b})"),
        }
    }

    /// The conversion of a scalar expression from `from` to `to`.
    pub fn cast(self, from: DataType, to: DataType, x: &str) -> Result<String> {
        if self == Dialect::C {
            return scalar_cast(from, to, x);
        }
        if from == to {
            return Ok(x.to_string());
        }
        let ty = self.scalar_type(to)?;
        self.scalar_type(from)?;
        Ok(format!("(({ty})({x}))"))
    }

    /// The name of math function `name` (a libm double name) for float type `t`: OpenCL's
    /// builtins are overloaded; CUDA has `namef` for float.
    fn math_name(self, name: &str, t: DataType) -> String {
        let name = match (self, name) {
            (Dialect::OpenCl, "nearbyint") => "rint",
            _ => name,
        };
        if self == Dialect::Cuda && t.bits() == 32 {
            format!("{name}f")
        } else {
            name.to_string()
        }
    }

    /// A float math intrinsic (`tir.exp`, `tir.sqrt`, ..., `tir.exp10`, `tir.rsqrt`,
    /// `tir.sigmoid`) of scalar expressions of float type `t`.
    pub fn math(self, op: &str, t: DataType, args: &[String]) -> String {
        if self == Dialect::C {
            return scalar_math(op, t, args);
        }
        let one = if t.bits() == 64 { "1.0" } else { "1.0f" };
        match op {
            "tir.exp10" => format!("{}({})", self.math_name("exp10", t), args[0]),
            "tir.rsqrt" => format!("{}({})", self.math_name("rsqrt", t), args[0]),
            "tir.sigmoid" => format!(
                "({one} / ({one} + {}(-({}))))",
                self.math_name("exp", t),
                args[0]
            ),
            _ => {
                let name = libm_name(op).unwrap_or("unknown");
                format!("{}({})", self.math_name(name, t), args.join(", "))
            }
        }
    }

    /// The helpers (floor division and modulo of signed integers) that device code `code`
    /// calls.
    pub fn device_helpers(self, code: &str) -> String {
        let (qual, types): (&str, &[(&str, u32)]) = match self {
            Dialect::C => return String::new(),
            Dialect::OpenCl => (
                "inline",
                &[("char", 8), ("short", 16), ("int", 32), ("long", 64)],
            ),
            Dialect::Cuda => (
                "__device__ __forceinline__",
                &[
                    ("signed char", 8),
                    ("short", 16),
                    ("int", 32),
                    ("long long", 64),
                ],
            ),
        };
        let mut s = String::new();
        for (ty, bits) in types {
            let used = |f: &str| code.contains(&format!("kiln_{f}_i{bits}("));
            if !used("floordiv") && !used("floormod") {
                continue;
            }
            s.push_str(&format!(
                "static {qual} {ty} kiln_floordiv_i{bits}({ty} a, {ty} b) {{\n  {ty} q = a / b;\n  \
                 {ty} r = a % b;\n  return (r != 0 && ((r < 0) != (b < 0))) ? ({ty})(q - 1) : q;\n}}\n\
                 static {qual} {ty} kiln_floormod_i{bits}({ty} a, {ty} b) {{\n  {ty} r = a % b;\n  \
                 return (r != 0 && ((r < 0) != (b < 0))) ? ({ty})(r + b) : r;\n}}\n"
            ));
        }
        s
    }
}
