//! `ffi.Array`: an immutable sequence of values, laid out as TVM-FFI's sequence cell
//! `{void* data; int64_t size; int64_t capacity; void (*data_deleter)(void*)}` with `data`
//! pointing to `TVMFFIAny` items.

use crate::abi::{type_index, RawAny};
use crate::any::{Any, AnyView, TryFromAny};
use crate::error::{Error, Result};
use crate::object::{ObjectRef, ObjectType};
use std::ffi::c_void;
use std::fmt;

/// ABI cell of an array object.
#[repr(C)]
pub struct ArrayObj {
    /// The elements, owned references.
    pub data: *mut RawAny,
    /// Number of elements.
    pub size: i64,
    /// Number of slots allocated in `data`.
    pub capacity: i64,
    /// Frees `data` when set; None in the arrays Kiln makes (it frees their buffers itself).
    pub data_deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

// SAFETY: `data` holds owned Any values (Send + Sync), and an array does not change after it is
// made.
unsafe impl Send for ArrayObj {}
// SAFETY: as for Send.
unsafe impl Sync for ArrayObj {}

// SAFETY: #[repr(C)] with TVM-FFI's sequence cell layout for ffi.Array.
unsafe impl ObjectType for ArrayObj {
    const TYPE_KEY: &'static str = "ffi.Array";
    fn type_index() -> i32 {
        type_index::ARRAY
    }
}

impl Drop for ArrayObj {
    // Runs only for arrays Kiln allocated: the items are owned `Any`s in a leaked boxed slice.
    fn drop(&mut self) {
        // SAFETY: `data` came from a leaked `Box<[Any]>` of `capacity` items (== size).
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.data as *mut Any,
                self.capacity as usize,
            )));
        }
    }
}

/// An array of values.
#[derive(Clone, crate::ObjectRef)]
pub struct Array(pub ObjectRef<ArrayObj>);

impl Array {
    /// Makes an array that owns `items`.
    pub fn new(items: Vec<Any>) -> Self {
        let boxed: Box<[Any]> = items.into_boxed_slice();
        let size = boxed.len() as i64;
        let data = Box::leak(boxed).as_mut_ptr() as *mut RawAny;
        Array(ObjectRef::new(ArrayObj {
            data,
            size,
            capacity: size,
            data_deleter: None,
        }))
    }

    /// Makes an empty array.
    pub fn empty() -> Self {
        Array::new(Vec::new())
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.0.size as usize
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.size == 0
    }

    /// The items as borrowed values.
    pub fn as_slice(&self) -> &[AnyView<'_>] {
        // SAFETY: the cell describes `size` values owned by the array.
        unsafe { AnyView::slice_from_raw(self.0.data, self.0.size as i32) }
    }

    /// Item `i`, or an `IndexError`.
    pub fn get(&self, i: usize) -> Result<AnyView<'_>> {
        self.as_slice().get(i).copied().ok_or_else(|| {
            Error::index_error(format!(
                "array index {i} out of range for length {}",
                self.len()
            ))
        })
    }

    /// Iterates over the items.
    pub fn iter(&self) -> impl Iterator<Item = AnyView<'_>> {
        self.as_slice().iter().copied()
    }

    /// Converts every item to `T`, naming the first item that does not convert.
    pub fn to_vec<T: TryFromAny>(&self) -> Result<Vec<T>> {
        self.iter()
            .enumerate()
            .map(|(i, v)| {
                v.try_as::<T>()
                    .map_err(|e| e.context(format!("array item {i}")))
            })
            .collect()
    }
}

impl<T: Into<Any>> FromIterator<T> for Array {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Array::new(iter.into_iter().map(Into::into).collect())
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_holds_and_releases_items() {
        let s = crate::string::Str::new("shared string object");
        let a: Array = vec![Any::from(1i64), Any::from(s.clone()), Any::from("x")]
            .into_iter()
            .collect();
        assert_eq!(a.len(), 3);
        assert_eq!(s.0.strong_count(), 2);
        assert_eq!(a.get(0).unwrap().try_as::<i64>().unwrap(), 1);
        assert_eq!(
            a.get(1).unwrap().try_as::<String>().unwrap(),
            "shared string object"
        );
        assert!(a.get(3).is_err());
        drop(a);
        assert_eq!(s.0.strong_count(), 1);
    }
}
