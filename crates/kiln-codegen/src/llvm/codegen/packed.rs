//! The runtime's structs and services: `tir.tvm_struct_get` / `tir.tvm_struct_set` on
//! `TVMFFIAny` arrays and `DLTensor`s (field numbers from `kiln_tir::op::struct_field`),
//! workspace memory through the `__TVMBackendAllocWorkspace` / `__TVMBackendFreeWorkspace`
//! context slots, `tir.call_packed` (function handle looked up once by name, arguments packed
//! into a stack `TVMFFIAny` array, called through `__TVMFFIFunctionCall`, -1 returned on
//! failure), `tir.call_extern` and `tir.address_of`.

use super::CodeGen;
use crate::llvm::abi::{AnyField, DlTensorField};
use crate::llvm::llvm_error;
use crate::llvm::symbols::{self, ContextSlot};
use crate::lower_common::{field_dtype, field_of, struct_field_code, Field};
use inkwell::module::Linkage;
use inkwell::types::{BasicMetadataTypeEnum, BasicType};
use inkwell::values::{BasicMetadataValueEnum, BasicValue, BasicValueEnum, IntValue};
use inkwell::IntPredicate;
use kiln_ffi::abi::type_index;
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::{DataTypeExt, ExprKind, PrimExpr};

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    fn struct_args(
        &mut self,
        args: &[PrimExpr],
        what: &str,
    ) -> Result<(inkwell::values::PointerValue<'ctx>, IntValue<'ctx>, Field)> {
        let code = struct_field_code(args, what)?;
        let handle = self.expr(&args[0])?.into_pointer_value();
        let index = self.expr(&args[1])?;
        let index = self
            .cast(args[1].dtype(), DataType::int(64), index)?
            .into_int_value();
        Ok((handle, index, field_of(code)?))
    }

    fn field_ptr(
        &mut self,
        handle: inkwell::values::PointerValue<'ctx>,
        index: IntValue<'ctx>,
        f: &Field,
    ) -> Result<(inkwell::values::PointerValue<'ctx>, u32)> {
        match f {
            Field::Any(a) => Ok((
                self.abi.any_field_ptr(&self.b, handle, index, *a)?,
                if a.offset() == 8 { 8 } else { 4 },
            )),
            Field::Dl(d) => {
                let base = if index.is_const() && index.get_zero_extended_constant() == Some(0) {
                    handle
                } else {
                    // SAFETY: (inbounds is a promise to LLVM) element `index` of an array of DLTensors.
                    unsafe {
                        self.b
                            .build_in_bounds_gep(self.abi.dl_tensor, handle, &[index], "dl")
                            .map_err(llvm_error)?
                    }
                };
                let align = match d {
                    DlTensorField::DtypeCode | DlTensorField::DtypeBits => 1,
                    DlTensorField::DtypeLanes => 2,
                    DlTensorField::DeviceType | DlTensorField::DeviceId | DlTensorField::Ndim => 4,
                    _ => 8,
                };
                Ok((self.abi.dl_tensor_field_ptr(&self.b, base, *d)?, align))
            }
        }
    }

    /// `tvm_struct_get(handle, index, field)` as `t`.
    pub(crate) fn struct_get(
        &mut self,
        t: DataType,
        args: &[PrimExpr],
    ) -> Result<BasicValueEnum<'ctx>> {
        let (handle, index, f) = self.struct_args(args, "tvm_struct_get")?;
        let (p, align) = self.field_ptr(handle, index, &f)?;
        let ft = field_dtype(&f);
        let v = self.load(ft, p, align)?;
        self.cast(ft, t, v)
    }

    /// `tvm_struct_set(handle, index, field, value)`; writing a type index also zeroes the
    /// padding word after it.
    pub(crate) fn struct_set(&mut self, args: &[PrimExpr]) -> Result<BasicValueEnum<'ctx>> {
        if args.len() != 4 {
            return Err(Error::value_error("tvm_struct_set takes 4 arguments"));
        }
        let (handle, index, f) = self.struct_args(args, "tvm_struct_set")?;
        let v = self.expr(&args[3])?;
        let ft = field_dtype(&f);
        let v = self.cast(args[3].dtype(), ft, v)?;
        let (p, align) = self.field_ptr(handle, index, &f)?;
        self.store(v, p, align)?;
        if let Field::Any(AnyField::TypeIndex) = f {
            let pad = self
                .abi
                .any_field_ptr(&self.b, handle, index, AnyField::ZeroPadding)?;
            self.store(self.abi.i32.const_zero().into(), pad, 4)?;
        }
        Ok(self.abi.i32.const_zero().into())
    }

    fn int_arg(&mut self, e: &PrimExpr, to: DataType) -> Result<BasicMetadataValueEnum<'ctx>> {
        let v = self.expr(e)?;
        Ok(self.cast(e.dtype(), to, v)?.into())
    }

    /// `TVMBackendAllocWorkspace(device_type, device_id, nbytes, dtype_code, dtype_bits)`.
    pub(crate) fn alloc_workspace(&mut self, args: &[PrimExpr]) -> Result<BasicValueEnum<'ctx>> {
        if args.len() != 5 {
            return Err(Error::value_error(
                "TVMBackendAllocWorkspace takes 5 arguments",
            ));
        }
        let i32t = DataType::int(32);
        let a = [
            self.int_arg(&args[0], i32t)?,
            self.int_arg(&args[1], i32t)?,
            self.int_arg(&args[2], DataType::uint(64))?,
            self.int_arg(&args[3], i32t)?,
            self.int_arg(&args[4], i32t)?,
        ];
        let call = symbols::build_slot_call(
            &self.b,
            self.module,
            &self.abi,
            ContextSlot::BackendAllocWorkspace,
            &a,
            "workspace",
        )?;
        Ok(call.try_as_basic_value().basic().expect("a pointer"))
    }

    /// `TVMBackendFreeWorkspace(device_type, device_id, ptr)`.
    pub(crate) fn free_workspace(&mut self, args: &[PrimExpr]) -> Result<BasicValueEnum<'ctx>> {
        if args.len() != 3 {
            return Err(Error::value_error(
                "TVMBackendFreeWorkspace takes 3 arguments",
            ));
        }
        let i32t = DataType::int(32);
        let a = [
            self.int_arg(&args[0], i32t)?,
            self.int_arg(&args[1], i32t)?,
            self.expr(&args[2])?.into(),
        ];
        let call = symbols::build_slot_call(
            &self.b,
            self.module,
            &self.abi,
            ContextSlot::BackendFreeWorkspace,
            &a,
            "free",
        )?;
        Ok(call.try_as_basic_value().basic().expect("an int"))
    }

    /// `tir.call_packed("name", args...)`: ints (and bools) as Int, floats as Float, handles
    /// as opaque pointers. Returns 0, or the result converted to `t` when `t` is not int32.
    pub(crate) fn call_packed(
        &mut self,
        t: DataType,
        args: &[PrimExpr],
    ) -> Result<BasicValueEnum<'ctx>> {
        let Some(ExprKind::StringImm(name)) = args.first().map(|a| a.kind()) else {
            return Err(Error::value_error(
                "tir.call_packed needs the function name (a string) first",
            ));
        };
        let name = name.to_string();
        let rest = &args[1..];
        let n = rest.len() as u32;
        let array_t = self.abi.any.array_type(n.max(1));
        let array = self.entry_alloca(array_t.into(), 16, "packed.args")?;
        let result = self.entry_alloca(self.abi.any.into(), 16, "packed.ret")?;
        for (i, a) in rest.iter().enumerate() {
            let at = a.dtype();
            let v = self.expr(a)?;
            let (ti, value): (u64, BasicValueEnum) = if at.is_handle() {
                (type_index::OPAQUE_PTR as u64, v)
            } else if at.is_floating() {
                let f = self.cast(at, DataType::float(64), v)?;
                let bits = self
                    .b
                    .build_bit_cast(f, self.abi.i64, "f.bits")
                    .map_err(llvm_error)?;
                (type_index::FLOAT as u64, bits)
            } else if at.is_bool() {
                (
                    type_index::BOOL as u64,
                    self.cast(at, DataType::int(64), v)?,
                )
            } else {
                (type_index::INT as u64, self.cast(at, DataType::int(64), v)?)
            };
            let idx = self.abi.i32.const_int(i as u64, false);
            let slot = self
                .abi
                .any_field_ptr(&self.b, array, idx, AnyField::TypeIndex)?;
            let ti = self.abi.i32.const_int(ti, false);
            self.abi.store_any(&self.b, slot, ti, Some(value))?;
        }
        let none = self.abi.i32.const_int(type_index::NONE as u64, false);
        self.abi.store_any(&self.b, result, none, None)?;
        let (status, handle) =
            symbols::build_function_handle(&self.b, self.module, &self.abi, &name)?;
        self.check_status(status)?;
        let h = self
            .b
            .build_load(self.abi.ptr, handle.as_pointer_value(), "handle")
            .map_err(llvm_error)?;
        let rc = symbols::build_slot_call(
            &self.b,
            self.module,
            &self.abi,
            ContextSlot::FunctionCall,
            &[
                h.into(),
                array.into(),
                self.abi.i32.const_int(n as u64, false).into(),
                result.into(),
            ],
            "rc",
        )?
        .try_as_basic_value()
        .basic()
        .expect("i32")
        .into_int_value();
        self.check_status(rc)?;
        if t == DataType::int(32) || t.is_void() {
            return Ok(self.abi.i32.const_zero().into());
        }
        let zero = self.abi.i32.const_zero();
        let field = if t.is_floating() {
            AnyField::Float64
        } else if t.is_handle() {
            AnyField::Pointer
        } else {
            AnyField::Int64
        };
        let v = self
            .abi
            .load_any_field(&self.b, result, zero, field, "ret")?;
        let from = match field {
            AnyField::Float64 => DataType::float(64),
            AnyField::Pointer => DataType::handle(),
            _ => DataType::int(64),
        };
        self.cast(from, t, v)
    }

    /// Returns -1 when `status` is not 0.
    fn check_status(&mut self, status: IntValue<'ctx>) -> Result<()> {
        let ok = self
            .b
            .build_int_compare(
                IntPredicate::EQ,
                status,
                status.get_type().const_zero(),
                "ok",
            )
            .map_err(llvm_error)?;
        let ok_bb = self.block("call_ok");
        let fail_bb = self.block("call_fail");
        self.b
            .build_conditional_branch(ok, ok_bb, fail_bb)
            .map_err(llvm_error)?;
        self.b.position_at_end(fail_bb);
        self.b
            .build_return(Some(&self.abi.i32.const_all_ones()))
            .map_err(llvm_error)?;
        self.b.position_at_end(ok_bb);
        Ok(())
    }

    /// `tir.call_extern("name", args...)`: a C function of the arguments' LLVM types returning
    /// `t` (nothing for `void`).
    pub(crate) fn call_extern(
        &mut self,
        t: DataType,
        args: &[PrimExpr],
    ) -> Result<BasicValueEnum<'ctx>> {
        let Some(ExprKind::StringImm(name)) = args.first().map(|a| a.kind()) else {
            return Err(Error::value_error(
                "tir.call_extern needs the function name (a string) first",
            ));
        };
        let name = name.to_string();
        let mut vals: Vec<BasicMetadataValueEnum> = Vec::new();
        let mut types: Vec<BasicMetadataTypeEnum> = Vec::new();
        for a in &args[1..] {
            let v = self.expr(a)?;
            types.push(v.get_type().into());
            vals.push(v.into());
        }
        let f = match self.module.get_function(&name) {
            Some(f) => f,
            None => {
                let fty = if t.is_void() {
                    self.ctx.void_type().fn_type(&types, false)
                } else {
                    self.llvm_type(t)?.fn_type(&types, false)
                };
                self.module
                    .add_function(&name, fty, Some(Linkage::External))
            }
        };
        let call = self.b.build_call(f, &vals, "extern").map_err(llvm_error)?;
        match call.try_as_basic_value().basic() {
            Some(v) => Ok(v),
            None => Ok(self.abi.i32.const_zero().into()),
        }
    }

    /// `tir.address_of(buffer[index])`.
    pub(crate) fn address_of(&mut self, e: &PrimExpr) -> Result<BasicValueEnum<'ctx>> {
        let ExprKind::BufferLoad { buffer, indices } = e.kind() else {
            return Err(Error::value_error("tir.address_of needs a buffer load"));
        };
        let [index] = indices else {
            return Err(Error::value_error(
                "tir.address_of needs a flat buffer load",
            ));
        };
        let base = match index.kind() {
            ExprKind::Ramp { base, .. } => base.clone(),
            _ => index.clone(),
        };
        let i = self.expr(&base)?;
        Ok(self
            .element_ptr(buffer, i, base.dtype())?
            .as_basic_value_enum())
    }
}
