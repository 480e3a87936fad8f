//! DLPack import and export, zero-copy, for the legacy `DLManagedTensor` and the versioned
//! `DLManagedTensorVersioned` (DLPack 1.x), and the TVM-FFI C functions built on them:
//! `TVMFFITensorFromDLPack[Versioned]`, `TVMFFITensorToDLPack[Versioned]`,
//! `TVMFFITensorCreateUnsafeView`.
//!
//! Ownership follows TVM-FFI: an import that succeeds owns the managed tensor (its deleter runs
//! when the Kiln tensor is freed); an import that fails leaves it with the caller. An export
//! holds one reference to the tensor until the consumer calls the deleter.

use super::layout::{self, dims, is_contiguous};
use super::{Storage, Tensor, TensorObj};
use crate::device::is_host;
use kiln_ffi::abi::{type_index, DLTensor, ObjectHeader};
use kiln_ffi::error::ffi_guard;
use kiln_ffi::object::ObjectRef;
use kiln_ffi::{Device, Error, Result};
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

/// `DLManagedTensor` (legacy DLPack, before 1.0).
#[repr(C)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Releases the tensor (and frees this struct); may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version: a consumer must reject a major version it does not know.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLManagedTensorVersioned` (DLPack 1.x).
#[repr(C)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version the producer filled the struct for.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Releases the tensor (and frees this struct); may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// The DLPack version Kiln writes into the tensors it exports (that of TVM-FFI 0.1.16).
pub const DLPACK_VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 3 };
/// Flag: the consumer must not write the data.
pub const FLAG_READ_ONLY: u64 = 1;
/// Flag: the producer made a copy that the consumer owns alone.
pub const FLAG_IS_COPIED: u64 = 2;
/// Flag: sub-byte elements are padded to a byte each.
pub const FLAG_IS_SUBBYTE_TYPE_PADDED: u64 = 4;

/// What import and export need of a DLPack managed tensor, legacy or versioned: the one
/// implementation of both is generic over it.
trait Managed: Sized {
    /// The C struct's name, for messages.
    const NAME: &'static str;
    /// The tensor.
    fn dl_tensor(&self) -> &DLTensor;
    /// The producer's context.
    fn manager_ctx(&self) -> *mut c_void;
    /// The producer's deleter.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
    /// Checks what the struct says of itself before its tensor is read.
    fn check_header(&self) -> Result<()> {
        Ok(())
    }
    /// The struct Kiln exports: `dl_tensor` shared, `manager_ctx` a tensor reference that
    /// `deleter` releases.
    fn export(
        dl_tensor: DLTensor,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self;
    /// The owner of an imported struct.
    fn owner(managed: *mut Self) -> Owner;
}

/// The accessors of [`Managed`] over the fields both structs name alike.
macro_rules! managed_fields {
    () => {
        fn dl_tensor(&self) -> &DLTensor {
            &self.dl_tensor
        }
        fn manager_ctx(&self) -> *mut c_void {
            self.manager_ctx
        }
        fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
            self.deleter
        }
    };
}

impl Managed for DLManagedTensor {
    const NAME: &'static str = "DLManagedTensor";
    managed_fields!();
    fn export(
        dl_tensor: DLTensor,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self {
        DLManagedTensor {
            dl_tensor,
            manager_ctx,
            deleter: Some(deleter),
        }
    }
    fn owner(managed: *mut Self) -> Owner {
        Owner::Legacy(managed)
    }
}

impl Managed for DLManagedTensorVersioned {
    const NAME: &'static str = "DLManagedTensorVersioned";
    managed_fields!();
    /// A major version other than Kiln's is an error.
    fn check_header(&self) -> Result<()> {
        if self.version.major != DLPACK_VERSION.major {
            return Err(Error::value_error(format!(
                "from_dlpack: DLPack version {}.{} is not supported (Kiln reads {}.x)",
                self.version.major, self.version.minor, DLPACK_VERSION.major
            )));
        }
        Ok(())
    }
    /// Version [`DLPACK_VERSION`], flags 0.
    fn export(
        dl_tensor: DLTensor,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self {
        DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx,
            deleter: Some(deleter),
            flags: 0,
            dl_tensor,
        }
    }
    fn owner(managed: *mut Self) -> Owner {
        Owner::Versioned(managed)
    }
}

/// A managed tensor imported from DLPack; its deleter runs on drop.
pub(crate) enum Owner {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

/// Runs the deleter of `managed`, if it has one.
///
/// # Safety
/// `managed` must be a valid managed tensor that the caller owns; it is released.
unsafe fn release<M: Managed>(managed: *mut M) {
    // SAFETY: the caller passes a valid managed tensor it owns.
    if let Some(d) = unsafe { (*managed).deleter() } {
        // SAFETY: the producer's deleter, called once on the struct it was given with.
        unsafe { d(managed) }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // SAFETY: the import took ownership of the managed tensor; its deleter runs once.
        unsafe {
            match *self {
                Owner::Legacy(p) => release(p),
                Owner::Versioned(p) => release(p),
            }
        }
    }
}

/// TVM-FFI's `IsAligned`: host memory checks the first element's address, device handles
/// check the byte offset.
pub fn is_aligned(t: &DLTensor, alignment: usize) -> bool {
    if alignment <= 1 {
        return true;
    }
    if is_host(Device(t.device)) {
        (t.data as usize)
            .wrapping_add(t.byte_offset as usize)
            .is_multiple_of(alignment)
    } else {
        t.byte_offset.is_multiple_of(alignment as u64)
    }
}

/// Checks an incoming DLTensor and the caller's requirements.
///
/// # Safety
/// `dl` must be a DLTensor whose shape and strides are readable.
unsafe fn check_import(dl: &DLTensor, alignment: usize, contiguous: bool) -> Result<()> {
    // SAFETY: the caller passes a DLTensor whose shape and strides are readable.
    unsafe { layout::validate(dl, "from_dlpack") }?;
    if alignment > 1 && !is_aligned(dl, alignment) {
        return Err(Error::value_error(format!(
            "from_dlpack: the data at {:p} + byte_offset {} is not aligned to {alignment} bytes",
            dl.data, dl.byte_offset
        )));
    }
    if contiguous {
        // SAFETY: as for `validate`.
        let (shape, strides) = unsafe { dims(dl) };
        if !is_contiguous(shape, strides) {
            return Err(Error::value_error(format!(
                "from_dlpack: the tensor of shape {shape:?} with strides {:?} is not contiguous",
                strides.unwrap_or(&[])
            )));
        }
    }
    Ok(())
}

/// The tensor object behind one of Kiln's own exports (so a round trip gives back the tensor).
/// Exports are recognised by their deleter's address: a miss only costs a wrapper object, and
/// another function at the same address would have to be an identical deleter.
///
/// # Safety
/// `manager_ctx` must be the context of a live export of Kiln's (a tensor object reference).
unsafe fn own_export(manager_ctx: *mut c_void) -> Tensor {
    // SAFETY: an export's context is the non-NULL header of the tensor it holds a reference to.
    let obj = unsafe { NonNull::new_unchecked(manager_ctx as *mut ObjectHeader) };
    // SAFETY: the export's reference keeps the object alive while this one is taken.
    Tensor(unsafe { ObjectRef::from_borrowed(obj) })
}

/// Imports `managed` without copying; see [`Tensor::from_dlpack`].
///
/// # Safety
/// `managed` must be NULL or a valid managed tensor that the caller owns.
unsafe fn import<M: Managed>(
    managed: *mut M,
    require_alignment: usize,
    require_contiguous: bool,
) -> Result<Tensor> {
    // SAFETY: the caller passes NULL or a valid managed tensor.
    let m = unsafe { managed.as_ref() }
        .ok_or_else(|| Error::value_error(format!("from_dlpack: the {} is NULL", M::NAME)))?;
    m.check_header()?;
    // SAFETY: a valid managed tensor's shape and strides are readable.
    unsafe { check_import(m.dl_tensor(), require_alignment, require_contiguous) }?;
    let own_deleter: unsafe extern "C" fn(*mut M) = export_deleter::<M>;
    if m.deleter().map(|d| d as usize) == Some(own_deleter as usize) {
        // SAFETY: one of Kiln's exports, whose context is a tensor reference; the deleter then
        // drops the export's own reference and frees the struct, which the caller gave up.
        unsafe {
            let t = own_export(m.manager_ctx());
            export_deleter(managed);
            return Ok(t);
        }
    }
    // SAFETY: as for `check_import`.
    let (shape, strides) = unsafe { dims(m.dl_tensor()) };
    Ok(Tensor::assemble(
        m.dl_tensor(),
        shape,
        strides,
        Storage::DLPack(M::owner(managed)),
    ))
}

/// Exports `t` as a managed tensor of type `M` sharing its memory; the export holds a
/// reference to the tensor until its deleter runs.
fn export<M: Managed>(t: &Tensor) -> *mut M {
    Box::into_raw(Box::new(M::export(
        *t.dl_tensor(),
        t.0.clone().into_raw().as_ptr() as *mut c_void,
        export_deleter::<M>,
    )))
}

/// The deleter of Kiln's exports: drops the tensor reference and frees the struct.
///
/// # Safety
/// `managed` must be NULL or a struct made by [`export`] and not yet deleted.
unsafe extern "C" fn export_deleter<M: Managed>(managed: *mut M) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `export` made the struct with `Box::new`; it is freed once, here.
    let m = unsafe { Box::from_raw(managed) };
    if let Some(obj) = NonNull::new(m.manager_ctx() as *mut ObjectHeader) {
        // SAFETY: the context is the reference `export` took; it is given back once.
        kiln_ffi::error::ffi_guard_void(|| drop(unsafe { ObjectRef::<TensorObj>::from_raw(obj) }));
    }
}

impl Tensor {
    /// Imports a legacy DLPack tensor without copying. On success the tensor owns `managed`;
    /// on error the caller still does. `require_alignment` (0: none) and `require_contiguous`
    /// are checked as in TVM-FFI.
    ///
    /// # Safety
    /// `managed` must be NULL or a valid managed tensor that the caller owns.
    pub unsafe fn from_dlpack(
        managed: *mut DLManagedTensor,
        require_alignment: usize,
        require_contiguous: bool,
    ) -> Result<Tensor> {
        // SAFETY: as this function's contract.
        unsafe { import(managed, require_alignment, require_contiguous) }
    }

    /// Imports a versioned (DLPack 1.x) tensor without copying; ownership as in
    /// [`Tensor::from_dlpack`]. A major version other than 1 is an error.
    ///
    /// # Safety
    /// `managed` must be NULL or a valid managed tensor that the caller owns.
    pub unsafe fn from_dlpack_versioned(
        managed: *mut DLManagedTensorVersioned,
        require_alignment: usize,
        require_contiguous: bool,
    ) -> Result<Tensor> {
        // SAFETY: as this function's contract.
        unsafe { import(managed, require_alignment, require_contiguous) }
    }

    /// Exports the tensor as a legacy DLPack tensor sharing its memory; the export holds a
    /// reference to the tensor until its deleter runs.
    pub fn to_dlpack(&self) -> *mut DLManagedTensor {
        export(self)
    }

    /// Exports the tensor as a versioned (DLPack 1.x) tensor sharing its memory, flags 0.
    pub fn to_dlpack_versioned(&self) -> *mut DLManagedTensorVersioned {
        export(self)
    }

    /// A tensor with `prototype`'s metadata (shape, strides, dtype, data, byte offset) that
    /// keeps `source` alive (TVM-FFI's `TVMFFITensorCreateUnsafeView`).
    ///
    /// # Safety
    /// `prototype.data` must point into memory owned by `source`, and the metadata must stay
    /// inside it.
    pub unsafe fn unsafe_view(source: &Tensor, prototype: &DLTensor) -> Result<Tensor> {
        // SAFETY: the caller's prototype is a valid DLTensor (this function's contract).
        unsafe { layout::validate(prototype, "TVMFFITensorCreateUnsafeView prototype") }?;
        // SAFETY: as for `validate`; the slices are copied before this returns.
        let (shape, strides) = unsafe { dims(prototype) };
        Ok(Tensor::assemble(
            prototype,
            shape,
            strides,
            Storage::Parent(source.0.clone()),
        ))
    }
}

/// Reads a tensor object handle from C (checked: not NULL, type index 70).
///
/// # Safety
/// `handle` must be NULL or a live object.
unsafe fn tensor_arg(handle: *mut c_void, name: &str) -> Result<Tensor> {
    let obj = NonNull::new(handle as *mut ObjectHeader)
        .ok_or_else(|| Error::value_error(format!("argument `{name}` is NULL")))?;
    // SAFETY: a live object starts with its header.
    let index = unsafe { (*obj.as_ptr()).type_index };
    if index != type_index::TENSOR {
        return Err(Error::type_error(format!(
            "argument `{name}` is a `{}`, not an `ffi.Tensor`",
            kiln_ffi::any::type_name_of_index(index)
        )));
    }
    // SAFETY: a live tensor object; the new reference is the caller's.
    Ok(Tensor(unsafe { ObjectRef::from_borrowed(obj) }))
}

fn out_arg<'a, T>(out: *mut T) -> Result<&'a mut T> {
    // SAFETY: the caller passes NULL or a writable slot.
    unsafe { out.as_mut() }.ok_or_else(|| Error::value_error("argument `out` is NULL"))
}

fn alignment_arg(require_alignment: i32) -> Result<usize> {
    usize::try_from(require_alignment).map_err(|_| {
        Error::value_error(format!("require_alignment {require_alignment} is negative"))
    })
}

/// The C import: `from` imported into `*out`; see [`import`].
///
/// # Safety
/// `from` must be NULL or a managed tensor the caller owns; `out` NULL or writable.
unsafe fn import_c<M: Managed>(
    from: *mut M,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        let out = out_arg(out)?;
        let align = alignment_arg(require_alignment)?;
        // SAFETY: the caller passes NULL or a managed tensor it owns.
        let t = unsafe { import(from, align, require_contiguous != 0) }?;
        *out = t.0.into_raw().as_ptr() as *mut c_void;
        Ok(())
    })
}

/// The C export: the tensor `from` exported into `*out`; see [`export`].
///
/// # Safety
/// `from` must be NULL or a live object; `out` NULL or writable.
unsafe fn export_c<M: Managed>(from: *mut c_void, out: *mut *mut M) -> c_int {
    ffi_guard(|| {
        let out = out_arg(out)?;
        // SAFETY: the caller passes NULL or a live object.
        *out = export(&unsafe { tensor_arg(from, "from") }?);
        Ok(())
    })
}

/// Writes the C entry points that import and export one DLPack struct (`$managed`, named
/// `$variant` in their docs): both are thin calls of the generic [`import_c`] / [`export_c`].
macro_rules! dlpack_c_entry_points {
    ($variant:literal, $managed:ty, $from:ident, $to:ident) => {
        #[doc = concat!("Imports a ", $variant, " DLPack tensor as an `ffi.Tensor` (zero-copy); on")]
        /// failure the caller keeps ownership of `from`.
        ///
        /// # Safety
        /// `from` must be NULL or a managed tensor the caller owns; `out` NULL or writable.
        #[no_mangle]
        pub unsafe extern "C" fn $from(
            from: *mut $managed,
            require_alignment: i32,
            require_contiguous: i32,
            out: *mut *mut c_void,
        ) -> c_int {
            // SAFETY: as this function's contract.
            unsafe { import_c(from, require_alignment, require_contiguous, out) }
        }

        #[doc = concat!("Exports an `ffi.Tensor` (any runtime's) as a ", $variant, " DLPack tensor")]
        /// sharing its memory.
        ///
        /// # Safety
        /// `from` must be NULL or a live object; `out` NULL or writable.
        #[no_mangle]
        pub unsafe extern "C" fn $to(from: *mut c_void, out: *mut *mut $managed) -> c_int {
            // SAFETY: as this function's contract.
            unsafe { export_c(from, out) }
        }
    };
}

dlpack_c_entry_points!(
    "legacy",
    DLManagedTensor,
    TVMFFITensorFromDLPack,
    TVMFFITensorToDLPack
);
dlpack_c_entry_points!(
    "versioned",
    DLManagedTensorVersioned,
    TVMFFITensorFromDLPackVersioned,
    TVMFFITensorToDLPackVersioned
);

/// Makes a tensor with `prototype`'s metadata that keeps `source` alive (shape and strides are
/// copied; NULL strides mean compact).
///
/// # Safety
/// As [`Tensor::unsafe_view`]; `source` must be NULL or a live object, `prototype` NULL or a
/// valid DLTensor, `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorCreateUnsafeView(
    source: *mut c_void,
    prototype: *const DLTensor,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        let out = out_arg(out)?;
        // SAFETY: the caller passes NULL or a live object.
        let source = unsafe { tensor_arg(source, "source") }?;
        // SAFETY: the caller passes NULL or a valid DLTensor.
        let proto = unsafe { prototype.as_ref() }
            .ok_or_else(|| Error::value_error("argument `prototype` is NULL"))?;
        // SAFETY: as this function's contract (that of `unsafe_view`).
        let view = unsafe { Tensor::unsafe_view(&source, proto) }?;
        *out = view.0.into_raw().as_ptr() as *mut c_void;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_dlpack() {
        assert_eq!(size_of::<DLManagedTensor>(), 64);
        assert_eq!(offset_of!(DLManagedTensor, manager_ctx), 48);
        assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(offset_of!(DLManagedTensorVersioned, manager_ctx), 8);
        assert_eq!(offset_of!(DLManagedTensorVersioned, deleter), 16);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    }
}
