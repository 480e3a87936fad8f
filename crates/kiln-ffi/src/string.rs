//! `ffi.String` and `ffi.Bytes`: immutable byte buffers behind an object header, laid out as
//! `{const char* data; size_t size}`. Kiln keeps a NUL after the bytes so `data` is a C string.
//!
//! Values of at most 7 bytes travel inline in an [`crate::Any`] (small string / small bytes) and
//! only become objects when something needs the object form.

use crate::abi::type_index;
use crate::object::{ObjectRef, ObjectType};
use std::fmt;

macro_rules! byte_buffer_object {
    ($(#[$doc:meta])* $obj:ident, $refname:ident, $key:literal, $index:expr, $name:literal, $from_view:path) => {
        /// ABI cell of the object: pointer and length of the bytes.
        #[repr(C)]
        pub struct $obj {
            /// Start of the bytes.
            pub data: *const u8,
            /// Number of bytes.
            pub size: usize,
        }

        // SAFETY: `data` points to bytes that live as long as the object and never change.
        unsafe impl Send for $obj {}
        // SAFETY: as for Send.
        unsafe impl Sync for $obj {}

        // SAFETY: #[repr(C)] with the layout of TVM-FFI's byte cell (data, size) for its type.
        unsafe impl ObjectType for $obj {
            const TYPE_KEY: &'static str = $key;
            fn type_index() -> i32 {
                $index
            }
        }

        impl Drop for $obj {
            // Runs only for buffers Kiln allocated (foreign objects are freed by their deleter).
            fn drop(&mut self) {
                // SAFETY: `data` came from a leaked `Box<[u8]>` of `size + 1` bytes.
                unsafe {
                    drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.data as *mut u8, self.size + 1)));
                }
            }
        }

        $(#[$doc])*
        #[derive(Clone, crate::ObjectRef)]
        #[object_ref(type_name = $name, try_from_view = $from_view)]
        pub struct $refname(pub ObjectRef<$obj>);

        impl $refname {
            /// Copies `bytes` into a new object.
            pub fn from_bytes(bytes: &[u8]) -> Self {
                let mut buf = Vec::with_capacity(bytes.len() + 1);
                buf.extend_from_slice(bytes);
                buf.push(0);
                let size = bytes.len();
                let data = Box::leak(buf.into_boxed_slice()).as_ptr();
                $refname(ObjectRef::new($obj { data, size }))
            }

            /// The bytes.
            pub fn as_bytes(&self) -> &[u8] {
                if self.0.size == 0 {
                    return &[];
                }
                // SAFETY: the cell describes bytes that live as long as the object.
                unsafe { std::slice::from_raw_parts(self.0.data, self.0.size) }
            }

            /// Number of bytes.
            pub fn len(&self) -> usize {
                self.0.size
            }

            /// True when empty.
            pub fn is_empty(&self) -> bool {
                self.0.size == 0
            }
        }

        impl PartialEq for $refname {
            fn eq(&self, other: &Self) -> bool {
                self.as_bytes() == other.as_bytes()
            }
        }
        impl Eq for $refname {}
    };
}

byte_buffer_object!(
    /// An `ffi.String` object (UTF-8 by convention, not checked: the ABI carries bytes).
    StrObj, Str, "ffi.String", type_index::STR, "str", crate::any::str_from_view
);
byte_buffer_object!(
    /// An `ffi.Bytes` object.
    BytesObj, Bytes, "ffi.Bytes", type_index::BYTES, "bytes", crate::any::bytes_from_view
);

impl Str {
    /// Makes a string object.
    pub fn new(s: &str) -> Self {
        Str::from_bytes(s.as_bytes())
    }

    /// The text (invalid UTF-8 is replaced).
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.as_bytes())
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_object_keeps_bytes_and_nul() {
        let s = Str::new("hello, world");
        assert_eq!(s.as_bytes(), b"hello, world");
        assert_eq!(s.0.type_index(), type_index::STR);
        // SAFETY: Kiln strings keep a NUL after the bytes.
        assert_eq!(unsafe { *s.0.data.add(s.len()) }, 0);
        let e = Bytes::from_bytes(b"");
        assert!(e.is_empty());
        assert_eq!(e.0.type_index(), type_index::BYTES);
    }
}
