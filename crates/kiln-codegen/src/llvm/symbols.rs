//! The symbols a Kiln (or Apache TVM 0.27) shared library defines and imports, made the way TVM
//! 0.27's LLVM backend makes them (facts read from its `.ll` output):
//!
//! - `__tvm_ffi_<name>`: each compiled function, external linkage, `dllexport`, safe-call
//!   signature with `noalias` pointer parameters named `self_handle`, `args`, `num_args`, `result`.
//! - `__tvm_ffi_main`: when a library has one function, a `weak dllexport` *function* (not an
//!   IR alias) that tail-calls it with the same arguments.
//! - Context slots (`__TVMFFIFunctionCall`, `__TVMBackendParallelLaunch`, ...) and
//!   `__tvm_ffi__library_ctx`: `linkonce dllexport global ptr null, align 8`, defined only in
//!   modules that use them; in the `.so` they are WEAK OBJECTs of 8 bytes that the loader fills.
//!   Code loads the function pointer from the slot at each use and calls it indirectly.
//! - Functions called by name: an `internal global ptr null, align 8` named `.tvm_func.<name>`,
//!   filled once through `__TVMFFIHandleInitOnce` by an internal initializer
//!   `__tvm_func_handle_init.<name>` that calls `__TVMFFIEnvModLookupFromImports` with the
//!   library context.
//! - Errors: the one imported function `TVMFFIErrorSetRaisedFromCStrParts(kind, parts, n)`.
//! - `__tvm_ffi__library_bin`: in its own object, an external `constant [N x i8]`, align 1,
//!   `dllexport`, in `.rodata`; the bytes start with their own length (u64) as the runtime's blob
//!   writer produces them.

use super::abi::FfiAbi;
use super::llvm_error;
use inkwell::attributes::AttributeLoc;
use inkwell::builder::Builder;
use inkwell::module::{Linkage, Module};
use inkwell::types::FunctionType;
use inkwell::values::{
    BasicMetadataValueEnum, BasicValue, CallSiteValue, FunctionValue, GlobalValue, IntValue,
    PointerValue,
};
use inkwell::DLLStorageClass;
use kiln_ffi::{Error, Result};

/// Prefix of exported function symbols.
pub const SYMBOL_PREFIX: &str = "__tvm_ffi_";
/// The default entry point of a one-function library.
pub const MAIN_SYMBOL: &str = "__tvm_ffi_main";
/// The variable that receives the library's module pointer.
pub const LIBRARY_CTX_SYMBOL: &str = "__tvm_ffi__library_ctx";
/// The serialized module tree of a library with imports.
pub const LIBRARY_BIN_SYMBOL: &str = "__tvm_ffi__library_bin";
/// The section of a library's target records, and the symbol prefix of a code variant's
/// functions (both defined by the runtime, which reads them).
pub use kiln_runtime::module::target_record::{variant_symbol_prefix, TARGET_RECORD_SECTION};
/// The function generated code imports to raise errors.
pub const SET_RAISED_FROM_CSTR_PARTS: &str = "TVMFFIErrorSetRaisedFromCStrParts";

/// The exported symbol of function `name` (`__tvm_ffi_<name>`).
pub fn exported_symbol(name: &str) -> String {
    format!("{SYMBOL_PREFIX}{name}")
}

/// A context slot: a pointer variable the library defines and the loader fills with a runtime
/// service (shared/ABI.md lists the signatures).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContextSlot {
    /// `int TVMFFIFunctionCall(void* func, TVMFFIAny* args, int32_t n, TVMFFIAny* result)`.
    FunctionCall,
    /// `void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message)`.
    ErrorSetRaisedFromCStr,
    /// `int TVMFFIEnvModLookupFromImports(void* library_ctx, const char* name, void** out)`.
    EnvModLookupFromImports,
    /// `int TVMFFIHandleInitOnce(void** handle, int (*init)(void** result))`.
    HandleInitOnce,
    /// `void* TVMBackendAllocWorkspace(int dev_type, int dev_id, uint64_t nbytes, int code_hint,
    /// int bits_hint)`.
    BackendAllocWorkspace,
    /// `int TVMBackendFreeWorkspace(int dev_type, int dev_id, void* ptr)`.
    BackendFreeWorkspace,
    /// `int TVMBackendParallelLaunch(int (*lambda)(int, TVMParallelGroupEnv*, void*), void* cdata,
    /// int num_task)`.
    BackendParallelLaunch,
    /// `int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* env)`.
    BackendParallelBarrier,
}

impl ContextSlot {
    /// Every slot, in ABI order.
    pub const ALL: [ContextSlot; 8] = [
        ContextSlot::FunctionCall,
        ContextSlot::ErrorSetRaisedFromCStr,
        ContextSlot::EnvModLookupFromImports,
        ContextSlot::HandleInitOnce,
        ContextSlot::BackendAllocWorkspace,
        ContextSlot::BackendFreeWorkspace,
        ContextSlot::BackendParallelLaunch,
        ContextSlot::BackendParallelBarrier,
    ];

    /// The slot's symbol (`__` + the function's name).
    pub fn symbol(self) -> &'static str {
        match self {
            ContextSlot::FunctionCall => "__TVMFFIFunctionCall",
            ContextSlot::ErrorSetRaisedFromCStr => "__TVMFFIErrorSetRaisedFromCStr",
            ContextSlot::EnvModLookupFromImports => "__TVMFFIEnvModLookupFromImports",
            ContextSlot::HandleInitOnce => "__TVMFFIHandleInitOnce",
            ContextSlot::BackendAllocWorkspace => "__TVMBackendAllocWorkspace",
            ContextSlot::BackendFreeWorkspace => "__TVMBackendFreeWorkspace",
            ContextSlot::BackendParallelLaunch => "__TVMBackendParallelLaunch",
            ContextSlot::BackendParallelBarrier => "__TVMBackendParallelBarrier",
        }
    }

    /// The type of the function the slot points to.
    pub fn fn_type<'ctx>(self, abi: &FfiAbi<'ctx>) -> FunctionType<'ctx> {
        let (i32, i64, ptr) = (abi.i32, abi.i64, abi.ptr);
        match self {
            ContextSlot::FunctionCall => {
                i32.fn_type(&[ptr.into(), ptr.into(), i32.into(), ptr.into()], false)
            }
            ContextSlot::ErrorSetRaisedFromCStr => abi
                .ctx
                .void_type()
                .fn_type(&[ptr.into(), ptr.into()], false),
            ContextSlot::EnvModLookupFromImports => {
                i32.fn_type(&[ptr.into(), ptr.into(), ptr.into()], false)
            }
            ContextSlot::HandleInitOnce => i32.fn_type(&[ptr.into(), ptr.into()], false),
            ContextSlot::BackendAllocWorkspace => ptr.fn_type(
                &[i32.into(), i32.into(), i64.into(), i32.into(), i32.into()],
                false,
            ),
            ContextSlot::BackendFreeWorkspace => {
                i32.fn_type(&[i32.into(), i32.into(), ptr.into()], false)
            }
            ContextSlot::BackendParallelLaunch => {
                i32.fn_type(&[ptr.into(), ptr.into(), i32.into()], false)
            }
            ContextSlot::BackendParallelBarrier => i32.fn_type(&[i32.into(), ptr.into()], false),
        }
    }
}

/// Finds or defines a `linkonce dllexport global ptr null, align 8` named `name`.
fn pointer_variable<'ctx>(
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    name: &str,
) -> GlobalValue<'ctx> {
    if let Some(g) = module.get_global(name) {
        return g;
    }
    let g = module.add_global(abi.ptr, None, name);
    g.set_linkage(Linkage::LinkOnceAny);
    g.set_initializer(&abi.ptr.const_null());
    g.set_alignment(8);
    g.set_dll_storage_class(DLLStorageClass::Export);
    g
}

/// Finds or defines the context slot `slot` in `module`.
pub fn context_slot<'ctx>(
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    slot: ContextSlot,
) -> GlobalValue<'ctx> {
    pointer_variable(module, abi, slot.symbol())
}

/// Finds or defines `__tvm_ffi__library_ctx`, which the loader points at the library's module.
pub fn library_ctx<'ctx>(module: &Module<'ctx>, abi: &FfiAbi<'ctx>) -> GlobalValue<'ctx> {
    pointer_variable(module, abi, LIBRARY_CTX_SYMBOL)
}

/// Loads the function pointer in `slot` and calls it with `args`; returns the call (its value is
/// the service's return value, none for `ErrorSetRaisedFromCStr`).
pub fn build_slot_call<'ctx>(
    b: &Builder<'ctx>,
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    slot: ContextSlot,
    args: &[BasicMetadataValueEnum<'ctx>],
    name: &str,
) -> Result<CallSiteValue<'ctx>> {
    let global = context_slot(module, abi, slot);
    let f = b
        .build_load(abi.ptr, global.as_pointer_value(), slot.symbol())
        .map_err(llvm_error)?
        .into_pointer_value();
    if let Some(inst) = f.as_instruction_value() {
        let _ = inst.set_alignment(8);
    }
    b.build_indirect_call(slot.fn_type(abi), f, args, name)
        .map_err(llvm_error)
}

/// Declares `__tvm_ffi_<name>`, an exported function with the safe-call signature, without a
/// body. Refuses a name already defined in the module.
pub fn declare_safe_call<'ctx>(
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    name: &str,
) -> Result<FunctionValue<'ctx>> {
    let symbol = exported_symbol(name);
    if module.get_function(&symbol).is_some() {
        return Err(Error::value_error(format!(
            "function `{name}` is defined twice in LLVM module `{}`",
            super::module_name(module)
        )));
    }
    let f = module.add_function(&symbol, abi.safe_call, Some(Linkage::External));
    f.as_global_value()
        .set_dll_storage_class(DLLStorageClass::Export);
    let noalias = abi.ctx.create_enum_attribute(
        inkwell::attributes::Attribute::get_named_enum_kind_id("noalias"),
        0,
    );
    for (i, pname) in ["self_handle", "args", "num_args", "result"]
        .into_iter()
        .enumerate()
    {
        let p = f.get_nth_param(i as u32).expect("four parameters");
        p.set_name(pname);
        if i != 2 {
            f.add_attribute(AttributeLoc::Param(i as u32), noalias);
        }
    }
    Ok(f)
}

/// Defines `__tvm_ffi_main` as a weak exported function that tail-calls `target` (a safe-call
/// function); TVM adds it when a library has exactly one function.
pub fn add_main_alias<'ctx>(
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    target: FunctionValue<'ctx>,
) -> Result<FunctionValue<'ctx>> {
    if module.get_function(MAIN_SYMBOL).is_some() {
        return Err(Error::value_error(format!(
            "`{MAIN_SYMBOL}` is already defined in LLVM module `{}`",
            super::module_name(module)
        )));
    }
    let f = module.add_function(MAIN_SYMBOL, abi.safe_call, Some(Linkage::WeakAny));
    f.as_global_value()
        .set_dll_storage_class(DLLStorageClass::Export);
    let b = abi.ctx.create_builder();
    b.position_at_end(abi.ctx.append_basic_block(f, "entry"));
    let args: Vec<BasicMetadataValueEnum> = f.get_param_iter().map(Into::into).collect();
    let call = b.build_call(target, &args, "ret").map_err(llvm_error)?;
    call.set_tail_call(true);
    let ret = call
        .try_as_basic_value()
        .basic()
        .ok_or_else(|| Error::value_error("the target of __tvm_ffi_main must return i32"))?;
    b.build_return(Some(&ret)).map_err(llvm_error)?;
    Ok(f)
}

/// Defines `__tvm_ffi__library_bin` holding `blob` (the runtime's blob writer output: a u64
/// length, then that many bytes). Refuses bytes whose length prefix disagrees.
pub fn add_library_bin<'ctx>(
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    blob: &[u8],
) -> Result<GlobalValue<'ctx>> {
    let declared = blob
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("eight bytes")));
    if declared.is_none() || declared != (blob.len() as u64).checked_sub(8) {
        return Err(Error::value_error(format!(
            "a library blob must start with its length after the first 8 bytes: got {} bytes \
             declaring {declared:?}",
            blob.len()
        )));
    }
    let value = abi.ctx.const_string(blob, false);
    let g = module.add_global(value.get_type(), None, LIBRARY_BIN_SYMBOL);
    g.set_linkage(Linkage::External);
    g.set_constant(true);
    g.set_initializer(&value);
    g.set_alignment(1);
    g.set_dll_storage_class(DLLStorageClass::Export);
    Ok(g)
}

/// Finds or declares `void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char**
/// parts, int32_t n)`.
pub fn set_raised_from_cstr_parts<'ctx>(
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
) -> FunctionValue<'ctx> {
    module
        .get_function(SET_RAISED_FROM_CSTR_PARTS)
        .unwrap_or_else(|| {
            let ty = abi
                .ctx
                .void_type()
                .fn_type(&[abi.ptr.into(), abi.ptr.into(), abi.i32.into()], false);
            module.add_function(SET_RAISED_FROM_CSTR_PARTS, ty, Some(Linkage::External))
        })
}

/// Raises an error of `kind` (`TypeError`, `ValueError`, ...) whose message is the
/// concatenation of `parts` (C strings), through `TVMFFIErrorSetRaisedFromCStrParts`. The caller
/// then returns -1.
pub fn build_set_raised<'ctx>(
    b: &Builder<'ctx>,
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    kind: &str,
    parts: &[PointerValue<'ctx>],
) -> Result<()> {
    let kind = b
        .build_global_string_ptr(kind, "err.kind")
        .map_err(llvm_error)?;
    let array_ty = abi.ptr.array_type(parts.len().max(1) as u32);
    let array = b.build_alloca(array_ty, "err.parts").map_err(llvm_error)?;
    for (i, part) in parts.iter().enumerate() {
        // SAFETY: (inbounds is a promise to LLVM) index i of an array of parts.len() pointers.
        let slot = unsafe {
            b.build_in_bounds_gep(
                array_ty,
                array,
                &[abi.i32.const_zero(), abi.i32.const_int(i as u64, false)],
                "err.part",
            )
        }
        .map_err(llvm_error)?;
        b.build_store(slot, *part).map_err(llvm_error)?;
    }
    let f = set_raised_from_cstr_parts(module, abi);
    let n = abi.i32.const_int(parts.len() as u64, false);
    b.build_call(
        f,
        &[kind.as_pointer_value().into(), array.into(), n.into()],
        "",
    )
    .map_err(llvm_error)?;
    Ok(())
}

/// Finds or defines what calling the global function `name` by name needs: the internal handle
/// variable `.tvm_func.<name>` and its initializer `__tvm_func_handle_init.<name>`, which looks
/// the function up through `__TVMFFIEnvModLookupFromImports` with `__tvm_ffi__library_ctx`.
pub fn function_handle<'ctx>(
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    name: &str,
) -> Result<(GlobalValue<'ctx>, FunctionValue<'ctx>)> {
    let handle_name = format!(".tvm_func.{name}");
    let init_name = format!("__tvm_func_handle_init.{name}");
    if let (Some(h), Some(f)) = (
        module.get_global(&handle_name),
        module.get_function(&init_name),
    ) {
        return Ok((h, f));
    }
    let handle = module.add_global(abi.ptr, None, &handle_name);
    handle.set_linkage(Linkage::Internal);
    handle.set_initializer(&abi.ptr.const_null());
    handle.set_alignment(8);
    let init = module.add_function(&init_name, abi.handle_init, Some(Linkage::Internal));
    let b = abi.ctx.create_builder();
    b.position_at_end(abi.ctx.append_basic_block(init, "entry"));
    let ctx_var = library_ctx(module, abi);
    let ctx = b
        .build_load(abi.ptr, ctx_var.as_pointer_value(), "library_ctx")
        .map_err(llvm_error)?;
    let fname = b
        .build_global_string_ptr(name, "func.name")
        .map_err(llvm_error)?;
    let out = init.get_nth_param(0).expect("one parameter");
    let status = build_slot_call(
        &b,
        module,
        abi,
        ContextSlot::EnvModLookupFromImports,
        &[ctx.into(), fname.as_pointer_value().into(), out.into()],
        "status",
    )?
    .try_as_basic_value()
    .basic()
    .expect("lookup returns i32");
    b.build_return(Some(&status)).map_err(llvm_error)?;
    Ok((handle, init))
}

/// Emits `TVMFFIHandleInitOnce(&.tvm_func.<name>, init)` for the global function `name` and
/// returns its status (0 on success) and the handle variable. Branch on the status (nonzero:
/// the error is already raised, return -1), then load the handle and call it through
/// [`ContextSlot::FunctionCall`].
pub fn build_function_handle<'ctx>(
    b: &Builder<'ctx>,
    module: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
    name: &str,
) -> Result<(IntValue<'ctx>, GlobalValue<'ctx>)> {
    let (handle, init) = function_handle(module, abi, name)?;
    let status = build_slot_call(
        b,
        module,
        abi,
        ContextSlot::HandleInitOnce,
        &[
            handle.as_pointer_value().into(),
            init.as_global_value().as_pointer_value().into(),
        ],
        "init.status",
    )?
    .try_as_basic_value()
    .basic()
    .expect("init once returns i32")
    .into_int_value();
    Ok((status, handle))
}

/// Adds a target record (`kiln_runtime::module::target_record`) to `module`: a private constant
/// in the `.kiln_target` section, kept through optimization by `llvm.used`. The linker
/// concatenates the records of every object of a library.
pub fn add_target_record<'ctx>(module: &Module<'ctx>, abi: &FfiAbi<'ctx>, record: &[u8]) {
    let value = abi.ctx.const_string(record, false);
    let g = module.add_global(value.get_type(), None, "__kiln_target_record");
    g.set_linkage(Linkage::Private);
    g.set_constant(true);
    g.set_initializer(&value);
    g.set_alignment(1);
    g.set_section(Some(TARGET_RECORD_SECTION));
    let used_ty = abi.ptr.array_type(1);
    let used = module.add_global(used_ty, None, "llvm.used");
    used.set_linkage(Linkage::Appending);
    used.set_section(Some("llvm.metadata"));
    used.set_initializer(&abi.ptr.const_array(&[g.as_pointer_value()]));
}

/// Renames the functions `module` exports (`__tvm_ffi_<name>`, `__tvm_ffi_main` included) to
/// those of the code variant tagged `tag` (`__kiln_variant_<tag>_<name>`); an empty tag (the
/// default variant) leaves them.
pub fn rename_for_variant(module: &Module<'_>, tag: &str) {
    if tag.is_empty() {
        return;
    }
    let prefix = variant_symbol_prefix(tag);
    for f in module.get_functions() {
        if f.count_basic_blocks() == 0 {
            continue;
        }
        let name = f.get_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix(SYMBOL_PREFIX) {
            f.as_global_value().set_name(&format!("{prefix}{rest}"));
        }
    }
}
