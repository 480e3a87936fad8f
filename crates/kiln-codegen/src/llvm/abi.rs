//! The TVM-FFI ABI as LLVM types (shared/ABI.md): `TVMFFIAny`, DLPack's `DLTensor`, the
//! safe-call signature of exported functions, the parallel-lambda signature, and field access
//! by byte offset the way TVM's `tvm_struct_get`/`tvm_struct_set` lowering reads them.
//!
//! TVM 0.27 declares `TVMFFIAny` as `{ i32, i32, double }`; Kiln uses `{ i32, i32, i64 }`: the
//! same 16 bytes and offsets, and an integer slot is the more common read. Floats and pointers
//! are loaded from the same 8-byte slot with their own type (pointers are opaque in LLVM 19).

use super::llvm_error;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::types::{BasicTypeEnum, FunctionType, IntType, PointerType, StructType};
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue};
use inkwell::AddressSpace;
use kiln_ffi::Result;

/// Size of `TVMFFIAny` in bytes.
pub const ANY_BYTES: u64 = 16;
/// Size of the object header (reference counts, type index, deleter) in bytes; a tensor
/// object's `DLTensor` starts here.
pub const OBJECT_HEADER_BYTES: u64 = 24;
/// Size of `DLTensor` in bytes.
pub const DLTENSOR_BYTES: u64 = 48;

/// A field of `TVMFFIAny`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnyField {
    /// `int32_t type_index` at offset 0.
    TypeIndex,
    /// The 4 bytes at offset 4: zero, or a small string's length.
    ZeroPadding,
    /// The union at offset 8 read as `int64_t` (ints, bools).
    Int64,
    /// The union read as `double`.
    Float64,
    /// The union read as a pointer (objects, `DLTensor*`, opaque pointers, C strings).
    Pointer,
}

impl AnyField {
    /// Byte offset inside `TVMFFIAny`.
    pub fn offset(self) -> u64 {
        match self {
            AnyField::TypeIndex => 0,
            AnyField::ZeroPadding => 4,
            _ => 8,
        }
    }

    fn struct_index(self) -> u32 {
        match self {
            AnyField::TypeIndex => 0,
            AnyField::ZeroPadding => 1,
            _ => 2,
        }
    }
}

/// A field of `DLTensor` (device and dtype are flattened to their members).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DlTensorField {
    /// `void* data` at 0.
    Data,
    /// `int32_t device.device_type` at 8.
    DeviceType,
    /// `int32_t device.device_id` at 12.
    DeviceId,
    /// `int32_t ndim` at 16.
    Ndim,
    /// `uint8_t dtype.code` at 20.
    DtypeCode,
    /// `uint8_t dtype.bits` at 21.
    DtypeBits,
    /// `uint16_t dtype.lanes` at 22.
    DtypeLanes,
    /// `int64_t* shape` at 24.
    Shape,
    /// `int64_t* strides` at 32 (NULL for compact tensors).
    Strides,
    /// `uint64_t byte_offset` at 40.
    ByteOffset,
}

impl DlTensorField {
    /// Byte offset inside `DLTensor`.
    pub fn offset(self) -> u64 {
        match self {
            DlTensorField::Data => 0,
            DlTensorField::DeviceType => 8,
            DlTensorField::DeviceId => 12,
            DlTensorField::Ndim => 16,
            DlTensorField::DtypeCode => 20,
            DlTensorField::DtypeBits => 21,
            DlTensorField::DtypeLanes => 22,
            DlTensorField::Shape => 24,
            DlTensorField::Strides => 32,
            DlTensorField::ByteOffset => 40,
        }
    }
}

/// The ABI's LLVM types in one context, built once per module being generated.
#[derive(Clone, Copy, Debug)]
pub struct FfiAbi<'ctx> {
    /// The context the types live in.
    pub ctx: &'ctx Context,
    /// `i8`.
    pub i8: IntType<'ctx>,
    /// `i16`.
    pub i16: IntType<'ctx>,
    /// `i32`.
    pub i32: IntType<'ctx>,
    /// `i64`.
    pub i64: IntType<'ctx>,
    /// `ptr` (address space 0).
    pub ptr: PointerType<'ctx>,
    /// `%TVMFFIAny = type { i32, i32, i64 }`.
    pub any: StructType<'ctx>,
    /// `%DLDevice = type { i32, i32 }`.
    pub dl_device: StructType<'ctx>,
    /// `%DLDataType = type { i8, i8, i16 }`.
    pub dl_datatype: StructType<'ctx>,
    /// `%DLTensor = type { ptr, %DLDevice, i32, %DLDataType, ptr, ptr, i64 }` (48 bytes).
    pub dl_tensor: StructType<'ctx>,
    /// `%TVMParallelGroupEnv = type { ptr, i32 }` (sync handle, number of tasks).
    pub parallel_group_env: StructType<'ctx>,
    /// `i32 (ptr self, ptr args, i32 num_args, ptr result)`: every exported function.
    pub safe_call: FunctionType<'ctx>,
    /// `i32 (i32 task_id, ptr env, ptr cdata)`: a closure for `TVMBackendParallelLaunch`.
    pub parallel_lambda: FunctionType<'ctx>,
    /// `i32 (ptr out)`: the initializer `TVMFFIHandleInitOnce` calls.
    pub handle_init: FunctionType<'ctx>,
}

fn named_struct<'ctx>(
    ctx: &'ctx Context,
    name: &str,
    fields: &[BasicTypeEnum<'ctx>],
) -> StructType<'ctx> {
    // One named type per context: a second module in the same context reuses it.
    if let Some(t) = ctx.get_struct_type(name) {
        return t;
    }
    let t = ctx.opaque_struct_type(name);
    t.set_body(fields, false);
    t
}

impl<'ctx> FfiAbi<'ctx> {
    /// Declares (or finds) the ABI types in `ctx`.
    pub fn new(ctx: &'ctx Context) -> FfiAbi<'ctx> {
        let (i8, i16, i32, i64) = (
            ctx.i8_type(),
            ctx.i16_type(),
            ctx.i32_type(),
            ctx.i64_type(),
        );
        let ptr = ctx.ptr_type(AddressSpace::default());
        let any = named_struct(ctx, "TVMFFIAny", &[i32.into(), i32.into(), i64.into()]);
        let dl_device = named_struct(ctx, "DLDevice", &[i32.into(), i32.into()]);
        let dl_datatype = named_struct(ctx, "DLDataType", &[i8.into(), i8.into(), i16.into()]);
        let dl_tensor = named_struct(
            ctx,
            "DLTensor",
            &[
                ptr.into(),
                dl_device.into(),
                i32.into(),
                dl_datatype.into(),
                ptr.into(),
                ptr.into(),
                i64.into(),
            ],
        );
        let parallel_group_env =
            named_struct(ctx, "TVMParallelGroupEnv", &[ptr.into(), i32.into()]);
        let safe_call = i32.fn_type(&[ptr.into(), ptr.into(), i32.into(), ptr.into()], false);
        let parallel_lambda = i32.fn_type(&[i32.into(), ptr.into(), ptr.into()], false);
        let handle_init = i32.fn_type(&[ptr.into()], false);
        FfiAbi {
            ctx,
            i8,
            i16,
            i32,
            i64,
            ptr,
            any,
            dl_device,
            dl_datatype,
            dl_tensor,
            parallel_group_env,
            safe_call,
            parallel_lambda,
            handle_init,
        }
    }

    /// The LLVM type a field of `TVMFFIAny` is read as.
    pub fn any_field_type(&self, field: AnyField) -> BasicTypeEnum<'ctx> {
        match field {
            AnyField::TypeIndex | AnyField::ZeroPadding => self.i32.into(),
            AnyField::Int64 => self.i64.into(),
            AnyField::Float64 => self.ctx.f64_type().into(),
            AnyField::Pointer => self.ptr.into(),
        }
    }

    /// The LLVM type a field of `DLTensor` is read as.
    pub fn dl_tensor_field_type(&self, field: DlTensorField) -> BasicTypeEnum<'ctx> {
        use DlTensorField::*;
        match field {
            Data | Shape | Strides => self.ptr.into(),
            DeviceType | DeviceId | Ndim => self.i32.into(),
            DtypeCode | DtypeBits => self.i8.into(),
            DtypeLanes => self.i16.into(),
            ByteOffset => self.i64.into(),
        }
    }

    /// The address of `field` of element `index` of the `TVMFFIAny` array at `array`
    /// (`&args[index].field`).
    pub fn any_field_ptr(
        &self,
        b: &Builder<'ctx>,
        array: PointerValue<'ctx>,
        index: IntValue<'ctx>,
        field: AnyField,
    ) -> Result<PointerValue<'ctx>> {
        // SAFETY: (inbounds is a promise to LLVM) in-bounds GEPs into an array of `TVMFFIAny` the caller provides.
        unsafe {
            let elem = b
                .build_in_bounds_gep(self.any, array, &[index], "any")
                .map_err(llvm_error)?;
            b.build_in_bounds_gep(
                self.any,
                elem,
                &[
                    self.i32.const_zero(),
                    self.i32.const_int(field.struct_index() as u64, false),
                ],
                "any.field",
            )
            .map_err(llvm_error)
        }
    }

    /// Loads `args[index].field`.
    pub fn load_any_field(
        &self,
        b: &Builder<'ctx>,
        array: PointerValue<'ctx>,
        index: IntValue<'ctx>,
        field: AnyField,
        name: &str,
    ) -> Result<BasicValueEnum<'ctx>> {
        let p = self.any_field_ptr(b, array, index, field)?;
        let v = b
            .build_load(self.any_field_type(field), p, name)
            .map_err(llvm_error)?;
        set_alignment(v, if field.offset() == 8 { 8 } else { 4 });
        Ok(v)
    }

    /// Writes a whole `TVMFFIAny` at `dst`: the type index, zero padding, and `value` (an `i64`,
    /// `double` or pointer; `None` zeroes the slot, as for `None` values).
    pub fn store_any(
        &self,
        b: &Builder<'ctx>,
        dst: PointerValue<'ctx>,
        type_index: IntValue<'ctx>,
        value: Option<BasicValueEnum<'ctx>>,
    ) -> Result<()> {
        let zero = self.i32.const_zero();
        let fields: [(AnyField, BasicValueEnum<'ctx>); 3] = [
            (AnyField::TypeIndex, type_index.into()),
            (AnyField::ZeroPadding, zero.into()),
            (
                AnyField::Int64,
                value.unwrap_or_else(|| self.i64.const_zero().into()),
            ),
        ];
        for (field, v) in fields {
            let p = self.any_field_ptr(b, dst, zero, field)?;
            let st = b.build_store(p, v).map_err(llvm_error)?;
            st.set_alignment(if field.offset() == 8 { 8 } else { 4 })
                .map_err(llvm_error)?;
        }
        Ok(())
    }

    /// The address of `field` of the `DLTensor` at `tensor`.
    pub fn dl_tensor_field_ptr(
        &self,
        b: &Builder<'ctx>,
        tensor: PointerValue<'ctx>,
        field: DlTensorField,
    ) -> Result<PointerValue<'ctx>> {
        // SAFETY: (inbounds is a promise to LLVM) a constant in-bounds byte offset into a 48-byte DLTensor.
        unsafe {
            b.build_in_bounds_gep(
                self.i8,
                tensor,
                &[self.i64.const_int(field.offset(), false)],
                "dltensor.field",
            )
            .map_err(llvm_error)
        }
    }

    /// Loads `field` of the `DLTensor` at `tensor`.
    pub fn load_dl_tensor_field(
        &self,
        b: &Builder<'ctx>,
        tensor: PointerValue<'ctx>,
        field: DlTensorField,
        name: &str,
    ) -> Result<BasicValueEnum<'ctx>> {
        let p = self.dl_tensor_field_ptr(b, tensor, field)?;
        let v = b
            .build_load(self.dl_tensor_field_type(field), p, name)
            .map_err(llvm_error)?;
        let align = match field {
            DlTensorField::DtypeCode | DlTensorField::DtypeBits => 1,
            DlTensorField::DtypeLanes => 2,
            DlTensorField::DeviceType | DlTensorField::DeviceId | DlTensorField::Ndim => 4,
            _ => 8,
        };
        set_alignment(v, align);
        Ok(v)
    }

    /// The `DLTensor*` inside a tensor object (type index 70): the object pointer plus the
    /// 24-byte header.
    pub fn dl_tensor_of_object(
        &self,
        b: &Builder<'ctx>,
        object: PointerValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        // SAFETY: (inbounds is a promise to LLVM) a tensor object is a header followed by its DLTensor.
        unsafe {
            b.build_in_bounds_gep(
                self.i8,
                object,
                &[self.i64.const_int(OBJECT_HEADER_BYTES, false)],
                "dltensor",
            )
            .map_err(llvm_error)
        }
    }
}

fn set_alignment(v: BasicValueEnum<'_>, align: u32) {
    if let Some(inst) = v.as_instruction_value() {
        // A load always takes an alignment; ignoring the impossible error is fine.
        let _ = inst.set_alignment(align);
    }
}
