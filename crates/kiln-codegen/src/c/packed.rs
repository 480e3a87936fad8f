//! The runtime's structs and services in C: `tir.tvm_struct_get` / `tir.tvm_struct_set` on
//! `TVMFFIAny` arrays and `DLTensor`s (field numbers from `kiln_tir::op::struct_field`; each
//! call's dtype gives the C type the field is converted to), `tir.handle_add_byte_offset`,
//! `tir.isnullptr`, workspace memory through the `__TVMBackendAllocWorkspace` /
//! `__TVMBackendFreeWorkspace` context slots, `tir.call_extern`, `tir.address_of`, and failing
//! asserts raising `Kind: message` through `TVMFFIErrorSetRaisedFromCStrParts`.

use super::expr::scalar_cast;
use super::{c_string, CodeGenC};
use crate::llvm::abi::{AnyField, DlTensorField};
use crate::llvm::symbols::{ContextSlot, SET_RAISED_FROM_CSTR_PARTS};
use crate::lower_common::{field_dtype, field_of, struct_field_code, Field};
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::op::{self, builtin, struct_field as sf};
use kiln_tir::stmt::AssertStmtObj;
use kiln_tir::{DataTypeExt, ExprKind, PrimExpr};

/// The C access path of a struct field (after the element) and the field's TIR type.
fn field_access(code: i64) -> Result<(bool, &'static str, DataType)> {
    let f = field_of(code)?;
    let member = match &f {
        Field::Any(a) => match a {
            AnyField::TypeIndex => "type_index",
            AnyField::ZeroPadding => "zero_padding",
            AnyField::Int64 => "v_int64",
            AnyField::Float64 => "v_float64",
            AnyField::Pointer => "v_ptr",
        },
        Field::Dl(d) => match d {
            DlTensorField::Data => "data",
            DlTensorField::Shape => "shape",
            DlTensorField::Strides => "strides",
            DlTensorField::Ndim => "ndim",
            DlTensorField::DtypeCode => "dtype.code",
            DlTensorField::DtypeBits => "dtype.bits",
            DlTensorField::DtypeLanes => "dtype.lanes",
            DlTensorField::ByteOffset => "byte_offset",
            DlTensorField::DeviceId => "device.device_id",
            DlTensorField::DeviceType => "device.device_type",
        },
    };
    // (is a TVMFFIAny field, member, type in memory)
    Ok((matches!(f, Field::Any(_)), member, field_dtype(&f)))
}

impl CodeGenC {
    /// `(handle, index, field)`: the C lvalue of the field and its type in memory.
    fn field_lvalue(&mut self, args: &[PrimExpr], what: &str) -> Result<(String, DataType)> {
        let code = struct_field_code(args, what)?;
        let h = self.expr(&args[0])?;
        let i = self.expr(&args[1])?;
        let (any, member, ft) = field_access(code)?;
        let st = if any { "TVMFFIAny" } else { "DLTensor" };
        Ok((format!("(({st}*){h})[{i}].{member}"), ft))
    }

    /// Runtime builtins and external calls (what [`CodeGenC::expr`] does not handle itself).
    pub(crate) fn builtin_call(
        &mut self,
        t: DataType,
        op_name: &str,
        args: &[PrimExpr],
    ) -> Result<String> {
        let argc = |n: usize| -> Result<()> {
            if args.len() != n {
                return Err(Error::value_error(format!(
                    "c codegen: {op_name} takes {n} arguments, got {}",
                    args.len()
                )));
            }
            Ok(())
        };
        match op_name {
            builtin::TVM_STRUCT_GET => {
                let (lv, ft) = self.field_lvalue(args, "tvm_struct_get")?;
                let v = if ft.is_handle() {
                    format!("((void*){lv})")
                } else {
                    lv
                };
                scalar_cast(ft, t, &v)
            }
            builtin::TVM_STRUCT_SET => {
                argc(4)?;
                let (lv, ft) = self.field_lvalue(args, "tvm_struct_set")?;
                let v = self.expr(&args[3])?;
                let v = scalar_cast(args[3].dtype(), ft, &v)?;
                let pad = if args[2].is_const_int(sf::ANY_TYPE_INDEX) {
                    let h = self.expr(&args[0])?;
                    let i = self.expr(&args[1])?;
                    format!(", ((TVMFFIAny*){h})[{i}].zero_padding = 0")
                } else {
                    String::new()
                };
                Ok(format!("({lv} = {v}{pad}, 0)"))
            }
            builtin::HANDLE_ADD_BYTE_OFFSET => {
                argc(2)?;
                let (h, o) = (self.expr(&args[0])?, self.expr(&args[1])?);
                Ok(format!("((void*)((char*){h} + {o}))"))
            }
            builtin::ISNULLPTR => {
                argc(1)?;
                let h = self.expr(&args[0])?;
                Ok(format!("({h} == NULL)"))
            }
            builtin::ALLOC_WORKSPACE => {
                argc(5)?;
                let slot = self.slot(ContextSlot::BackendAllocWorkspace);
                let types = [
                    DataType::int(32),
                    DataType::int(32),
                    DataType::uint(64),
                    DataType::int(32),
                    DataType::int(32),
                ];
                let a = self.converted_args(args, &types)?;
                Ok(format!("((kiln_alloc_workspace_t){slot})({a})"))
            }
            builtin::FREE_WORKSPACE => {
                argc(3)?;
                let slot = self.slot(ContextSlot::BackendFreeWorkspace);
                let types = [DataType::int(32), DataType::int(32), DataType::handle()];
                let a = self.converted_args(args, &types)?;
                Ok(format!("((kiln_free_workspace_t){slot})({a})"))
            }
            builtin::ADDRESS_OF => {
                argc(1)?;
                match args[0].kind() {
                    ExprKind::BufferLoad { buffer, indices } if indices.len() == 1 => {
                        let p = self.buffer_ptr(buffer)?;
                        let i = self.expr(&indices[0])?;
                        Ok(format!("((void*)&{p}[{i}])"))
                    }
                    _ => Err(Error::value_error(
                        "c codegen: tir.address_of needs a flat buffer load",
                    )),
                }
            }
            op::CALL_EXTERN | op::CALL_PURE_EXTERN => {
                let name = match args.first().map(|a| a.kind()) {
                    Some(ExprKind::StringImm(s)) => s.to_string(),
                    _ => {
                        return Err(Error::value_error(format!(
                            "c codegen: {op_name} needs the function name first"
                        )))
                    }
                };
                let mut a = Vec::with_capacity(args.len() - 1);
                for x in &args[1..] {
                    a.push(self.expr(x)?);
                }
                self.declare_extern(&name, t, &args[1..])?;
                Ok(format!("{name}({})", a.join(", ")))
            }
            builtin::TVM_THROW_LAST_ERROR => Err(Error::value_error(
                "c codegen: tir.tvm_throw_last_error may only appear as a statement",
            )),
            _ => Err(Error::value_error(format!(
                "the c target does not support `{op_name}` yet (in function `{}`)",
                self.func_name
            ))),
        }
    }

    fn converted_args(&mut self, args: &[PrimExpr], types: &[DataType]) -> Result<String> {
        let mut out = Vec::with_capacity(args.len());
        for (a, t) in args.iter().zip(types) {
            let x = self.expr(a)?;
            out.push(scalar_cast(a.dtype(), *t, &x)?);
        }
        Ok(out.join(", "))
    }

    /// Declares an external C function with a prototype from the call's types (once).
    fn declare_extern(&mut self, name: &str, t: DataType, args: &[PrimExpr]) -> Result<()> {
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::value_error(format!(
                "c codegen: `{name}` is not a C identifier"
            )));
        }
        let marker = format!(" {name}(");
        if self.toplevel.contains(&marker) {
            return Ok(());
        }
        let rt = if t.is_void() {
            "void".to_string()
        } else {
            self.ctype(t)?
        };
        let mut params = Vec::with_capacity(args.len());
        for a in args {
            params.push(self.ctype(a.dtype())?);
        }
        let params = if params.is_empty() {
            "void".to_string()
        } else {
            params.join(", ")
        };
        self.toplevel
            .push_str(&format!("extern {rt} {name}({params});\n"));
        Ok(())
    }

    /// `if (!(cond)) { raise Kind: message; return -1; } body`.
    pub(crate) fn assert_stmt(&mut self, a: &AssertStmtObj) -> Result<()> {
        let c = self.expr(&a.condition)?;
        let (kind, message) = assert_kind_message(&a.message);
        self.line(format!("if (!({c})) {{"));
        self.indent += 1;
        let parts = self.temp("parts");
        self.line(format!(
            "const char* {parts}[1] = {{{}}};",
            c_string(&message)
        ));
        self.line(format!(
            "{SET_RAISED_FROM_CSTR_PARTS}({}, {parts}, 1);",
            c_string(&kind)
        ));
        self.line("return -1;");
        self.indent -= 1;
        self.line("}");
        self.stmt(&a.body)
    }
}

/// The error kind and message of an assert (one rule for both back ends).
pub use crate::lower_common::assert_kind_message;
