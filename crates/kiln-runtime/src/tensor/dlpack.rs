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

/// A managed tensor imported from DLPack; its deleter runs on drop.
pub(crate) enum Owner {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

impl Drop for Owner {
    fn drop(&mut self) {
        // SAFETY: the import took ownership of the managed tensor; its deleter runs once.
        unsafe {
            match *self {
                Owner::Legacy(p) => {
                    if let Some(d) = (*p).deleter {
                        d(p)
                    }
                }
                Owner::Versioned(p) => {
                    if let Some(d) = (*p).deleter {
                        d(p)
                    }
                }
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
    layout::validate(dl, "from_dlpack")?;
    if alignment > 1 && !is_aligned(dl, alignment) {
        return Err(Error::value_error(format!(
            "from_dlpack: the data at {:p} + byte_offset {} is not aligned to {alignment} bytes",
            dl.data, dl.byte_offset
        )));
    }
    if contiguous {
        let (shape, strides) = dims(dl);
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
unsafe fn own_export(manager_ctx: *mut c_void) -> Tensor {
    Tensor(ObjectRef::from_borrowed(NonNull::new_unchecked(
        manager_ctx as *mut ObjectHeader,
    )))
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
        let m = managed
            .as_ref()
            .ok_or_else(|| Error::value_error("from_dlpack: the DLManagedTensor is NULL"))?;
        check_import(&m.dl_tensor, require_alignment, require_contiguous)?;
        if m.deleter.map(|d| d as usize) == Some(export_deleter as *const () as usize) {
            let t = own_export(m.manager_ctx);
            export_deleter(managed);
            return Ok(t);
        }
        let (shape, strides) = dims(&m.dl_tensor);
        Ok(Tensor::assemble(
            &m.dl_tensor,
            shape,
            strides,
            Storage::DLPack(Owner::Legacy(managed)),
        ))
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
        let m = managed.as_ref().ok_or_else(|| {
            Error::value_error("from_dlpack: the DLManagedTensorVersioned is NULL")
        })?;
        if m.version.major != DLPACK_VERSION.major {
            return Err(Error::value_error(format!(
                "from_dlpack: DLPack version {}.{} is not supported (Kiln reads {}.x)",
                m.version.major, m.version.minor, DLPACK_VERSION.major
            )));
        }
        check_import(&m.dl_tensor, require_alignment, require_contiguous)?;
        if m.deleter.map(|d| d as usize) == Some(export_versioned_deleter as *const () as usize) {
            let t = own_export(m.manager_ctx);
            export_versioned_deleter(managed);
            return Ok(t);
        }
        let (shape, strides) = dims(&m.dl_tensor);
        Ok(Tensor::assemble(
            &m.dl_tensor,
            shape,
            strides,
            Storage::DLPack(Owner::Versioned(managed)),
        ))
    }

    /// Exports the tensor as a legacy DLPack tensor sharing its memory; the export holds a
    /// reference to the tensor until its deleter runs.
    pub fn to_dlpack(&self) -> *mut DLManagedTensor {
        Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: *self.dl_tensor(),
            manager_ctx: self.0.clone().into_raw().as_ptr() as *mut c_void,
            deleter: Some(export_deleter),
        }))
    }

    /// Exports the tensor as a versioned (DLPack 1.x) tensor sharing its memory, flags 0.
    pub fn to_dlpack_versioned(&self) -> *mut DLManagedTensorVersioned {
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: self.0.clone().into_raw().as_ptr() as *mut c_void,
            deleter: Some(export_versioned_deleter),
            flags: 0,
            dl_tensor: *self.dl_tensor(),
        }))
    }

    /// A tensor with `prototype`'s metadata (shape, strides, dtype, data, byte offset) that
    /// keeps `source` alive (TVM-FFI's `TVMFFITensorCreateUnsafeView`).
    ///
    /// # Safety
    /// `prototype.data` must point into memory owned by `source`, and the metadata must stay
    /// inside it.
    pub unsafe fn unsafe_view(source: &Tensor, prototype: &DLTensor) -> Result<Tensor> {
        layout::validate(prototype, "TVMFFITensorCreateUnsafeView prototype")?;
        let (shape, strides) = dims(prototype);
        Ok(Tensor::assemble(
            prototype,
            shape,
            strides,
            Storage::Parent(source.0.clone()),
        ))
    }
}

unsafe extern "C" fn export_deleter(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    let m = Box::from_raw(managed);
    if let Some(obj) = NonNull::new(m.manager_ctx as *mut ObjectHeader) {
        kiln_ffi::error::ffi_guard_void(|| drop(ObjectRef::<TensorObj>::from_raw(obj)));
    }
}

unsafe extern "C" fn export_versioned_deleter(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    let m = Box::from_raw(managed);
    if let Some(obj) = NonNull::new(m.manager_ctx as *mut ObjectHeader) {
        kiln_ffi::error::ffi_guard_void(|| drop(ObjectRef::<TensorObj>::from_raw(obj)));
    }
}

/// Reads a tensor object handle from C (checked: not NULL, type index 70).
unsafe fn tensor_arg(handle: *mut c_void, name: &str) -> Result<Tensor> {
    let obj = NonNull::new(handle as *mut ObjectHeader)
        .ok_or_else(|| Error::value_error(format!("argument `{name}` is NULL")))?;
    let index = (*obj.as_ptr()).type_index;
    if index != type_index::TENSOR {
        return Err(Error::type_error(format!(
            "argument `{name}` is a `{}`, not an `ffi.Tensor`",
            kiln_ffi::any::type_name_of_index(index)
        )));
    }
    Ok(Tensor(ObjectRef::from_borrowed(obj)))
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

/// Imports a legacy DLPack tensor as an `ffi.Tensor` (zero-copy); on failure the caller keeps
/// ownership of `from`.
///
/// # Safety
/// `from` must be NULL or a managed tensor the caller owns; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorFromDLPack(
    from: *mut DLManagedTensor,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        let out = out_arg(out)?;
        let align = alignment_arg(require_alignment)?;
        let t = Tensor::from_dlpack(from, align, require_contiguous != 0)?;
        *out = t.0.into_raw().as_ptr() as *mut c_void;
        Ok(())
    })
}

/// Imports a versioned DLPack tensor as an `ffi.Tensor` (zero-copy); on failure the caller
/// keeps ownership of `from`.
///
/// # Safety
/// `from` must be NULL or a managed tensor the caller owns; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorFromDLPackVersioned(
    from: *mut DLManagedTensorVersioned,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        let out = out_arg(out)?;
        let align = alignment_arg(require_alignment)?;
        let t = Tensor::from_dlpack_versioned(from, align, require_contiguous != 0)?;
        *out = t.0.into_raw().as_ptr() as *mut c_void;
        Ok(())
    })
}

/// Exports an `ffi.Tensor` (any runtime's) as a legacy DLPack tensor sharing its memory.
///
/// # Safety
/// `from` must be NULL or a live object; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorToDLPack(
    from: *mut c_void,
    out: *mut *mut DLManagedTensor,
) -> c_int {
    ffi_guard(|| {
        let out = out_arg(out)?;
        *out = tensor_arg(from, "from")?.to_dlpack();
        Ok(())
    })
}

/// Exports an `ffi.Tensor` (any runtime's) as a versioned DLPack tensor sharing its memory.
///
/// # Safety
/// `from` must be NULL or a live object; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorToDLPackVersioned(
    from: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    ffi_guard(|| {
        let out = out_arg(out)?;
        *out = tensor_arg(from, "from")?.to_dlpack_versioned();
        Ok(())
    })
}

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
        let source = tensor_arg(source, "source")?;
        let proto = prototype
            .as_ref()
            .ok_or_else(|| Error::value_error("argument `prototype` is NULL"))?;
        *out = Tensor::unsafe_view(&source, proto)?.0.into_raw().as_ptr() as *mut c_void;
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
