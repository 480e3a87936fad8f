//! The object model: a 24-byte header, atomic strong/weak counts, a deleter, and the
//! [`ObjectRef`] smart pointer that Rust code holds.
//!
//! An object type is a `#[repr(C)]` struct whose layout starts with the ABI "cell" of its kind
//! (for example `{data, size}` for strings). Kiln allocates it behind an [`ObjectHeader`] in an
//! [`ObjBox`]; objects made by other runtimes (Apache TVM) are reached through the same
//! `ObjectRef<T>` as long as `T` only describes the part of the layout that the ABI fixes.

use crate::abi::{
    type_index, ObjectHeader, DELETER_FLAG_BOTH, DELETER_FLAG_STRONG, DELETER_FLAG_WEAK,
    REF_BOTH_ONE, REF_STRONG_ONE, REF_WEAK_ONE,
};
use crate::type_registry;
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};

/// A Rust type that is the payload of an FFI object.
///
/// # Safety
/// The implementor must be `#[repr(C)]` with the layout that the ABI gives to objects of
/// `type_index()` (after the header), and `type_index()` must be that object's index or one of
/// its ancestors.
pub unsafe trait ObjectType: Sized + Send + Sync + 'static {
    /// The registered type key, e.g. `"ffi.String"`.
    const TYPE_KEY: &'static str;
    /// The type index: a fixed ABI index, or one allocated by the type registry on first use.
    fn type_index() -> i32;
}

/// The base object type: only the header. Every object can be viewed as an `ObjectRef<Object>`.
#[repr(C)]
pub struct Object {
    _private: [u8; 0],
}

// SAFETY: a zero-sized payload: every object is at least a header.
unsafe impl ObjectType for Object {
    const TYPE_KEY: &'static str = "ffi.Object";
    fn type_index() -> i32 {
        type_index::OBJECT
    }
}

/// An object as Kiln allocates it: header, then payload.
#[repr(C)]
pub struct ObjBox<T> {
    /// The ABI header (reference counts, type index, deleter).
    pub header: ObjectHeader,
    /// The object's fields.
    pub payload: T,
}

#[cfg(feature = "count-objects")]
static LIVE_OBJECTS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Number of objects that Kiln allocated and has not freed yet (only counted with the
/// `count-objects` feature; always 0 without it).
pub fn live_object_count() -> i64 {
    #[cfg(feature = "count-objects")]
    {
        LIVE_OBJECTS.load(Ordering::SeqCst)
    }
    #[cfg(not(feature = "count-objects"))]
    {
        0
    }
}

/// The deleter that Kiln installs on the objects it allocates.
unsafe extern "C" fn obj_box_deleter<T>(obj: *mut c_void, flags: i32) {
    let boxed = obj as *mut ObjBox<T>;
    if flags & DELETER_FLAG_STRONG != 0 {
        // SAFETY: Kiln installs this deleter only on ObjBox<T> allocations, and the ABI calls it
        // with the strong flag once, when the last strong reference goes.
        unsafe { std::ptr::drop_in_place(&mut (*boxed).payload) };
    }
    if flags & DELETER_FLAG_WEAK != 0 {
        // SAFETY: as above; the weak flag comes once, last, when no reference is left.
        unsafe { std::alloc::dealloc(boxed as *mut u8, std::alloc::Layout::new::<ObjBox<T>>()) };
        #[cfg(feature = "count-objects")]
        LIVE_OBJECTS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Allocates an object with payload `value` and type index `index`, strong and weak counts at one.
///
/// `P` is the layout that users of the object see (`T` starts with it); `index` says what it is.
pub(crate) fn alloc_object<T>(index: i32, value: T) -> NonNull<ObjectHeader> {
    let layout = std::alloc::Layout::new::<ObjBox<T>>();
    // SAFETY: the layout is non-zero (it holds a header) and the memory is fully initialised below.
    unsafe {
        let ptr = std::alloc::alloc(layout) as *mut ObjBox<T>;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        ptr.write(ObjBox {
            header: ObjectHeader {
                ref_count: std::sync::atomic::AtomicU64::new(REF_BOTH_ONE),
                type_index: index,
                padding: 0,
                deleter: Some(obj_box_deleter::<T>),
            },
            payload: value,
        });
        #[cfg(feature = "count-objects")]
        LIVE_OBJECTS.fetch_add(1, Ordering::SeqCst);
        NonNull::new_unchecked(ptr as *mut ObjectHeader)
    }
}

/// Adds a strong reference.
///
/// # Safety
/// `obj` must point to a live object.
#[inline]
pub unsafe fn inc_ref(obj: NonNull<ObjectHeader>) {
    // SAFETY: the caller guarantees a live object.
    unsafe { &*obj.as_ptr() }
        .ref_count
        .fetch_add(REF_STRONG_ONE, Ordering::Relaxed);
}

/// Drops a strong reference, running the deleter as the ABI prescribes when counts reach zero.
///
/// # Safety
/// `obj` must point to a live object on which the caller owns one strong reference.
#[inline]
pub unsafe fn dec_ref(obj: NonNull<ObjectHeader>) {
    // SAFETY: the caller guarantees a live object (alive until its deleter runs below).
    let header = unsafe { &*obj.as_ptr() };
    let before = header
        .ref_count
        .fetch_sub(REF_STRONG_ONE, Ordering::Release);
    if before == REF_BOTH_ONE {
        fence(Ordering::Acquire);
        if let Some(deleter) = header.deleter {
            // SAFETY: the caller's was the last reference of either kind: free everything.
            unsafe { deleter(obj.as_ptr() as *mut c_void, DELETER_FLAG_BOTH) };
        }
    } else if before & 0xffff_ffff == REF_STRONG_ONE {
        // Last strong reference but weak ones remain: drop the contents now, the memory later.
        fence(Ordering::Acquire);
        if let Some(deleter) = header.deleter {
            // SAFETY: the last strong reference is gone; weak ones keep the memory.
            unsafe { deleter(obj.as_ptr() as *mut c_void, DELETER_FLAG_STRONG) };
        }
        if header.ref_count.fetch_sub(REF_WEAK_ONE, Ordering::Release) == REF_WEAK_ONE {
            fence(Ordering::Acquire);
            if let Some(deleter) = header.deleter {
                // SAFETY: the strong owners' weak reference was the last one: free the memory.
                unsafe { deleter(obj.as_ptr() as *mut c_void, DELETER_FLAG_WEAK) };
            }
        }
    }
}

/// Strong reference count of an object.
///
/// # Safety
/// `obj` must point to a live object.
pub unsafe fn strong_count(obj: NonNull<ObjectHeader>) -> u32 {
    // SAFETY: the caller guarantees a live object.
    (unsafe { &*obj.as_ptr() }.ref_count.load(Ordering::Relaxed) & 0xffff_ffff) as u32
}

/// A strong, reference-counted pointer to an FFI object whose payload is `T`.
pub struct ObjectRef<T: ObjectType> {
    ptr: NonNull<ObjectHeader>,
    _marker: PhantomData<T>,
}

// SAFETY: object counts are atomic and payloads are `Send + Sync` (ObjectType bound).
unsafe impl<T: ObjectType> Send for ObjectRef<T> {}
// SAFETY: as for Send.
unsafe impl<T: ObjectType> Sync for ObjectRef<T> {}

impl<T: ObjectType> ObjectRef<T> {
    /// Allocates a new object of type `T`.
    pub fn new(value: T) -> Self {
        Self::new_with_index(T::type_index(), value)
    }

    /// Allocates an object whose payload is `value` (an extension of `T`'s layout, starting with
    /// it), seen as `T`, with type index `index`.
    pub(crate) fn new_with_index<U>(index: i32, value: U) -> Self {
        debug_assert!(std::mem::size_of::<U>() >= std::mem::size_of::<T>());
        ObjectRef {
            ptr: alloc_object(index, value),
            _marker: PhantomData,
        }
    }

    /// Takes ownership of one strong reference held in a raw pointer.
    ///
    /// # Safety
    /// `ptr` must be a live object whose layout extends `T`; the caller gives up one strong
    /// reference.
    #[inline]
    pub unsafe fn from_raw(ptr: NonNull<ObjectHeader>) -> Self {
        ObjectRef {
            ptr,
            _marker: PhantomData,
        }
    }

    /// Makes a new strong reference from a borrowed raw pointer.
    ///
    /// # Safety
    /// `ptr` must be a live object whose layout extends `T`.
    #[inline]
    pub unsafe fn from_borrowed(ptr: NonNull<ObjectHeader>) -> Self {
        // SAFETY: the caller guarantees a live object.
        unsafe { inc_ref(ptr) };
        ObjectRef {
            ptr,
            _marker: PhantomData,
        }
    }

    /// Gives up ownership, returning the raw pointer with its strong reference.
    #[inline]
    pub fn into_raw(self) -> NonNull<ObjectHeader> {
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr
    }

    /// The raw header pointer (borrowed).
    #[inline]
    pub fn as_ptr(&self) -> NonNull<ObjectHeader> {
        self.ptr
    }

    /// The object's run-time type index.
    #[inline]
    pub fn type_index(&self) -> i32 {
        // SAFETY: the pointer is live while self is.
        unsafe { (*self.ptr.as_ptr()).type_index }
    }

    /// The object's registered type key.
    pub fn type_key(&self) -> String {
        type_registry::type_key_of(self.type_index())
    }

    /// Current strong count.
    pub fn strong_count(&self) -> u32 {
        // SAFETY: the pointer is live while self is.
        unsafe { strong_count(self.ptr) }
    }

    /// True when both refer to the same object.
    pub fn same_as<U: ObjectType>(&self, other: &ObjectRef<U>) -> bool {
        self.ptr == other.ptr
    }

    /// Views this reference as one to the base object.
    pub fn upcast(self) -> ObjectRef<Object> {
        // SAFETY: every object starts with the header.
        unsafe { ObjectRef::from_raw(self.into_raw()) }
    }

    /// Checked conversion to another object type (same object, new view).
    pub fn downcast<U: ObjectType>(self) -> Result<ObjectRef<U>, ObjectRef<T>> {
        if type_registry::is_instance(self.type_index(), U::type_index()) {
            // SAFETY: the registry says the object is a U.
            Ok(unsafe { ObjectRef::from_raw(self.into_raw()) })
        } else {
            Err(self)
        }
    }

    /// Pointer to the payload (the bytes right after the header).
    #[inline]
    pub fn payload_ptr(&self) -> *mut T {
        // SAFETY: the header is 24 bytes and payloads start right after it.
        unsafe { (self.ptr.as_ptr() as *mut u8).add(std::mem::size_of::<ObjectHeader>()) as *mut T }
    }
}

impl<T: ObjectType> std::ops::Deref for ObjectRef<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the object is live and its layout starts with T (ObjectType contract).
        unsafe { &*self.payload_ptr() }
    }
}

impl<T: ObjectType> Clone for ObjectRef<T> {
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: self holds a strong reference, so the object is live.
        unsafe { ObjectRef::from_borrowed(self.ptr) }
    }
}

impl<T: ObjectType> Drop for ObjectRef<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: self owns one strong reference.
        unsafe { dec_ref(self.ptr) }
    }
}

impl<T: ObjectType> fmt::Debug for ObjectRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::reflection::repr_object(&self.clone().upcast()))
    }
}
