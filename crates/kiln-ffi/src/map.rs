//! `ffi.Map`: an immutable map from values to values that keeps insertion order.
//!
//! Keys compare as TVM-FFI compares them: plain values by value, strings and bytes by content
//! (small or object form alike), other objects by identity. The layout after the header is
//! Kiln's own; C and Python reach maps through the `ffi.Map*` global functions.

use crate::abi::type_index as ti;
use crate::any::{Any, AnyView};
use crate::error::{Error, Result};
use crate::object::{ObjectRef, ObjectType};
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Payload of a map object.
pub struct MapObj {
    entries: Vec<(Any, Any)>,
    index: HashMap<AnyKey, usize>,
}

// SAFETY: the payload layout is Kiln's own (see the module documentation): only Kiln code reads
// it, C and Python go through the ffi.Map* functions.
unsafe impl ObjectType for MapObj {
    const TYPE_KEY: &'static str = "ffi.Map";
    fn type_index() -> i32 {
        ti::MAP
    }
}

/// A value used as a hash key.
pub struct AnyKey(pub Any);

impl AnyKey {
    fn content<'a>(v: &AnyView<'a>) -> Option<(u8, &'a [u8])> {
        if let Some(b) = v.str_bytes() {
            return Some((0, b));
        }
        v.bytes_bytes().map(|b| (1, b))
    }

    /// Equality of two values under the key rules.
    pub fn eq_views(a: &AnyView<'_>, b: &AnyView<'_>) -> bool {
        match (Self::content(a), Self::content(b)) {
            (Some(x), Some(y)) => x == y,
            (None, None) => {
                let (ra, rb) = (a.raw(), b.raw());
                // SAFETY: comparing the 8 payload bytes is how TVM-FFI compares plain values and
                // object identities; floats compare by bits except that 0.0 == -0.0 does not hold.
                ra.type_index == rb.type_index && unsafe { ra.value.v_uint64 == rb.value.v_uint64 }
            }
            _ => false,
        }
    }
}

impl PartialEq for AnyKey {
    fn eq(&self, other: &Self) -> bool {
        AnyKey::eq_views(&self.0.view(), &other.0.view())
    }
}
impl Eq for AnyKey {}

impl Hash for AnyKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let v = self.0.view();
        match AnyKey::content(&v) {
            Some(c) => c.hash(state),
            None => {
                let r = v.raw();
                r.type_index.hash(state);
                // SAFETY: see eq_views.
                unsafe { r.value.v_uint64 }.hash(state);
            }
        }
    }
}

/// A map from values to values.
#[derive(Clone, crate::ObjectRef)]
pub struct Map(pub ObjectRef<MapObj>);

impl Map {
    /// Builds a map; a later duplicate key replaces the earlier value.
    pub fn new(pairs: impl IntoIterator<Item = (Any, Any)>) -> Self {
        let mut entries: Vec<(Any, Any)> = Vec::new();
        let mut index: HashMap<AnyKey, usize> = HashMap::new();
        for (k, v) in pairs {
            let key = AnyKey(k.clone());
            match index.get(&key) {
                Some(&i) => entries[i].1 = v,
                None => {
                    index.insert(key, entries.len());
                    entries.push((k, v));
                }
            }
        }
        Map(ObjectRef::new(MapObj { entries, index }))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.entries.is_empty()
    }

    /// The value for `key`, if present.
    pub fn get(&self, key: impl Into<Any>) -> Option<AnyView<'_>> {
        self.0
            .index
            .get(&AnyKey(key.into()))
            .map(|&i| self.0.entries[i].1.view())
    }

    /// The value for `key`, or a `KeyError`.
    pub fn at(&self, key: impl Into<Any>) -> Result<AnyView<'_>> {
        let key = key.into();
        let shown = format!("{key:?}");
        self.get(key)
            .ok_or_else(|| Error::key_error(format!("key {shown} not in map")))
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (AnyView<'_>, AnyView<'_>)> {
        self.0.entries.iter().map(|(k, v)| (k.view(), v.view()))
    }
}

impl<K: Into<Any>, V: Into<Any>> FromIterator<(K, V)> for Map {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Map::new(iter.into_iter().map(|(k, v)| (k.into(), v.into())))
    }
}

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_object_strings_are_the_same_key() {
        let m: Map = vec![
            (Any::from("a key longer than 7"), Any::from(1i64)),
            (Any::from("k"), Any::from(2i64)),
        ]
        .into_iter()
        .collect();
        let long = crate::string::Str::new("a key longer than 7");
        assert_eq!(m.get(long).unwrap().try_as::<i64>().unwrap(), 1);
        assert_eq!(
            m.get(crate::string::Str::new("k"))
                .unwrap()
                .try_as::<i64>()
                .unwrap(),
            2
        );
        assert!(m.get("missing").is_none());
        assert_eq!(m.at("missing").unwrap_err().kind(), "KeyError");
    }
}
