//! The type registry: type keys, type indices (fixed ones below 128, allocated ones from 128),
//! parents for downcasts, and the reflected fields of each type.
//!
//! Entries are created once and never freed, so lookups hand out `&'static` data and the C view
//! of a type (`TVMFFITypeInfo`) stays valid for the life of the process.

use crate::abi::{type_index as ti, ByteArray, RawAny};
use crate::error::{Error, Result};
use crate::reflection::{FieldDesc, TypeDesc};
use crate::sync::RecoverPoison;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{OnceLock, RwLock};

/// `TVMFFIFieldInfo`: one reflected field as C sees it.
#[repr(C)]
pub struct FieldInfoC {
    /// The field's name.
    pub name: ByteArray,
    /// Its documentation (empty in Kiln).
    pub doc: ByteArray,
    /// Metadata as JSON (empty in Kiln).
    pub metadata: ByteArray,
    /// Field flags (0 in Kiln: read-only, no default).
    pub flags: i64,
    /// Size of the field in bytes.
    pub size: i64,
    /// Alignment in bytes.
    pub alignment: i64,
    /// Byte offset from the start of the object (header included).
    pub offset: i64,
    /// Reads the field at a given address into an owned value.
    pub getter: Option<unsafe extern "C" fn(field: *mut c_void, result: *mut RawAny) -> i32>,
    /// Writes the field; NULL in Kiln (fields are read-only through C).
    pub setter: *mut c_void,
    /// Default value or factory; None in Kiln.
    pub default_value_or_factory: RawAny,
    /// The static type index of the field's type.
    pub field_static_type_index: i32,
}

/// `TVMFFITypeInfo`: a registered type as C sees it.
#[repr(C)]
pub struct TypeInfoC {
    /// The type index.
    pub type_index: i32,
    /// Number of ancestors.
    pub type_depth: i32,
    /// The type key.
    pub type_key: ByteArray,
    /// `type_depth` ancestors, from the root down to the parent.
    pub type_ancestors: *const *const TypeInfoC,
    /// Hash of the type key.
    pub type_key_hash: u64,
    /// Number of entries in `fields`.
    pub num_fields: i32,
    /// Number of methods (0 in Kiln).
    pub num_methods: i32,
    /// `num_fields` fields, the parents' first.
    pub fields: *const FieldInfoC,
    /// Methods; NULL in Kiln.
    pub methods: *const c_void,
    /// Extra type metadata; NULL in Kiln.
    pub metadata: *const c_void,
}

/// Everything known about one registered type.
pub struct TypeEntry {
    /// The type index.
    pub index: i32,
    /// The type key.
    pub key: &'static str,
    /// Ancestors from the root (`ffi.Object`) down to the direct parent.
    pub ancestors: Vec<i32>,
    /// Reflected fields, in declaration order (a child's list starts with its parent's).
    pub fields: Vec<FieldDesc>,
    /// Builds an object of this type from field values, when the type supports it.
    pub desc: Option<&'static TypeDesc>,
    /// The same type as C sees it (what `TVMFFIGetTypeInfo` returns).
    pub c_info: TypeInfoC,
}

// SAFETY: the raw pointers inside point to leaked, immutable data.
unsafe impl Send for TypeEntry {}
// SAFETY: as for Send.
unsafe impl Sync for TypeEntry {}

struct Registry {
    by_index: Vec<Option<&'static TypeEntry>>,
    by_key: HashMap<&'static str, i32>,
    next_dynamic: i32,
}

fn registry() -> &'static RwLock<Registry> {
    static REG: OnceLock<RwLock<Registry>> = OnceLock::new();
    REG.get_or_init(|| {
        let reg = RwLock::new(Registry {
            by_index: Vec::new(),
            by_key: HashMap::new(),
            next_dynamic: ti::DYN_OBJECT_BEGIN,
        });
        {
            let mut r = reg.write().recover();
            let plain = [
                (ti::NONE, "None"),
                (ti::INT, "int"),
                (ti::BOOL, "bool"),
                (ti::FLOAT, "float"),
                (ti::OPAQUE_PTR, "void*"),
                (ti::DATA_TYPE, "DataType"),
                (ti::DEVICE, "Device"),
                (ti::DL_TENSOR_PTR, "DLTensor*"),
                (ti::RAW_STR, "const char*"),
                (ti::BYTE_ARRAY_PTR, "TVMFFIByteArray*"),
                (ti::OBJECT_RVALUE_REF, "ObjectRValueRef"),
                (ti::SMALL_STR, "ffi.SmallStr"),
                (ti::SMALL_BYTES, "ffi.SmallBytes"),
            ];
            for (index, key) in plain {
                insert(&mut r, index, key, None, Vec::new(), None);
            }
            insert(&mut r, ti::OBJECT, "ffi.Object", None, Vec::new(), None);
            let objects = [
                (ti::STR, "ffi.String"),
                (ti::BYTES, "ffi.Bytes"),
                (ti::ERROR, "ffi.Error"),
                (ti::FUNCTION, "ffi.Function"),
                (ti::SHAPE, "ffi.Shape"),
                (ti::TENSOR, "ffi.Tensor"),
                (ti::ARRAY, "ffi.Array"),
                (ti::MAP, "ffi.Map"),
                (ti::MODULE, "ffi.Module"),
                (ti::OPAQUE_PY_OBJECT, "ffi.OpaquePyObject"),
                (ti::LIST, "ffi.List"),
                (ti::DICT, "ffi.Dict"),
            ];
            for (index, key) in objects {
                insert(&mut r, index, key, Some(ti::OBJECT), Vec::new(), None);
            }
        }
        reg
    })
}

fn insert(
    r: &mut Registry,
    index: i32,
    key: &'static str,
    parent: Option<i32>,
    fields: Vec<FieldDesc>,
    desc: Option<&'static TypeDesc>,
) -> &'static TypeEntry {
    let mut ancestors = Vec::new();
    if let Some(p) = parent {
        let pe = r.by_index[p as usize].expect("parent type registered first");
        ancestors.extend_from_slice(&pe.ancestors);
        ancestors.push(p);
    }
    let ancestor_infos: Vec<*const TypeInfoC> = ancestors
        .iter()
        .map(|&a| &r.by_index[a as usize].unwrap().c_info as *const TypeInfoC)
        .collect();
    let ancestor_infos: &'static [*const TypeInfoC] = Box::leak(ancestor_infos.into_boxed_slice());
    let field_infos: Vec<FieldInfoC> = fields
        .iter()
        .map(|f| FieldInfoC {
            name: ByteArray::from_slice(f.name.as_bytes()),
            doc: ByteArray::from_slice(b""),
            metadata: ByteArray::from_slice(b""),
            flags: 0,
            size: f.size as i64,
            alignment: f.align as i64,
            offset: f.offset as i64,
            getter: Some(f.c_getter),
            setter: std::ptr::null_mut(),
            default_value_or_factory: RawAny::NONE,
            field_static_type_index: f.static_type_index,
        })
        .collect();
    let field_infos: &'static [FieldInfoC] = Box::leak(field_infos.into_boxed_slice());
    let entry: &'static TypeEntry = Box::leak(Box::new(TypeEntry {
        index,
        key,
        c_info: TypeInfoC {
            type_index: index,
            type_depth: ancestors.len() as i32,
            type_key: ByteArray::from_slice(key.as_bytes()),
            type_ancestors: ancestor_infos.as_ptr(),
            type_key_hash: fnv1a(key.as_bytes()),
            num_fields: field_infos.len() as i32,
            num_methods: 0,
            fields: field_infos.as_ptr(),
            methods: std::ptr::null(),
            metadata: std::ptr::null(),
        },
        ancestors,
        fields,
        desc,
    }));
    if r.by_index.len() <= index as usize {
        r.by_index.resize(index as usize + 1, None);
    }
    r.by_index[index as usize] = Some(entry);
    r.by_key.insert(key, index);
    entry
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Registers every type declared with `#[derive(Object)]` (collected at link time) that is not
/// registered yet, parents before children.
fn register_declared() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let descs: Vec<&'static TypeDesc> = inventory::iter::<TypeDesc>.into_iter().collect();
        for d in &descs {
            register_desc(d, &descs);
        }
    });
}

fn register_desc(d: &'static TypeDesc, all: &[&'static TypeDesc]) -> i32 {
    let (known, known_parent) = {
        let r = registry().read().recover();
        (
            r.by_key.get(d.key).copied(),
            r.by_key.get(d.parent_key).copied(),
        )
    };
    if let Some(i) = known {
        return i;
    }
    // The read lock is released before registering a parent (which takes the write lock).
    let parent = match known_parent {
        Some(p) => p,
        None => match all.iter().find(|p| p.key == d.parent_key) {
            Some(p) => register_desc(p, all),
            None => panic!(
                "type `{}` names an unknown parent `{}`",
                d.key, d.parent_key
            ),
        },
    };
    let mut r = registry().write().recover();
    if let Some(i) = r.by_key.get(d.key) {
        return *i;
    }
    let mut fields = r.by_index[parent as usize].unwrap().fields.clone();
    fields.extend((d.fields)());
    let index = r.next_dynamic;
    r.next_dynamic += 1;
    insert(&mut r, index, d.key, Some(parent), fields, Some(d)).index
}

/// Looks up a registered type by index.
pub fn entry(index: i32) -> Option<&'static TypeEntry> {
    register_declared();
    registry()
        .read()
        .unwrap()
        .by_index
        .get(usize::try_from(index).ok()?)
        .copied()
        .flatten()
}

/// Looks up a type index by key.
pub fn index_of_key(key: &str) -> Option<i32> {
    register_declared();
    registry().read().recover().by_key.get(key).copied()
}

/// The type key for an index; unknown indices print as `<type N>`.
pub fn type_key_of(index: i32) -> String {
    entry(index)
        .map(|e| e.key.to_string())
        .unwrap_or_else(|| format!("<type {index}>"))
}

/// Registers an object type at run time (the C ABI's `TVMFFITypeGetOrAllocIndex`): returns the
/// existing index when the key is known.
pub fn get_or_alloc_index(key: &str, parent: i32) -> Result<i32> {
    if let Some(i) = index_of_key(key) {
        return Ok(i);
    }
    let mut r = registry().write().recover();
    if let Some(i) = r.by_key.get(key) {
        return Ok(*i);
    }
    if r.by_index.get(parent as usize).copied().flatten().is_none() || parent < ti::OBJECT {
        return Err(Error::value_error(format!(
            "cannot register type `{key}`: unknown parent type index {parent}"
        )));
    }
    let fields = r.by_index[parent as usize].unwrap().fields.clone();
    let key: &'static str = Box::leak(key.to_string().into_boxed_str());
    let index = r.next_dynamic;
    r.next_dynamic += 1;
    Ok(insert(&mut r, index, key, Some(parent), fields, None).index)
}

/// True when an object of type `index` is a `target` (itself or a descendant).
#[inline]
pub fn is_instance(index: i32, target: i32) -> bool {
    if index == target || target == ti::OBJECT {
        return index >= ti::OBJECT;
    }
    match entry(index) {
        Some(e) => e.ancestors.contains(&target),
        None => false,
    }
}
