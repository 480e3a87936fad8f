//! Raw C layouts of the TVM-FFI ABI (`tvm/ffi/c_api.h`) and DLPack.
//!
//! Everything here is `#[repr(C)]` and pinned by the layout tests at the bottom; the safe types
//! of this crate ([`crate::Any`], [`crate::ObjectRef`](struct@crate::ObjectRef), ...) are built
//! on top of these.

use std::ffi::{c_char, c_void};
use std::sync::atomic::AtomicU64;

/// The version of the TVM-FFI ABI that Kiln implements.
pub const FFI_VERSION: (u32, u32, u32) = (0, 1, 16);

/// Type indices fixed by the ABI. Indices from [`type_index::DYN_OBJECT_BEGIN`] are allocated at
/// run time by the type registry.
pub mod type_index {
    /// Placeholder for "any type" in type signatures.
    pub const ANY: i32 = -1;
    /// The None value (`nullptr` / Python `None`); the payload is zero.
    pub const NONE: i32 = 0;
    /// A 64-bit signed integer, held in `v_int64`.
    pub const INT: i32 = 1;
    /// A boolean, held in `v_int64` as 0 or 1.
    pub const BOOL: i32 = 2;
    /// A 64-bit float, held in `v_float64`.
    pub const FLOAT: i32 = 3;
    /// An untyped `void*` in `v_ptr`, passed through without ownership.
    pub const OPAQUE_PTR: i32 = 4;
    /// A `DLDataType`, held inline in `v_dtype`.
    pub const DATA_TYPE: i32 = 5;
    /// A `DLDevice`, held inline in `v_device`.
    pub const DEVICE: i32 = 6;
    /// A borrowed `DLTensor*` in `v_ptr` (not reference-counted).
    pub const DL_TENSOR_PTR: i32 = 7;
    /// A borrowed NUL-terminated C string in `v_c_str`.
    pub const RAW_STR: i32 = 8;
    /// A borrowed `TVMFFIByteArray*` in `v_ptr`.
    pub const BYTE_ARRAY_PTR: i32 = 9;
    /// An r-value reference: `v_ptr` points to an object handle slot whose reference the callee
    /// may move out.
    pub const OBJECT_RVALUE_REF: i32 = 10;
    /// A string of at most 7 bytes stored inline in `v_bytes`, its length in `small_len`.
    pub const SMALL_STR: i32 = 11;
    /// A byte string of at most 7 bytes stored inline in `v_bytes`, its length in `small_len`.
    pub const SMALL_BYTES: i32 = 12;
    /// First index that denotes a reference-counted object.
    pub const STATIC_OBJECT_BEGIN: i32 = 64;
    /// The root object type (`ffi.Object`); every object type derives from it.
    pub const OBJECT: i32 = 64;
    /// A heap string object (`ffi.String`), used for strings longer than the small form.
    pub const STR: i32 = 65;
    /// A heap byte-string object (`ffi.Bytes`).
    pub const BYTES: i32 = 66;
    /// An error object (`ffi.Error`): kind, message, backtrace.
    pub const ERROR: i32 = 67;
    /// A callable function object (`ffi.Function`).
    pub const FUNCTION: i32 = 68;
    /// An immutable shape object (`ffi.Shape`), a sequence of `i64` extents.
    pub const SHAPE: i32 = 69;
    /// A reference-counted tensor object (`ffi.Tensor`) that owns a `DLTensor`.
    pub const TENSOR: i32 = 70;
    /// An immutable array object (`ffi.Array`) of values.
    pub const ARRAY: i32 = 71;
    /// An immutable map object (`ffi.Map`) from values to values.
    pub const MAP: i32 = 72;
    /// A module object (`ffi.Module`): a collection of functions, e.g. a compiled library.
    pub const MODULE: i32 = 73;
    /// An object that wraps a foreign handle (such as a Python object) with its deleter.
    pub const OPAQUE_PY_OBJECT: i32 = 74;
    /// A mutable list object (`ffi.List`).
    pub const LIST: i32 = 75;
    /// A mutable dictionary object (`ffi.Dict`).
    pub const DICT: i32 = 76;
    /// First index handed out to types registered at run time.
    pub const DYN_OBJECT_BEGIN: i32 = 128;
}

/// Deleter flag: release the object's contents (strong count reached zero).
pub const DELETER_FLAG_STRONG: i32 = 1;
/// Deleter flag: release the object's memory (weak count reached zero).
pub const DELETER_FLAG_WEAK: i32 = 2;
/// Both deleter flags at once.
pub const DELETER_FLAG_BOTH: i32 = 3;

/// One strong reference in the combined reference count (low 32 bits).
pub const REF_STRONG_ONE: u64 = 1;
/// One weak reference in the combined reference count (high 32 bits).
pub const REF_WEAK_ONE: u64 = 1 << 32;
/// A fresh object: one strong and one weak reference (the weak one belongs to the strong owners).
pub const REF_BOTH_ONE: u64 = REF_STRONG_ONE | REF_WEAK_ONE;

/// Signature of an object deleter: `flags` says whether to drop contents, free memory, or both.
pub type Deleter = unsafe extern "C" fn(obj: *mut c_void, flags: i32);

/// The 24-byte header that starts every object (`TVMFFIObject`).
#[repr(C)]
pub struct ObjectHeader {
    /// Strong count in the low 32 bits, weak count in the high 32.
    pub ref_count: AtomicU64,
    /// Type index of the object (at offset 8), from [`type_index`] or the run-time registry.
    pub type_index: i32,
    /// Unused padding (at offset 12) that keeps `deleter` 8-byte aligned.
    pub padding: u32,
    /// Function that releases the object's contents and/or memory (at offset 16); called with
    /// the [`DELETER_FLAG_STRONG`] / [`DELETER_FLAG_WEAK`] flags when the counts reach zero.
    pub deleter: Option<Deleter>,
}

/// `DLDataType`: type code, bits per lane, lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DLDataType {
    /// Type code (`kDLInt`, `kDLUInt`, `kDLFloat`, `kDLBfloat`, ...).
    pub code: u8,
    /// Number of bits of one lane (e.g. 32 for `float32`).
    pub bits: u8,
    /// Number of lanes; 1 for scalars, more for vector types.
    pub lanes: u16,
}

/// `DLDevice`: device type and id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DLDevice {
    /// `DLDeviceType` code (1 = CPU, 2 = CUDA, ...).
    pub device_type: i32,
    /// Index of the device among those of its type.
    pub device_id: i32,
}

/// `DLTensor`: a borrowed view of strided memory on a device.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    /// Base pointer of the data (a device pointer for non-CPU devices).
    pub data: *mut c_void,
    /// Device on which the data lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// Extents, `ndim` entries.
    pub shape: *mut i64,
    /// Strides in elements, `ndim` entries, or NULL for a compact row-major tensor.
    pub strides: *mut i64,
    /// Offset in bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// The 8-byte payload of a [`RawAny`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union AnyValue {
    /// Integer or boolean payload ([`type_index::INT`], [`type_index::BOOL`]).
    pub v_int64: i64,
    /// Float payload ([`type_index::FLOAT`]).
    pub v_float64: f64,
    /// Untyped pointer payload (opaque pointers, `DLTensor*`, byte array pointers, r-value
    /// references).
    pub v_ptr: *mut c_void,
    /// Borrowed C string payload ([`type_index::RAW_STR`]).
    pub v_c_str: *const c_char,
    /// Object payload: a pointer to the header of an object (type indices from
    /// [`type_index::STATIC_OBJECT_BEGIN`]).
    pub v_obj: *mut ObjectHeader,
    /// Data type payload ([`type_index::DATA_TYPE`]).
    pub v_dtype: DLDataType,
    /// Device payload ([`type_index::DEVICE`]).
    pub v_device: DLDevice,
    /// Inline bytes of a small string or small bytes value.
    pub v_bytes: [u8; 8],
    /// The payload as raw 64 bits (used to zero it and to compare or hash it bitwise).
    pub v_uint64: u64,
}

/// `TVMFFIAny`: the 16-byte tagged value passed across the ABI. It carries no ownership by
/// itself; [`crate::Any`] and [`crate::AnyView`] give it one.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawAny {
    /// Which kind of value `value` holds (at offset 0), from [`type_index`] or the registry.
    pub type_index: i32,
    /// Zero, or the length of a small string / small bytes value.
    pub small_len: u32,
    /// The 8-byte payload (at offset 8), read according to `type_index`.
    pub value: AnyValue,
}

impl RawAny {
    /// The None value.
    pub const NONE: RawAny = RawAny {
        type_index: type_index::NONE,
        small_len: 0,
        value: AnyValue { v_uint64: 0 },
    };
}

impl Default for RawAny {
    fn default() -> Self {
        RawAny::NONE
    }
}

/// `TVMFFIByteArray`: a borrowed run of bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ByteArray {
    /// Pointer to the first byte; may be NULL when `size` is 0.
    pub data: *const c_char,
    /// Number of bytes.
    pub size: usize,
}

impl ByteArray {
    /// Borrows a Rust byte slice.
    pub fn from_slice(s: &[u8]) -> Self {
        ByteArray {
            data: s.as_ptr() as *const c_char,
            size: s.len(),
        }
    }

    /// Reads the bytes back.
    ///
    /// # Safety
    /// `data` must point to `size` readable bytes that outlive `'a` (or `size` must be 0).
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.size == 0 || self.data.is_null() {
            &[]
        } else {
            // SAFETY: `data` is non-null here and the caller guarantees it points to `size`
            // readable bytes that outlive `'a`.
            unsafe { std::slice::from_raw_parts(self.data as *const u8, self.size) }
        }
    }
}

// SAFETY: a byte array is a borrowed view; sharing the view itself between threads is harmless.
unsafe impl Sync for ByteArray {}
// SAFETY: the struct is only a pointer and a length and owns nothing; reading through it already
// needs the `unsafe` `as_slice`, whose caller must vouch that the bytes are valid where it reads.
unsafe impl Send for ByteArray {}

/// The safe-call signature that every callable uses.
pub type SafeCall = unsafe extern "C" fn(
    handle: *mut c_void,
    args: *const RawAny,
    num_args: i32,
    result: *mut RawAny,
) -> i32;

/// `TVMFFIVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Version {
    /// Major version; changes break the ABI.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn any_layout_matches_abi() {
        assert_eq!(size_of::<RawAny>(), 16);
        assert_eq!(align_of::<RawAny>(), 8);
        assert_eq!(offset_of!(RawAny, type_index), 0);
        assert_eq!(offset_of!(RawAny, small_len), 4);
        assert_eq!(offset_of!(RawAny, value), 8);
        assert_eq!(size_of::<AnyValue>(), 8);
    }

    #[test]
    fn object_header_layout_matches_abi() {
        assert_eq!(size_of::<ObjectHeader>(), 24);
        assert_eq!(offset_of!(ObjectHeader, ref_count), 0);
        assert_eq!(offset_of!(ObjectHeader, type_index), 8);
        assert_eq!(offset_of!(ObjectHeader, padding), 12);
        assert_eq!(offset_of!(ObjectHeader, deleter), 16);
        assert_eq!(size_of::<Option<Deleter>>(), 8);
    }

    #[test]
    fn dlpack_layout_matches_abi() {
        assert_eq!(size_of::<DLDataType>(), 4);
        assert_eq!(offset_of!(DLDataType, bits), 1);
        assert_eq!(offset_of!(DLDataType, lanes), 2);
        assert_eq!(size_of::<DLDevice>(), 8);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(offset_of!(DLTensor, data), 0);
        assert_eq!(offset_of!(DLTensor, device), 8);
        assert_eq!(offset_of!(DLTensor, ndim), 16);
        assert_eq!(offset_of!(DLTensor, dtype), 20);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(offset_of!(DLTensor, strides), 32);
        assert_eq!(offset_of!(DLTensor, byte_offset), 40);
    }

    #[test]
    fn byte_array_and_version_layout() {
        assert_eq!(size_of::<ByteArray>(), 16);
        assert_eq!(size_of::<Version>(), 12);
    }

    #[test]
    fn type_indices_match_abi() {
        use type_index::*;
        let fixed = [
            (NONE, 0),
            (INT, 1),
            (BOOL, 2),
            (FLOAT, 3),
            (OPAQUE_PTR, 4),
            (DATA_TYPE, 5),
            (DEVICE, 6),
            (DL_TENSOR_PTR, 7),
            (RAW_STR, 8),
            (BYTE_ARRAY_PTR, 9),
            (OBJECT_RVALUE_REF, 10),
            (SMALL_STR, 11),
            (SMALL_BYTES, 12),
            (OBJECT, 64),
            (STR, 65),
            (BYTES, 66),
            (ERROR, 67),
            (FUNCTION, 68),
            (SHAPE, 69),
            (TENSOR, 70),
            (ARRAY, 71),
            (MAP, 72),
            (MODULE, 73),
            (OPAQUE_PY_OBJECT, 74),
            (LIST, 75),
            (DICT, 76),
            (DYN_OBJECT_BEGIN, 128),
        ];
        for (got, want) in fixed {
            assert_eq!(got, want);
        }
    }
}
