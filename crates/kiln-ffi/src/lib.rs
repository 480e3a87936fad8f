//! Kiln's FFI core: a pure-Rust implementation of the Apache TVM-FFI value, object and function
//! model (seed 002's PackedFunc, Object and global registry) and its C ABI.
//!
//! - [`Any`] / [`AnyView`]: the 16-byte tagged value every call passes ([`abi::RawAny`]).
//! - [`ObjectRef`](struct@ObjectRef): reference-counted objects with the 24-byte header;
//!   built-in [`Str`], [`Bytes`], [`Shape`], [`Array`], [`Map`], [`Error`], [`Function`].
//! - `#[derive(Object)]` declares an object type; `#[derive(ObjectRef)]` writes a reference
//!   type's conversions to and from [`Any`] ([`macro@ObjectRef`]).
//! - [`Function`]: closures, C callbacks and foreign functions behind one calling convention.
//! - [`registry`]: global functions by name; [`register_global!`] registers at start-up.
//! - [`reflection`] and `json` (cargo feature `json`, on by default): fields by name, printing,
//!   structural equality, JSON.
//! - [`c_api`]: the exported `TVMFFI*` functions.

extern crate self as kiln_ffi;

pub mod abi;
pub mod any;
pub mod array;
mod builtins;
pub mod c_api;
pub mod device;
pub mod dtype;
pub mod error;
mod float_repr;
pub mod function;
#[cfg(feature = "json")]
pub mod json;
pub mod map;
pub mod narrow;
pub mod object;
pub mod reflection;
pub mod registry;
pub mod shape;
pub mod string;
pub mod sync;
#[cfg(feature = "testing")]
pub mod testing;
pub mod type_registry;

pub use any::{Any, AnyView, TryFromAny};
pub use array::Array;
pub use device::Device;
pub use dtype::DataType;
pub use error::{Error, Result};
pub use function::{Function, TypedFunction};
pub use kiln_macros::{Object, ObjectRef};
pub use map::Map;
pub use object::{Object, ObjectRef, ObjectType};
pub use shape::Shape;
pub use string::{Bytes, Str};

#[doc(hidden)]
pub use inventory;
