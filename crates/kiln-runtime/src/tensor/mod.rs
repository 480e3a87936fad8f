//! Tensors: the TVM-FFI `ffi.Tensor` object (type index 70) and Kiln's [`Tensor`] handle.
//!
//! The object is the 24-byte header immediately followed by a `DLTensor`, which is all that
//! other runtimes (and generated code) read: `object + 24` is the `DLTensor`. Kiln's tensors add
//! their own fields after it: the shape and strides storage the `DLTensor` points into, and what
//! owns the data (its private `Storage`): a device allocation, a DLPack producer to call back, a parent
//! tensor for views, or nothing for a borrowed `DLTensor*`.
//!
//! Kiln always fills `strides` (compact strides for the tensors it allocates), as TVM-FFI does.
//! Every size computation is checked: a shape whose byte size overflows is a `ValueError`.

pub mod dlpack;
pub mod element;
mod globals;
pub mod layout;

use crate::device::{self, device_api, device_label, ALLOC_ALIGNMENT};
pub use element::Element;
use kiln_ffi::abi::{type_index, DLTensor};
use kiln_ffi::any::{AnyView, TryFromAny};
use kiln_ffi::object::{ObjectRef, ObjectType};
use kiln_ffi::{DataType, Device, Error, Result};
use layout::{checked_nbytes, checked_numel, compact_strides, dims, is_contiguous, MAX_NDIM};
use std::ffi::c_void;
use std::fmt;

/// The ABI-visible part of a tensor object: the `DLTensor` right after the header. Tensors
/// made by other runtimes are reached through this type too.
#[repr(C)]
pub struct TensorObj {
    /// The tensor's description (data, device, ndim, dtype, shape, strides, byte_offset).
    pub dl_tensor: DLTensor,
}

// SAFETY: the DLTensor describes memory; sharing the description between threads is what the
// ABI does (data races on the memory itself are the users' business, as in C).
unsafe impl Send for TensorObj {}
// SAFETY: as for Send.
unsafe impl Sync for TensorObj {}

// SAFETY: the layout is the ABI's (the DLTensor right after the header) for type index 70.
unsafe impl ObjectType for TensorObj {
    const TYPE_KEY: &'static str = "ffi.Tensor";
    fn type_index() -> i32 {
        type_index::TENSOR
    }
}

/// What keeps a tensor's data alive, and how to let it go. The payloads are held for their
/// `Drop` only.
#[allow(dead_code)]
pub(crate) enum Storage {
    /// Memory from the device API of `device`; freed with it.
    Device { device: Device, data: *mut c_void },
    /// Memory of a DLPack producer; its deleter runs when the tensor goes.
    DLPack(dlpack::Owner),
    /// A view: the parent tensor owns the data.
    Parent(ObjectRef<TensorObj>),
    /// A view of a `DLTensor*` that someone else owns for as long as the view is used.
    Borrowed,
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Storage::Device { device, data } = *self {
            if let Ok(api) = device_api(device) {
                // SAFETY: the data came from this API's alloc_data_space and is freed once.
                let _ = unsafe { api.free_data_space(device, data) };
            }
        }
    }
}

/// Kiln's tensor object: the ABI cell, then the storage the cell points into.
#[repr(C)]
struct OwnedTensor {
    cell: TensorObj,
    /// Shape then strides (`2 * ndim` values), from a leaked `Box<[i64]>`.
    dims: *mut [i64],
    storage: Storage,
}

// SAFETY: as for TensorObj; the storage is only touched when the object is freed.
unsafe impl Send for OwnedTensor {}
// SAFETY: as for Send.
unsafe impl Sync for OwnedTensor {}

// SAFETY: starts with the TensorObj cell; objects are tagged with the tensor type index.
unsafe impl ObjectType for OwnedTensor {
    const TYPE_KEY: &'static str = "ffi.Tensor";
    fn type_index() -> i32 {
        type_index::TENSOR
    }
}

impl Drop for OwnedTensor {
    fn drop(&mut self) {
        // SAFETY: `dims` came from Box::into_raw in `Tensor::assemble` and is freed once.
        drop(unsafe { Box::from_raw(self.dims) });
    }
}

/// A tensor: a reference to an `ffi.Tensor` object (Kiln's or another runtime's).
///
/// Cloning shares the object. Methods that write data take `&self`, as the memory is shared
/// with whoever else holds the tensor (compiled code, DLPack consumers), as in TVM.
#[derive(Clone, kiln_ffi::ObjectRef)]
#[object_ref(try_from_view = Tensor::from_view)]
pub struct Tensor(pub ObjectRef<TensorObj>);

impl Tensor {
    /// Builds a Kiln tensor object whose `DLTensor` holds `proto`'s data, device, dtype and
    /// byte offset and a copy of `shape` and `strides` (compact when None).
    pub(crate) fn assemble(
        proto: &DLTensor,
        shape: &[i64],
        strides: Option<&[i64]>,
        storage: Storage,
    ) -> Tensor {
        let ndim = shape.len();
        let mut all = Vec::with_capacity(2 * ndim);
        all.extend_from_slice(shape);
        match strides {
            Some(s) => all.extend_from_slice(s),
            None => all.extend(compact_strides(shape)),
        }
        let dims: *mut [i64] = Box::into_raw(all.into_boxed_slice());
        let base = dims as *mut i64;
        let cell = TensorObj {
            dl_tensor: DLTensor {
                data: proto.data,
                device: proto.device,
                ndim: ndim as i32,
                dtype: proto.dtype,
                shape: base,
                // SAFETY: the buffer holds 2 * ndim values.
                strides: unsafe { base.add(ndim) },
                byte_offset: proto.byte_offset,
            },
        };
        let obj = ObjectRef::new(OwnedTensor {
            cell,
            dims,
            storage,
        });
        // SAFETY: an OwnedTensor starts with the TensorObj cell.
        Tensor(unsafe { ObjectRef::from_raw(obj.into_raw()) })
    }

    /// Allocates an uninitialized, compact tensor on `device` through its device API, aligned
    /// to 64 bytes.
    pub fn empty(shape: &[i64], dtype: DataType, device: Device) -> Result<Tensor> {
        let what = || format!("cannot allocate a tensor of shape {shape:?} and dtype `{dtype}`");
        if shape.len() > MAX_NDIM {
            return Err(Error::value_error(format!(
                "{}: more than {MAX_NDIM} dimensions",
                what()
            )));
        }
        let numel = checked_numel(shape).map_err(|e| e.context(what()))?;
        let nbytes = checked_nbytes(numel, dtype).map_err(|e| e.context(what()))?;
        let api = device_api(device)?;
        let data = api
            .alloc_data_space(device, nbytes, ALLOC_ALIGNMENT, dtype)
            .map_err(|e| e.context(what()))?;
        let proto = DLTensor {
            data,
            device: device.0,
            ndim: 0,
            dtype: dtype.0,
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        Ok(Self::assemble(
            &proto,
            shape,
            None,
            Storage::Device { device, data },
        ))
    }

    /// A new CPU tensor of `shape` holding a copy of `data`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        let numel = checked_numel(shape)?;
        if numel != data.len() {
            return Err(Error::value_error(format!(
                "Tensor::from_slice: shape {shape:?} holds {numel} elements but the slice has {}",
                data.len()
            )));
        }
        let t = Tensor::empty(shape, T::DTYPE, Device::cpu(0))?;
        t.copy_from_slice(data)?;
        Ok(t)
    }

    /// A new tensor of `shape` and `dtype` on `device` holding `values` converted from `f64`
    /// (see [`element::from_f64`]).
    pub fn from_f64s(
        values: &[f64],
        shape: &[i64],
        dtype: DataType,
        device: Device,
    ) -> Result<Tensor> {
        let t = Tensor::empty(shape, dtype, device)?;
        let lanes = dtype.lanes() as usize;
        if values.len() != t.numel().saturating_mul(lanes) {
            return Err(Error::value_error(format!(
                "Tensor::from_f64s: shape {shape:?} with dtype `{dtype}` holds {} values but got {}",
                t.numel().saturating_mul(lanes),
                values.len()
            )));
        }
        t.copy_from_bytes(&element::from_f64(values, dtype)?)?;
        Ok(t)
    }

    /// A non-owning tensor view of a `DLTensor` that someone else owns: shape and strides are
    /// copied, the data is not.
    ///
    /// # Safety
    /// `ptr` must point to a valid DLTensor whose data outlives every use of the view (typically:
    /// the view does not outlive the call that received the `DLTensor*`).
    pub unsafe fn from_dltensor_borrowed(ptr: *const DLTensor) -> Result<Tensor> {
        // SAFETY: the caller guarantees a NULL or valid pointer.
        let dl = unsafe { ptr.as_ref() }
            .ok_or_else(|| Error::value_error("the DLTensor pointer is NULL"))?;
        // SAFETY: a valid DLTensor's shape and strides hold ndim values.
        unsafe { layout::validate(dl, "DLTensor argument") }?;
        // SAFETY: as above; assemble copies them before `dl` may go away.
        let (shape, strides) = unsafe { dims(dl) };
        Ok(Self::assemble(dl, shape, strides, Storage::Borrowed))
    }

    /// The `DLTensor` (read-only view of the metadata).
    #[inline]
    pub fn dl_tensor(&self) -> &DLTensor {
        &self.0.dl_tensor
    }

    /// Pointer to the `DLTensor` inside the object, for C calls (valid while `self` lives).
    #[inline]
    pub fn as_dltensor_ptr(&self) -> *mut DLTensor {
        &self.0.dl_tensor as *const DLTensor as *mut DLTensor
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        usize::try_from(self.dl_tensor().ndim).unwrap_or(0)
    }

    /// The dimensions.
    pub fn shape(&self) -> &[i64] {
        // SAFETY: a live tensor object describes ndim dims that live as long as it does.
        unsafe { dims(self.dl_tensor()).0 }
    }

    /// The strides in elements (None: compact).
    pub fn strides(&self) -> Option<&[i64]> {
        // SAFETY: as in `shape`.
        unsafe { dims(self.dl_tensor()).1 }
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        DataType(self.dl_tensor().dtype)
    }

    /// The device holding the data.
    pub fn device(&self) -> Device {
        Device(self.dl_tensor().device)
    }

    /// Bytes between the data pointer and the first element.
    pub fn byte_offset(&self) -> u64 {
        self.dl_tensor().byte_offset
    }

    /// The raw data pointer (before `byte_offset`); for non-CPU devices, a device handle.
    pub fn raw_data(&self) -> *mut c_void {
        self.dl_tensor().data
    }

    /// Number of elements (saturates for foreign tensors with absurd shapes).
    pub fn numel(&self) -> usize {
        self.shape().iter().fold(1usize, |n, &d| {
            n.saturating_mul(usize::try_from(d).unwrap_or(0))
        })
    }

    /// Bytes the elements take when packed (saturating, like [`Tensor::numel`]).
    pub fn nbytes(&self) -> usize {
        checked_nbytes(self.numel(), self.dtype()).unwrap_or(usize::MAX)
    }

    /// True when the elements are laid out compactly in row-major order.
    pub fn is_contiguous(&self) -> bool {
        is_contiguous(self.shape(), self.strides())
    }

    /// True when the first element's address (host memory) or the byte offset (device
    /// handles) is a multiple of `alignment`, as TVM-FFI's `IsAligned`.
    pub fn is_aligned(&self, alignment: usize) -> bool {
        dlpack::is_aligned(self.dl_tensor(), alignment)
    }

    /// A short description for messages: `[2, 3] float32 on cpu:0`.
    pub fn describe(&self) -> String {
        format!(
            "{:?} {} on {}",
            self.shape(),
            self.dtype(),
            device_label(self.device())
        )
    }

    /// A view of the same data with another shape and dtype (no copy). The tensor must be
    /// contiguous and the view must not need more bytes than the tensor has.
    pub fn view(&self, shape: &[i64], dtype: DataType) -> Result<Tensor> {
        if !self.is_contiguous() {
            return Err(Error::value_error(format!(
                "cannot view the non-contiguous tensor {} as {shape:?} {dtype}",
                self.describe()
            )));
        }
        let numel = checked_numel(shape)?;
        let need = checked_nbytes(numel, dtype)?;
        if need > self.nbytes() {
            return Err(Error::value_error(format!(
                "cannot view tensor {} ({} bytes) as {shape:?} {dtype} ({need} bytes): the view \
                 is larger than the tensor",
                self.describe(),
                self.nbytes()
            )));
        }
        let mut proto = *self.dl_tensor();
        proto.dtype = dtype.0;
        Ok(Self::assemble(
            &proto,
            shape,
            None,
            Storage::Parent(self.0.clone()),
        ))
    }

    /// Copies the elements of `src` into this tensor, across devices through the device API.
    /// Shapes and dtypes must match; strides and byte offsets may differ.
    pub fn copy_from(&self, src: &Tensor) -> Result<()> {
        check_same(src.dl_tensor(), self.dl_tensor(), "copy")?;
        // SAFETY: both are live tensors whose metadata describes their memory.
        unsafe { device::copy_between(src.dl_tensor(), self.dl_tensor(), std::ptr::null_mut()) }
    }

    /// Copies this tensor's elements into `dst` (see [`Tensor::copy_from`]).
    pub fn copy_to(&self, dst: &Tensor) -> Result<()> {
        dst.copy_from(self)
    }

    /// A copy of this tensor on `device` (compact).
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        let t = Tensor::empty(self.shape(), self.dtype(), device)?;
        t.copy_from(self)?;
        Ok(t)
    }

    /// A host DLTensor describing `data` as a compact tensor of this tensor's shape and dtype.
    fn host_twin(&self, data: *mut c_void) -> DLTensor {
        DLTensor {
            data,
            device: Device::cpu(0).0,
            ndim: self.dl_tensor().ndim,
            dtype: self.dl_tensor().dtype,
            shape: self.dl_tensor().shape,
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        }
    }

    fn check_nbytes(&self, got: usize, what: &str) -> Result<()> {
        if got != self.nbytes() {
            return Err(Error::value_error(format!(
                "{what}: tensor {} holds {} bytes but got {got}",
                self.describe(),
                self.nbytes()
            )));
        }
        Ok(())
    }

    /// Copies packed host bytes (row-major, exactly [`Tensor::nbytes`] of them) into the tensor.
    pub fn copy_from_bytes(&self, bytes: &[u8]) -> Result<()> {
        self.check_nbytes(bytes.len(), "copy_from_bytes")?;
        let src = self.host_twin(bytes.as_ptr() as *mut c_void);
        // SAFETY: `src` describes `bytes`, whose size matches; self is live.
        unsafe { device::copy_between(&src, self.dl_tensor(), std::ptr::null_mut()) }
    }

    /// The elements as packed host bytes in row-major order.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.nbytes()];
        let dst = self.host_twin(out.as_mut_ptr() as *mut c_void);
        // SAFETY: `dst` describes `out`, which has nbytes bytes; self is live.
        unsafe { device::copy_between(self.dl_tensor(), &dst, std::ptr::null_mut())? };
        Ok(out)
    }

    fn check_element<T: Element>(&self, what: &str) -> Result<()> {
        if self.dtype() != T::DTYPE {
            return Err(Error::type_error(format!(
                "{what}: tensor {} has dtype `{}` but the Rust element type is `{}` ({})",
                self.describe(),
                self.dtype(),
                T::DTYPE,
                std::any::type_name::<T>()
            )));
        }
        Ok(())
    }

    /// Copies `data` (as many elements as the tensor has, dtype checked) into the tensor.
    pub fn copy_from_slice<T: Element>(&self, data: &[T]) -> Result<()> {
        self.check_element::<T>("copy_from_slice")?;
        // SAFETY: a slice of plain elements is readable as its bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
        };
        self.copy_from_bytes(bytes)
    }

    /// The elements as a `Vec<T>` (dtype checked; any device, any strides).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_element::<T>("to_vec")?;
        let bytes = self.to_bytes()?;
        if !T::valid_bytes(&bytes) {
            return Err(Error::value_error(format!(
                "to_vec: tensor {} holds bytes that are not valid `{}` values",
                self.describe(),
                T::DTYPE
            )));
        }
        let n = self.numel();
        let mut out = Vec::<T>::with_capacity(n);
        // SAFETY: `bytes` holds n packed, valid elements of T; the vector has room for them.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr() as *mut u8, bytes.len());
            out.set_len(n);
        }
        Ok(out)
    }

    /// The elements converted to `f64`, lanes flattened (see [`element::to_f64`]).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        element::to_f64(&self.to_bytes()?, self.dtype())
    }

    fn host_elements<T: Element>(&self, what: &str) -> Result<*mut T> {
        self.check_element::<T>(what)?;
        if !device::is_host(self.device()) {
            return Err(Error::value_error(format!(
                "{what}: tensor {} is not in host memory; copy it with to_vec or to_device",
                self.describe()
            )));
        }
        if !self.is_contiguous() {
            return Err(Error::value_error(format!(
                "{what}: tensor {} is not contiguous",
                self.describe()
            )));
        }
        if self.numel() == 0 {
            return Ok(std::ptr::NonNull::<T>::dangling().as_ptr());
        }
        // SAFETY: host data plus the offset stays inside the allocation.
        let p = unsafe { (self.raw_data() as *mut u8).add(self.byte_offset() as usize) } as *mut T;
        if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::value_error(format!(
                "{what}: the data of tensor {} at {p:p} is not aligned for `{}`",
                self.describe(),
                std::any::type_name::<T>()
            )));
        }
        Ok(p)
    }

    /// The elements of a contiguous host tensor, borrowed (dtype, device, contiguity and
    /// alignment checked; `bool` tensors must hold only 0 and 1).
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let p = self.host_elements::<T>("as_slice")?;
        // SAFETY: checked above: host memory, contiguous, aligned, numel elements of T.
        let s = unsafe { std::slice::from_raw_parts(p, self.numel()) };
        // SAFETY: the elements are readable as bytes.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, std::mem::size_of_val(s)) };
        if !T::valid_bytes(bytes) {
            return Err(Error::value_error(format!(
                "as_slice: tensor {} holds bytes that are not valid `{}` values",
                self.describe(),
                T::DTYPE
            )));
        }
        Ok(s)
    }

    /// The elements of a contiguous host tensor, mutably borrowed (checked like
    /// [`Tensor::as_slice`]).
    ///
    /// # Safety
    /// Nothing else may read or write the tensor's data while the slice is alive (other handles
    /// to the same object, views, DLPack consumers share it).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice<T: Element>(&self) -> Result<&mut [T]> {
        let p = self.host_elements::<T>("as_mut_slice")?;
        // SAFETY: host_elements checked a contiguous host tensor of T with numel elements; the
        // caller guarantees no other access while the slice lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, self.numel()) })
    }

    /// True when both handles refer to the same object.
    pub fn same_as(&self, other: &Tensor) -> bool {
        self.0.same_as(&other.0)
    }
}

/// Checks that a copy from `src` to `dst` has matching shape and dtype, naming both.
fn check_same(src: &DLTensor, dst: &DLTensor, what: &str) -> Result<()> {
    // SAFETY: both come from live tensors.
    let ((ss, _), (ds, _)) = unsafe { (dims(src), dims(dst)) };
    let label = |t: &DLTensor, s: &[i64]| {
        format!(
            "{s:?} {} on {}",
            DataType(t.dtype),
            device_label(Device(t.device))
        )
    };
    if ss != ds {
        return Err(Error::value_error(format!(
            "{what}: shape mismatch: the source is {} but the destination is {}",
            label(src, ss),
            label(dst, ds)
        )));
    }
    if src.dtype != dst.dtype {
        return Err(Error::type_error(format!(
            "{what}: dtype mismatch: the source is {} but the destination is {}",
            label(src, ss),
            label(dst, ds)
        )));
    }
    Ok(())
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, device={})",
            self.shape(),
            self.dtype(),
            device_label(self.device())
        )
    }
}

impl Tensor {
    /// The `TryFromAny` downcast: an `ffi.Tensor` object, or a `DLTensor*` (type 7), which
    /// becomes a non-owning view (see [`Tensor::from_dltensor_borrowed`]): it must not be kept
    /// past the call that received the pointer.
    fn from_view(v: &AnyView<'_>) -> Option<Tensor> {
        match v.type_index() {
            type_index::TENSOR => ObjectRef::<TensorObj>::try_from_view(v).map(Tensor),
            type_index::DL_TENSOR_PTR => {
                // SAFETY: DLTensor* values keep the pointer in v_ptr; the caller keeps the
                // tensor alive for the call (the ABI's contract for borrowed arguments).
                let p = unsafe { v.raw().value.v_ptr } as *const DLTensor;
                // SAFETY: as above: a DLTensor the caller keeps valid for the call.
                unsafe { Tensor::from_dltensor_borrowed(p) }.ok()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_aligned_and_compact() {
        let t = Tensor::empty(&[2, 3, 5], DataType::float(32), Device::cpu(0)).unwrap();
        assert_eq!(t.shape(), &[2, 3, 5]);
        assert_eq!(t.strides().unwrap(), &[15, 5, 1]);
        assert_eq!(t.numel(), 30);
        assert_eq!(t.nbytes(), 120);
        assert!(t.is_contiguous());
        assert!(t.is_aligned(64));
        assert_eq!(t.0.type_index(), 70);
        // The DLTensor sits 24 bytes after the object pointer, as the ABI requires.
        let obj = t.0.as_ptr().as_ptr() as usize;
        assert_eq!(t.as_dltensor_ptr() as usize, obj + 24);
    }

    #[test]
    fn bad_shapes_are_value_errors() {
        let e = Tensor::empty(&[2, -3], DataType::float(32), Device::cpu(0)).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("negative"), "{}", e.message());
        let huge = Tensor::empty(&[1 << 40, 1 << 40], DataType::float(32), Device::cpu(0));
        assert_eq!(huge.unwrap_err().kind(), "ValueError");
        let e = Tensor::empty(&[4], DataType::float(32), Device::new(42, 0)).unwrap_err();
        assert!(e.message().contains("device type 42:0"), "{}", e.message());
    }
}
