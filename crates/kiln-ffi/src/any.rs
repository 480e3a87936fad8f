//! `Any` (an owned 16-byte value) and `AnyView` (a borrowed one), with conversions to and from
//! Rust types.
//!
//! Both are `#[repr(transparent)]` over [`RawAny`], so a `&[Any]` or `&[AnyView]` can be handed to
//! C as a `const TVMFFIAny*` without copying.

use crate::abi::{type_index as ti, AnyValue, ByteArray, DLTensor, ObjectHeader, RawAny};
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::object::{dec_ref, inc_ref, ObjectRef, ObjectType};
use crate::string::{Bytes, BytesObj, Str, StrObj};
use crate::type_registry;
use std::ffi::{c_void, CStr};
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

/// An owned value: plain data, or one strong reference to an object.
#[repr(transparent)]
pub struct Any(RawAny);

/// A borrowed value: it may point to an object, a C string or a byte array that someone else
/// keeps alive for `'a`.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct AnyView<'a>(RawAny, PhantomData<&'a ()>);

/// Name of the kind of value a type index denotes, as error messages show it.
pub fn type_name_of_index(index: i32) -> String {
    match index {
        ti::NONE => "None".into(),
        ti::INT => "int".into(),
        ti::BOOL => "bool".into(),
        ti::FLOAT => "float".into(),
        ti::SMALL_STR | ti::RAW_STR | ti::STR => "str".into(),
        ti::SMALL_BYTES | ti::BYTE_ARRAY_PTR | ti::BYTES => "bytes".into(),
        _ => type_registry::type_key_of(index),
    }
}

impl<'a> AnyView<'a> {
    /// The None value.
    pub const NONE: AnyView<'static> = AnyView(RawAny::NONE, PhantomData);

    /// Wraps a raw value.
    ///
    /// # Safety
    /// Whatever the value points to must stay alive for `'a`.
    #[inline]
    pub unsafe fn from_raw(raw: RawAny) -> Self {
        AnyView(raw, PhantomData)
    }

    /// Views a C array of values as a slice.
    ///
    /// # Safety
    /// `args` must point to `n` values alive for `'a` (or `n` must be 0).
    #[inline]
    pub unsafe fn slice_from_raw(args: *const RawAny, n: i32) -> &'a [AnyView<'a>] {
        if n <= 0 || args.is_null() {
            &[]
        } else {
            // SAFETY: the caller guarantees `n` live values; AnyView is a transparent RawAny.
            unsafe { std::slice::from_raw_parts(args as *const AnyView<'a>, n as usize) }
        }
    }

    /// The raw value.
    #[inline]
    pub fn raw(&self) -> RawAny {
        self.0
    }

    /// The type index.
    #[inline]
    pub fn type_index(&self) -> i32 {
        self.0.type_index
    }

    /// Type name for messages.
    pub fn type_name(&self) -> String {
        type_name_of_index(self.type_index())
    }

    /// True for None.
    pub fn is_none(&self) -> bool {
        self.0.type_index == ti::NONE
    }

    /// The object pointer when the value is an object.
    #[inline]
    pub fn object_ptr(&self) -> Option<NonNull<ObjectHeader>> {
        if self.0.type_index >= ti::STATIC_OBJECT_BEGIN {
            // SAFETY: object values hold an object pointer.
            NonNull::new(unsafe { self.0.value.v_obj })
        } else {
            None
        }
    }

    /// The bytes of a string value (small, raw C string or object).
    pub fn str_bytes(&self) -> Option<&'a [u8]> {
        // SAFETY: each branch reads the union member that the type index selects; the data lives
        // for 'a by the view's contract.
        unsafe {
            match self.0.type_index {
                ti::SMALL_STR => Some(std::slice::from_raw_parts(
                    (&self.0.value.v_bytes as *const [u8; 8]) as *const u8,
                    self.0.small_len as usize,
                )),
                ti::RAW_STR => {
                    let p = self.0.value.v_c_str;
                    if p.is_null() {
                        None
                    } else {
                        Some(CStr::from_ptr(p).to_bytes())
                    }
                }
                ti::STR => {
                    let obj = &*((self.0.value.v_obj as *const u8).add(24) as *const StrObj);
                    Some(if obj.size == 0 {
                        &[]
                    } else {
                        std::slice::from_raw_parts(obj.data, obj.size)
                    })
                }
                _ => None,
            }
        }
    }

    /// The bytes of a bytes value (small, byte-array pointer or object).
    pub fn bytes_bytes(&self) -> Option<&'a [u8]> {
        // SAFETY: as in `str_bytes`.
        unsafe {
            match self.0.type_index {
                ti::SMALL_BYTES => Some(std::slice::from_raw_parts(
                    (&self.0.value.v_bytes as *const [u8; 8]) as *const u8,
                    self.0.small_len as usize,
                )),
                ti::BYTE_ARRAY_PTR => {
                    let p = self.0.value.v_ptr as *const ByteArray;
                    if p.is_null() {
                        None
                    } else {
                        Some((*p).as_slice())
                    }
                }
                ti::BYTES => {
                    let obj = &*((self.0.value.v_obj as *const u8).add(24) as *const BytesObj);
                    Some(if obj.size == 0 {
                        &[]
                    } else {
                        std::slice::from_raw_parts(obj.data, obj.size)
                    })
                }
                _ => None,
            }
        }
    }

    /// Makes an owned copy (objects gain a reference; C strings and byte arrays are copied into
    /// owned values; an r-value reference moves the object out of its slot).
    #[inline]
    pub fn to_owned(&self) -> Any {
        let raw = self.0;
        let index = raw.type_index;
        if index >= ti::STATIC_OBJECT_BEGIN {
            if let Some(obj) = self.object_ptr() {
                // SAFETY: the view keeps the object alive; the new Any owns one more reference.
                unsafe { inc_ref(obj) };
            }
            return Any(raw);
        }
        if !(ti::RAW_STR..ti::SMALL_STR).contains(&index) {
            return Any(raw);
        }
        self.own_borrowed()
    }

    /// The owned copy of a borrowed kind: C strings, byte arrays and r-value references.
    #[cold]
    fn own_borrowed(&self) -> Any {
        let raw = self.0;
        match raw.type_index {
            ti::RAW_STR => match self.str_bytes() {
                Some(b) => Any::from_str_bytes(b),
                None => Any::none(),
            },
            ti::BYTE_ARRAY_PTR => match self.bytes_bytes() {
                Some(b) => Any::from_bytes_slice(b),
                None => Any::none(),
            },
            ti::OBJECT_RVALUE_REF => {
                // SAFETY: the value points to a slot holding an owned object pointer (or NULL).
                unsafe {
                    let slot = raw.value.v_ptr as *mut *mut ObjectHeader;
                    match NonNull::new(if slot.is_null() {
                        std::ptr::null_mut()
                    } else {
                        *slot
                    }) {
                        Some(obj) => {
                            *slot = std::ptr::null_mut();
                            Any::from_object_raw(obj)
                        }
                        None => Any::none(),
                    }
                }
            }
            _ => {
                if let Some(obj) = self.object_ptr() {
                    // SAFETY: the view keeps the object alive; the new Any owns one more reference.
                    unsafe { inc_ref(obj) };
                }
                Any(raw)
            }
        }
    }

    /// Converts to a Rust type, or says what was there instead.
    #[inline]
    pub fn try_as<T: TryFromAny>(&self) -> Result<T> {
        match T::try_from_view(self) {
            Some(v) => Ok(v),
            None => Err(self.mismatch_error(T::type_name)),
        }
    }

    /// The error of [`try_as`](Self::try_as), out of line: one copy for all target types.
    #[cold]
    #[inline(never)]
    fn mismatch_error(&self, expected: fn() -> String) -> Error {
        Error::type_error(format!(
            "expected `{}` but got `{}`",
            expected(),
            self.type_name()
        ))
    }
}

impl Any {
    /// The None value.
    #[inline]
    pub const fn none() -> Any {
        Any(RawAny::NONE)
    }

    /// Takes ownership of a raw value.
    ///
    /// # Safety
    /// When the value is an object, the caller gives up one strong reference to it. The value
    /// must not be a borrowed kind (raw C string, byte array pointer, r-value reference).
    #[inline]
    pub unsafe fn from_raw(raw: RawAny) -> Any {
        Any(raw)
    }

    /// Gives up ownership, returning the raw value (with its reference, for objects).
    #[inline]
    pub fn into_raw(self) -> RawAny {
        let raw = self.0;
        std::mem::forget(self);
        raw
    }

    /// Borrows the value.
    #[inline]
    pub fn view(&self) -> AnyView<'_> {
        AnyView(self.0, PhantomData)
    }

    /// The type index.
    #[inline]
    pub fn type_index(&self) -> i32 {
        self.0.type_index
    }

    /// True for None.
    pub fn is_none(&self) -> bool {
        self.0.type_index == ti::NONE
    }

    /// Converts to a Rust type (see [`AnyView::try_as`]).
    pub fn try_as<T: TryFromAny>(&self) -> Result<T> {
        self.view().try_as()
    }

    /// Wraps an object pointer, taking over one strong reference.
    ///
    /// # Safety
    /// `obj` must be a live object and the caller gives up one reference.
    pub unsafe fn from_object_raw(obj: NonNull<ObjectHeader>) -> Any {
        // SAFETY: the caller guarantees a live object.
        let index = unsafe { (*obj.as_ptr()).type_index };
        Any(RawAny {
            type_index: index,
            small_len: 0,
            value: AnyValue {
                v_obj: obj.as_ptr(),
            },
        })
    }

    /// A string value: inline when at most 7 bytes, an `ffi.String` object otherwise.
    pub fn from_str_bytes(bytes: &[u8]) -> Any {
        if bytes.len() <= 7 {
            Any(small(ti::SMALL_STR, bytes))
        } else {
            Str::from_bytes(bytes).into()
        }
    }

    /// A bytes value: inline when at most 7 bytes, an `ffi.Bytes` object otherwise.
    pub fn from_bytes_slice(bytes: &[u8]) -> Any {
        if bytes.len() <= 7 {
            Any(small(ti::SMALL_BYTES, bytes))
        } else {
            Bytes::from_bytes(bytes).into()
        }
    }

    /// The same value with small strings and bytes turned into objects (what C code that expects
    /// an object handle needs).
    pub fn into_object_form(self) -> Any {
        match self.type_index() {
            ti::SMALL_STR => Str::from_bytes(self.view().str_bytes().unwrap_or_default()).into(),
            ti::SMALL_BYTES => {
                Bytes::from_bytes(self.view().bytes_bytes().unwrap_or_default()).into()
            }
            _ => self,
        }
    }
}

fn small(index: i32, bytes: &[u8]) -> RawAny {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    RawAny {
        type_index: index,
        small_len: bytes.len() as u32,
        value: AnyValue { v_bytes: buf },
    }
}

impl Clone for Any {
    #[inline]
    fn clone(&self) -> Self {
        self.view().to_owned()
    }
}

impl Drop for Any {
    #[inline]
    fn drop(&mut self) {
        if let Some(obj) = self.view().object_ptr() {
            // SAFETY: an owned object value holds one strong reference.
            unsafe { dec_ref(obj) }
        }
    }
}

impl Default for Any {
    fn default() -> Self {
        Any::none()
    }
}

impl<'a> From<&'a Any> for AnyView<'a> {
    fn from(a: &'a Any) -> Self {
        a.view()
    }
}

impl fmt::Debug for Any {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.view())
    }
}

impl fmt::Debug for AnyView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::reflection::repr_value(self))
    }
}

impl PartialEq for Any {
    /// Plain values compare by value, strings and bytes by content, other objects by identity.
    fn eq(&self, other: &Self) -> bool {
        crate::map::AnyKey::eq_views(&self.view(), &other.view())
    }
}

// ---------------------------------------------------------------------------------------------
// Rust values into Any.

macro_rules! plain_into_any {
    ($t:ty, $index:expr, $field:ident, $conv:expr) => {
        impl From<$t> for Any {
            #[inline]
            fn from(v: $t) -> Any {
                #[allow(clippy::redundant_closure_call)]
                Any(RawAny {
                    type_index: $index,
                    small_len: 0,
                    value: AnyValue { $field: ($conv)(v) },
                })
            }
        }
    };
}

plain_into_any!(i64, ti::INT, v_int64, |v| v);
plain_into_any!(i32, ti::INT, v_int64, |v: i32| v as i64);
plain_into_any!(u32, ti::INT, v_int64, |v: u32| v as i64);
plain_into_any!(usize, ti::INT, v_int64, |v: usize| v as i64);
plain_into_any!(bool, ti::BOOL, v_int64, |v: bool| v as i64);
plain_into_any!(f64, ti::FLOAT, v_float64, |v| v);
plain_into_any!(f32, ti::FLOAT, v_float64, |v: f32| v as f64);
plain_into_any!(DataType, ti::DATA_TYPE, v_uint64, |v: DataType| {
    let mut b = [0u8; 8];
    b[0] = v.0.code;
    b[1] = v.0.bits;
    b[2..4].copy_from_slice(&v.0.lanes.to_le_bytes());
    u64::from_le_bytes(b)
});
plain_into_any!(Device, ti::DEVICE, v_uint64, |v: Device| {
    (v.0.device_type as u32 as u64) | ((v.0.device_id as u32 as u64) << 32)
});

impl From<()> for Any {
    fn from(_: ()) -> Any {
        Any::none()
    }
}

impl From<*mut c_void> for Any {
    /// An opaque pointer; NULL becomes None, as in TVM-FFI.
    fn from(p: *mut c_void) -> Any {
        if p.is_null() {
            Any::none()
        } else {
            Any(RawAny {
                type_index: ti::OPAQUE_PTR,
                small_len: 0,
                value: AnyValue { v_ptr: p },
            })
        }
    }
}

impl From<*mut DLTensor> for Any {
    /// A borrowed `DLTensor*` (the tensor must outlive every use of the value).
    fn from(p: *mut DLTensor) -> Any {
        Any(RawAny {
            type_index: ti::DL_TENSOR_PTR,
            small_len: 0,
            value: AnyValue {
                v_ptr: p as *mut c_void,
            },
        })
    }
}

impl From<&str> for Any {
    fn from(s: &str) -> Any {
        Any::from_str_bytes(s.as_bytes())
    }
}

impl From<String> for Any {
    fn from(s: String) -> Any {
        Any::from_str_bytes(s.as_bytes())
    }
}

impl From<&String> for Any {
    fn from(s: &String) -> Any {
        Any::from_str_bytes(s.as_bytes())
    }
}

impl From<&[u8]> for Any {
    fn from(b: &[u8]) -> Any {
        Any::from_bytes_slice(b)
    }
}

impl From<Vec<u8>> for Any {
    fn from(b: Vec<u8>) -> Any {
        Any::from_bytes_slice(&b)
    }
}

impl<T: ObjectType> From<ObjectRef<T>> for Any {
    #[inline]
    fn from(o: ObjectRef<T>) -> Any {
        // SAFETY: we hand over the reference that `o` owned.
        unsafe { Any::from_object_raw(o.into_raw()) }
    }
}

impl<T: Into<Any>> From<Option<T>> for Any {
    fn from(o: Option<T>) -> Any {
        match o {
            Some(v) => v.into(),
            None => Any::none(),
        }
    }
}

impl From<AnyView<'_>> for Any {
    fn from(v: AnyView<'_>) -> Any {
        v.to_owned()
    }
}

// ---------------------------------------------------------------------------------------------
// Any into Rust values.

/// A Rust type that can be read out of a value.
pub trait TryFromAny: Sized {
    /// Converts, or returns None when the value is of another kind.
    fn try_from_view(v: &AnyView<'_>) -> Option<Self>;
    /// Name of the type in messages and signatures (`int`, `str`, `ffi.Array`, ...).
    fn type_name() -> String;
}

impl TryFromAny for Any {
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        Some(v.to_owned())
    }
    fn type_name() -> String {
        "Any".into()
    }
}

impl TryFromAny for () {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.is_none().then_some(())
    }
    fn type_name() -> String {
        "None".into()
    }
}

impl TryFromAny for i64 {
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        match v.0.type_index {
            // SAFETY: int and bool keep their value in v_int64.
            ti::INT | ti::BOOL => Some(unsafe { v.0.value.v_int64 }),
            _ => None,
        }
    }
    fn type_name() -> String {
        "int".into()
    }
}

macro_rules! narrow_int_from_any {
    ($($t:ty),*) => {$(
        impl TryFromAny for $t {
            fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
                i64::try_from_view(v).and_then(|x| <$t>::try_from(x).ok())
            }
            fn type_name() -> String {
                "int".into()
            }
        }
    )*};
}
narrow_int_from_any!(i32, u32, u64, usize, i8, u8, i16, u16);

impl TryFromAny for bool {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        match v.0.type_index {
            // SAFETY: int and bool keep their value in v_int64.
            ti::BOOL | ti::INT => Some(unsafe { v.0.value.v_int64 } != 0),
            _ => None,
        }
    }
    fn type_name() -> String {
        "bool".into()
    }
}

impl TryFromAny for f64 {
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        match v.0.type_index {
            // SAFETY: each arm reads the member its type index selects.
            ti::FLOAT => Some(unsafe { v.0.value.v_float64 }),
            // SAFETY: as above.
            ti::INT | ti::BOOL => Some(unsafe { v.0.value.v_int64 } as f64),
            _ => None,
        }
    }
    fn type_name() -> String {
        "float".into()
    }
}

impl TryFromAny for f32 {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        f64::try_from_view(v).map(|x| x as f32)
    }
    fn type_name() -> String {
        "float".into()
    }
}

impl TryFromAny for String {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.str_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
    fn type_name() -> String {
        "str".into()
    }
}

impl TryFromAny for Vec<u8> {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        v.bytes_bytes().map(|b| b.to_vec())
    }
    fn type_name() -> String {
        "bytes".into()
    }
}

/// The downcast of [`Str`] (`TryFromAny`): a string object, or a small string made into one.
pub(crate) fn str_from_view(v: &AnyView<'_>) -> Option<Str> {
    match v.0.type_index {
        ti::STR => {
            // SAFETY: a string object; the view keeps it alive while we add a reference.
            Some(Str(unsafe { ObjectRef::from_borrowed(v.object_ptr()?) }))
        }
        _ => v.str_bytes().map(Str::from_bytes),
    }
}

/// The downcast of [`Bytes`] (`TryFromAny`): a bytes object, or small bytes made into one.
pub(crate) fn bytes_from_view(v: &AnyView<'_>) -> Option<Bytes> {
    match v.0.type_index {
        // SAFETY: a bytes object; the view keeps it alive.
        ti::BYTES => Some(Bytes(unsafe { ObjectRef::from_borrowed(v.object_ptr()?) })),
        _ => v.bytes_bytes().map(Bytes::from_bytes),
    }
}

impl TryFromAny for DataType {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        match v.0.type_index {
            ti::DATA_TYPE => {
                // SAFETY: data types keep their value in v_dtype.
                Some(DataType(unsafe { v.0.value.v_dtype }))
            }
            _ => v
                .str_bytes()
                .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()),
        }
    }
    fn type_name() -> String {
        "DataType".into()
    }
}

impl TryFromAny for Device {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        // SAFETY: devices keep their value in v_device.
        (v.0.type_index == ti::DEVICE).then_some(Device(unsafe { v.0.value.v_device }))
    }
    fn type_name() -> String {
        "Device".into()
    }
}

impl TryFromAny for *mut c_void {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        match v.0.type_index {
            ti::NONE => Some(std::ptr::null_mut()),
            // SAFETY: pointers keep their value in v_ptr.
            ti::OPAQUE_PTR => Some(unsafe { v.0.value.v_ptr }),
            _ => None,
        }
    }
    fn type_name() -> String {
        "void*".into()
    }
}

impl TryFromAny for *mut DLTensor {
    /// A `DLTensor*`, or the DLTensor inside an `ffi.Tensor` object (24 bytes after its header).
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        match v.0.type_index {
            // SAFETY: pointers keep their value in v_ptr; tensor objects keep their DLTensor
            // right after the header.
            ti::DL_TENSOR_PTR => Some(unsafe { v.0.value.v_ptr } as *mut DLTensor),
            // SAFETY: as above; the add stays inside the tensor object.
            ti::TENSOR => Some(unsafe { (v.0.value.v_obj as *mut u8).add(24) } as *mut DLTensor),
            _ => None,
        }
    }
    fn type_name() -> String {
        "DLTensor*".into()
    }
}

impl<T: ObjectType> TryFromAny for ObjectRef<T> {
    #[inline]
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        let obj = v.object_ptr()?;
        if type_registry::is_instance(v.0.type_index, T::type_index()) {
            // SAFETY: the registry says the object is a T; the view keeps it alive.
            Some(unsafe { ObjectRef::from_borrowed(obj) })
        } else {
            None
        }
    }
    fn type_name() -> String {
        T::TYPE_KEY.into()
    }
}

impl<T: TryFromAny> TryFromAny for Option<T> {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        if v.is_none() {
            Some(None)
        } else {
            T::try_from_view(v).map(Some)
        }
    }
    fn type_name() -> String {
        format!("Optional[{}]", T::type_name())
    }
}

// SAFETY: objects have atomic reference counts and are shared across threads by design (as in
// TVM-FFI); plain values are data. Opaque pointers are the caller's responsibility, as in C.
unsafe impl Send for Any {}
// SAFETY: as for Send.
unsafe impl Sync for Any {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_round_trip() {
        assert_eq!(Any::from(42i64).try_as::<i64>().unwrap(), 42);
        assert_eq!(Any::from(i64::MIN).try_as::<i64>().unwrap(), i64::MIN);
        assert!(Any::from(true).try_as::<bool>().unwrap());
        assert_eq!(Any::from(1.5f64).try_as::<f64>().unwrap(), 1.5);
        let dt: DataType = "float32x4".parse().unwrap();
        assert_eq!(Any::from(dt).try_as::<DataType>().unwrap(), dt);
        let dev = Device::new(4, 3);
        assert_eq!(Any::from(dev).try_as::<Device>().unwrap(), dev);
        assert!(Any::none().is_none());
    }

    #[test]
    fn strings_are_small_or_objects() {
        let s = Any::from("abcdefg");
        assert_eq!(s.type_index(), ti::SMALL_STR);
        assert_eq!(s.try_as::<String>().unwrap(), "abcdefg");
        let l = Any::from("abcdefgh");
        assert_eq!(l.type_index(), ti::STR);
        assert_eq!(l.try_as::<String>().unwrap(), "abcdefgh");
        let b = Any::from(vec![0u8, 1, 2]);
        assert_eq!(b.type_index(), ti::SMALL_BYTES);
        assert_eq!(b.try_as::<Vec<u8>>().unwrap(), vec![0, 1, 2]);
        assert_eq!(Any::from(vec![7u8; 100]).type_index(), ti::BYTES);
    }

    #[test]
    fn wrong_kind_names_both_types() {
        let err = Any::from("x").try_as::<i64>().unwrap_err();
        assert_eq!(err.kind(), "TypeError");
        assert_eq!(err.message(), "expected `int` but got `str`");
    }

    #[test]
    fn cloning_an_object_value_counts_references() {
        let s = Str::new("a long enough string");
        let a: Any = s.clone().into();
        assert_eq!(s.0.strong_count(), 2);
        let b = a.clone();
        assert_eq!(s.0.strong_count(), 3);
        drop(a);
        drop(b);
        assert_eq!(s.0.strong_count(), 1);
    }
}
