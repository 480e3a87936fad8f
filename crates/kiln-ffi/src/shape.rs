//! `ffi.Shape`: an immutable list of `i64` behind an object header, laid out as
//! `{const int64_t* data; size_t size}`.

use crate::abi::type_index;
use crate::object::{ObjectRef, ObjectType};
use std::fmt;

/// ABI cell of a shape object.
#[repr(C)]
pub struct ShapeObj {
    /// The extents.
    pub data: *const i64,
    /// Number of extents.
    pub size: usize,
}

// SAFETY: `data` points to extents that live as long as the object and never change.
unsafe impl Send for ShapeObj {}
// SAFETY: as for Send.
unsafe impl Sync for ShapeObj {}

// SAFETY: #[repr(C)] with the layout of TVM-FFI's shape cell (data, size) for ffi.Shape.
unsafe impl ObjectType for ShapeObj {
    const TYPE_KEY: &'static str = "ffi.Shape";
    fn type_index() -> i32 {
        type_index::SHAPE
    }
}

impl Drop for ShapeObj {
    // Runs only for shapes Kiln allocated.
    fn drop(&mut self) {
        // SAFETY: `data` came from a leaked `Box<[i64]>` of `size` items.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.data as *mut i64,
                self.size,
            )))
        }
    }
}

/// A shape: the dimensions of a tensor.
#[derive(Clone, crate::ObjectRef)]
pub struct Shape(pub ObjectRef<ShapeObj>);

impl Shape {
    /// Makes a shape from dimensions.
    pub fn new(dims: &[i64]) -> Self {
        let boxed: Box<[i64]> = dims.into();
        let size = boxed.len();
        let data = Box::leak(boxed).as_ptr();
        Shape(ObjectRef::new(ShapeObj { data, size }))
    }

    /// The dimensions.
    pub fn as_slice(&self) -> &[i64] {
        if self.0.size == 0 {
            return &[];
        }
        // SAFETY: the cell describes `size` items that live as long as the object.
        unsafe { std::slice::from_raw_parts(self.0.data, self.0.size) }
    }

    /// Number of elements a tensor of this shape holds.
    pub fn numel(&self) -> i64 {
        self.as_slice().iter().product()
    }
}

impl PartialEq for Shape {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Shape({:?})", self.as_slice())
    }
}
