//! Reflection (seed 002's VisitAttrs): an object type declares its type key and fields once
//! (`#[derive(Object)]` from `kiln-macros`), and then any object can be read field by field by
//! name, printed, compared structurally and serialized (`crate::json`, cargo feature `json`) —
//! from Rust, from C (`TVMFFIGetTypeInfo` gives the fields with getters) and from Python.

use crate::abi::{type_index as ti, RawAny};
use crate::any::{Any, AnyView, TryFromAny};
use crate::array::Array;
use crate::error::{ffi_guard, Error, Result};
use crate::map::Map;
use crate::object::{Object, ObjectRef, ObjectType};
use crate::shape::Shape;
use crate::type_registry;
use std::ffi::c_void;

/// A value that can be a reflected field: readable as an `Any` and buildable from one.
pub trait FieldValue: Sized {
    /// Reads the field as a value.
    fn to_field_any(&self) -> Any;
    /// Builds the field from a value.
    fn from_field_any(v: &AnyView<'_>) -> Option<Self>;
    /// The type name for messages.
    fn field_type_name() -> String;
    /// The static type index that C sees in the field info (`-1` for "any").
    fn field_type_index() -> i32 {
        ti::ANY
    }
}

impl<T: Clone + Into<Any> + TryFromAny> FieldValue for T {
    fn to_field_any(&self) -> Any {
        self.clone().into()
    }
    fn from_field_any(v: &AnyView<'_>) -> Option<Self> {
        T::try_from_view(v)
    }
    fn field_type_name() -> String {
        T::type_name()
    }
}

/// One reflected field.
#[derive(Clone)]
pub struct FieldDesc {
    /// The field's name.
    pub name: &'static str,
    /// Byte offset from the start of the object (header included), as the C field info has it.
    pub offset: usize,
    /// Size of the field in bytes.
    pub size: usize,
    /// Alignment of the field in bytes.
    pub align: usize,
    /// The static type index of the field's type ([`crate::abi::type_index::ANY`] when not fixed).
    pub static_type_index: i32,
    /// The field's type, as printed in errors.
    pub type_name: fn() -> String,
    /// Reads the field at a given address.
    pub get: unsafe fn(*const u8) -> Any,
    /// The same, with the C getter signature.
    pub c_getter: unsafe extern "C" fn(field: *mut c_void, result: *mut RawAny) -> i32,
}

unsafe fn get_field<F: FieldValue>(ptr: *const u8) -> Any {
    // SAFETY: `get` is installed for a field of type F, called with that field's address.
    unsafe { (*(ptr as *const F)).to_field_any() }
}

unsafe extern "C" fn c_get_field<F: FieldValue>(field: *mut c_void, result: *mut RawAny) -> i32 {
    ffi_guard(|| {
        // SAFETY: the C getter is installed for a field of type F; the caller passes its address
        // and a writable result slot.
        unsafe { *result = get_field::<F>(field as *const u8).into_raw() };
        Ok(())
    })
}

impl FieldDesc {
    /// Describes field `name` of type `F` at `payload_offset` bytes into the object's payload.
    pub fn of<F: FieldValue>(name: &'static str, payload_offset: usize) -> FieldDesc {
        FieldDesc {
            name,
            offset: payload_offset + std::mem::size_of::<crate::abi::ObjectHeader>(),
            size: std::mem::size_of::<F>(),
            align: std::mem::align_of::<F>(),
            static_type_index: F::field_type_index(),
            type_name: F::field_type_name,
            get: get_field::<F>,
            c_getter: c_get_field::<F>,
        }
    }
}

/// Field values by name, handed to a type's constructor when an object is rebuilt (from JSON,
/// from Python keyword arguments).
pub struct FieldValues {
    type_key: String,
    values: Vec<(String, Any)>,
}

impl FieldValues {
    /// Wraps name/value pairs for type `type_key`.
    pub fn new(type_key: &str, values: Vec<(String, Any)>) -> Self {
        FieldValues {
            type_key: type_key.to_string(),
            values,
        }
    }

    /// Takes and converts field `name`, naming the type and field on failure.
    pub fn take<F: FieldValue>(&mut self, name: &str) -> Result<F> {
        let pos = self
            .values
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| {
                Error::value_error(format!(
                    "`{}` needs field `{name}`, which is missing",
                    self.type_key
                ))
            })?;
        let (_, v) = self.values.swap_remove(pos);
        F::from_field_any(&v.view()).ok_or_else(|| {
            Error::type_error(format!(
                "field `{name}` of `{}` expects `{}` but got `{}`",
                self.type_key,
                F::field_type_name(),
                v.view().type_name()
            ))
        })
    }

    /// Fails when fields were given that the type does not have.
    pub fn finish(self) -> Result<()> {
        match self.values.first() {
            None => Ok(()),
            Some((n, _)) => Err(Error::value_error(format!(
                "`{}` has no field `{n}`",
                self.type_key
            ))),
        }
    }
}

/// A type declared for reflection; `#[derive(Object)]` submits one per type.
pub struct TypeDesc {
    /// The type key, e.g. `kiln.testing.Node`.
    pub key: &'static str,
    /// The parent's type key (`ffi.Object` for direct children).
    pub parent_key: &'static str,
    /// The type's own fields (the parent's come first at registration).
    pub fields: fn() -> Vec<FieldDesc>,
    /// Builds an object from all field values.
    pub create: Option<fn(FieldValues) -> Result<Any>>,
}

inventory::collect!(TypeDesc);

/// Implemented by `#[derive(Object)]`: the type's own fields and its constructor from values.
pub trait Reflect: ObjectType {
    /// The type's own fields (not the parent's).
    fn own_fields() -> Vec<FieldDesc>;
    /// Builds the payload from field values (parents' included).
    fn from_field_values(values: &mut FieldValues) -> Result<Self>;
}

/// Creates an object of a reflected type from field values (the `create` entry of its desc).
pub fn create_reflected<T: Reflect>(mut values: FieldValues) -> Result<Any> {
    let payload = T::from_field_values(&mut values)?;
    values.finish()?;
    Ok(ObjectRef::new(payload).into())
}

/// Names of an object's reflected fields.
pub fn field_names(obj: &ObjectRef<Object>) -> Vec<&'static str> {
    type_registry::entry(obj.type_index())
        .map(|e| e.fields.iter().map(|f| f.name).collect())
        .unwrap_or_default()
}

/// Reads field `name` of an object, or an `AttributeError`.
pub fn get_field_by_name(obj: &ObjectRef<Object>, name: &str) -> Result<Any> {
    let entry = type_registry::entry(obj.type_index());
    let field = entry
        .and_then(|e| e.fields.iter().find(|f| f.name == name))
        .ok_or_else(|| {
            Error::attribute_error(format!("`{}` object has no field `{name}`", obj.type_key()))
        })?;
    // SAFETY: the registry's offset is valid for objects of this type.
    Ok(unsafe { (field.get)((obj.as_ptr().as_ptr() as *const u8).add(field.offset)) })
}

/// Builds an object of a registered type from field values.
pub fn create_object(type_key: &str, values: Vec<(String, Any)>) -> Result<Any> {
    let index = type_registry::index_of_key(type_key)
        .ok_or_else(|| Error::value_error(format!("unknown object type `{type_key}`")))?;
    let create = type_registry::entry(index)
        .and_then(|e| e.desc)
        .and_then(|d| d.create)
        .ok_or_else(|| {
            Error::value_error(format!(
                "object type `{type_key}` cannot be built from fields"
            ))
        })?;
    create(FieldValues::new(type_key, values))
}

fn quote(bytes: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(bytes))
}

/// Text form of a value: `1`, `2.5`, `"text"`, `[1, 2]`, `{"k": v}`, `kiln.testing.Node(name="a", ...)`.
pub fn repr_value(v: &AnyView<'_>) -> String {
    repr_depth(v, 0)
}

/// Text form of an object.
pub fn repr_object(obj: &ObjectRef<Object>) -> String {
    let any: Any = obj.clone().into();
    repr_value(&any.view())
}

fn repr_depth(v: &AnyView<'_>, depth: usize) -> String {
    if depth > 64 {
        return "...".into();
    }
    if let Some(b) = v.str_bytes() {
        return quote(b);
    }
    if let Some(b) = v.bytes_bytes() {
        return format!("b{}", quote(b));
    }
    let raw = v.raw();
    // Each arm reads the union member its type index selects.
    match raw.type_index {
        ti::NONE => "None".into(),
        // SAFETY: an int keeps v_int64.
        ti::INT => unsafe { raw.value.v_int64 }.to_string(),
        // SAFETY: a bool keeps v_int64.
        ti::BOOL => if unsafe { raw.value.v_int64 } != 0 {
            "True"
        } else {
            "False"
        }
        .into(),
        // SAFETY: a float keeps v_float64.
        ti::FLOAT => crate::float_repr::debug_f64(unsafe { raw.value.v_float64 }),
        // SAFETY: a data type keeps v_dtype.
        ti::DATA_TYPE => format!("{}", crate::DataType(unsafe { raw.value.v_dtype })),
        // SAFETY: a device keeps v_device.
        ti::DEVICE => format!("{}", crate::Device(unsafe { raw.value.v_device })),
        ti::OPAQUE_PTR | ti::DL_TENSOR_PTR => {
            // SAFETY: pointers keep v_ptr.
            format!("<{} {:p}>", v.type_name(), unsafe { raw.value.v_ptr })
        }
        ti::ARRAY => {
            let a = Array::try_from_view(v).expect("array");
            let items: Vec<String> = a.iter().map(|x| repr_depth(&x, depth + 1)).collect();
            format!("[{}]", items.join(", "))
        }
        ti::MAP => {
            let m = Map::try_from_view(v).expect("map");
            let items: Vec<String> = m
                .iter()
                .map(|(k, x)| {
                    format!(
                        "{}: {}",
                        repr_depth(&k, depth + 1),
                        repr_depth(&x, depth + 1)
                    )
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        ti::SHAPE => format!(
            "Shape({:?})",
            Shape::try_from_view(v).expect("shape").as_slice()
        ),
        ti::ERROR => {
            let e = Error::try_from_view(v).expect("error");
            format!("ffi.Error({}: {})", e.kind(), e.message())
        }
        _ => {
            let Some(obj) = ObjectRef::<Object>::try_from_view(v) else {
                return format!("<{}>", v.type_name());
            };
            let names = field_names(&obj);
            if names.is_empty() {
                return format!("{}@{:p}", obj.type_key(), obj.as_ptr());
            }
            let fields: Vec<String> = names
                .iter()
                .map(|n| {
                    let f = get_field_by_name(&obj, n).unwrap_or_default();
                    format!("{n}={}", repr_depth(&f.view(), depth + 1))
                })
                .collect();
            format!("{}({})", obj.type_key(), fields.join(", "))
        }
    }
}

/// Structural equality: plain values by value, strings and bytes by content, arrays, maps and
/// shapes item by item, reflected objects field by field; other objects by identity.
pub fn structural_equal(a: &AnyView<'_>, b: &AnyView<'_>) -> bool {
    if crate::map::AnyKey::eq_views(a, b) {
        return true;
    }
    let (ia, ib) = (a.type_index(), b.type_index());
    if ia != ib || ia < ti::STATIC_OBJECT_BEGIN {
        // Float NaN never equals itself; everything else plain was compared above.
        return false;
    }
    match ia {
        ti::ARRAY => {
            let (x, y) = (
                Array::try_from_view(a).unwrap(),
                Array::try_from_view(b).unwrap(),
            );
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|(p, q)| structural_equal(&p, &q))
        }
        ti::MAP => {
            let (x, y) = (
                Map::try_from_view(a).unwrap(),
                Map::try_from_view(b).unwrap(),
            );
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.get(k.to_owned())
                        .is_some_and(|w| structural_equal(&v, &w))
                })
        }
        ti::SHAPE => Shape::try_from_view(a).unwrap() == Shape::try_from_view(b).unwrap(),
        _ => {
            let (x, y) = (
                ObjectRef::<Object>::try_from_view(a).unwrap(),
                ObjectRef::<Object>::try_from_view(b).unwrap(),
            );
            let names = field_names(&x);
            !names.is_empty()
                && names.iter().all(|n| {
                    let (p, q) = (
                        get_field_by_name(&x, n).unwrap_or_default(),
                        get_field_by_name(&y, n).unwrap_or_default(),
                    );
                    structural_equal(&p.view(), &q.view())
                })
        }
    }
}
