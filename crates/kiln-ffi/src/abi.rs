//! Raw C layouts of the TVM-FFI ABI (`tvm/ffi/c_api.h`) and DLPack.
//!
//! Everything here is `#[repr(C)]` and pinned by the layout tests at the bottom; the safe types
//! of this crate ([`crate::Any`], [`crate::ObjectRef`], ...) are built on top of these.

use std::ffi::{c_char, c_void};
use std::sync::atomic::AtomicU64;

/// The version of the TVM-FFI ABI that Kiln implements.
pub const FFI_VERSION: (u32, u32, u32) = (0, 1, 16);

/// Type indices fixed by the ABI. Indices from [`type_index::DYN_OBJECT_BEGIN`] are allocated at
/// run time by the type registry.
pub mod type_index {
    /// Placeholder for "any type" in type signatures.
    pub const ANY: i32 = -1;
    /// None (null).
    pub const NONE: i32 = 0;
    /// A 64-bit signed integer (`v_int64`).
    pub const INT: i32 = 1;
    /// A boolean, stored as an integer (`v_int64`).
    pub const BOOL: i32 = 2;
    /// A 64-bit float (`v_float64`).
    pub const FLOAT: i32 = 3;
    /// An opaque pointer (`v_ptr`).
    pub const OPAQUE_PTR: i32 = 4;
    /// A data type (`v_dtype`).
    pub const DATA_TYPE: i32 = 5;
    /// A device (`v_device`).
    pub const DEVICE: i32 = 6;
    /// A borrowed `DLTensor*` (`v_ptr`).
    pub const DL_TENSOR_PTR: i32 = 7;
    /// A borrowed NUL-terminated C string (`v_c_str`).
    pub const RAW_STR: i32 = 8;
    /// A borrowed `TVMFFIByteArray*` (`v_ptr`).
    pub const BYTE_ARRAY_PTR: i32 = 9;
    /// A reference to an object that the callee may take over (`v_ptr` points to the object pointer).
    pub const OBJECT_RVALUE_REF: i32 = 10;
    /// A string of at most 7 bytes stored inline (`v_bytes`, length in `small_len`).
    pub const SMALL_STR: i32 = 11;
    /// Bytes of at most 7 stored inline (`v_bytes`, length in `small_len`).
    pub const SMALL_BYTES: i32 = 12;
    /// First index that denotes a reference-counted object.
    pub const STATIC_OBJECT_BEGIN: i32 = 64;
    /// The root object type, `ffi.Object`.
    pub const OBJECT: i32 = 64;
    /// `ffi.String`.
    pub const STR: i32 = 65;
    /// `ffi.Bytes`.
    pub const BYTES: i32 = 66;
    /// `ffi.Error`.
    pub const ERROR: i32 = 67;
    /// `ffi.Function`.
    pub const FUNCTION: i32 = 68;
    /// `ffi.Shape`.
    pub const SHAPE: i32 = 69;
    /// `ffi.Tensor`.
    pub const TENSOR: i32 = 70;
    /// `ffi.Array`.
    pub const ARRAY: i32 = 71;
    /// `ffi.Map`.
    pub const MAP: i32 = 72;
    /// `ffi.Module`.
    pub const MODULE: i32 = 73;
    /// `ffi.OpaquePyObject`: a Python object held by a frontend.
    pub const OPAQUE_PY_OBJECT: i32 = 74;
    /// `ffi.List`.
    pub const LIST: i32 = 75;
    /// `ffi.Dict`.
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
    /// The object's type index (see [`type_index`]).
    pub type_index: i32,
    /// Zero; keeps the deleter 8-byte aligned.
    pub padding: u32,
    /// Called when the strong or weak count drops to zero (see [`Deleter`]).
    pub deleter: Option<Deleter>,
}

/// `DLDataType`: type code, bits per lane, lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DLDataType {
    /// The type code ([`crate::dtype::code`]).
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Number of lanes (1 for scalars).
    pub lanes: u16,
}

/// `DLDevice`: device type and id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DLDevice {
    /// The device type ([`crate::device::device_type`]).
    pub device_type: i32,
    /// The device number within its type.
    pub device_id: i32,
}

/// `DLTensor`: a borrowed view of strided memory on a device.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    /// The data pointer (a device pointer for non-CPU devices).
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for a compact row-major tensor.
    pub strides: *mut i64,
    /// Offset in bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// The 8-byte payload of a [`RawAny`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union AnyValue {
    /// For integers and booleans.
    pub v_int64: i64,
    /// For floats.
    pub v_float64: f64,
    /// For opaque pointers and borrowed pointers (`DLTensor*`, byte arrays).
    pub v_ptr: *mut c_void,
    /// For borrowed C strings.
    pub v_c_str: *const c_char,
    /// For objects.
    pub v_obj: *mut ObjectHeader,
    /// For data types.
    pub v_dtype: DLDataType,
    /// For devices.
    pub v_device: DLDevice,
    /// For small strings and small bytes.
    pub v_bytes: [u8; 8],
    /// The whole 8 bytes, to copy or clear them.
    pub v_uint64: u64,
}

/// `TVMFFIAny`: the 16-byte tagged value passed across the ABI. It carries no ownership by
/// itself; [`crate::Any`] and [`crate::AnyView`] give it one.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawAny {
    /// Which member of `value` is set (see [`type_index`]).
    pub type_index: i32,
    /// Zero, or the length of a small string / small bytes value.
    pub small_len: u32,
    /// The payload.
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
    /// Start of the bytes (not NUL-terminated).
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
            // SAFETY: the caller guarantees `size` readable bytes that outlive 'a.
            unsafe { std::slice::from_raw_parts(self.data as *const u8, self.size) }
        }
    }
}

// SAFETY: a byte array is a borrowed view; sharing the view itself between threads is harmless.
unsafe impl Sync for ByteArray {}
// SAFETY: as for Sync: moving the view moves no ownership.
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
    /// Major version.
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
