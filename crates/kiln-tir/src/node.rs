//! Typed containers for node fields ([`NodeList`], [`NodeMap`], [`IrString`]) and the small amount of unsafe
//! glue that lets a handle read its node's concrete payload after checking its type index.
//!
//! Fields of IR nodes must be reflection values (`Clone + Into<Any> + TryFromAny`). A plain
//! `kiln_ffi::Array` would do, but passes want `&[PrimExpr]`, not a list of `Any`s to convert on
//! every read; so lists are kept as Rust vectors and only become `ffi.Array` / `ffi.Map` when
//! C, Python or JSON read the field.

use kiln_ffi::{Any, AnyView, Array, Map, ObjectRef, ObjectType, Str, TryFromAny};
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// An immutable list of IR values in a node field; `ffi.Array` for C, Python and JSON.
///
/// Cloning is cheap (shared). The `ffi.Array` form is built on first read from C, Python or
/// JSON and then kept, so every read hands out the same object (serializers that recognise
/// shared objects by address rely on that).
pub struct NodeList<T>(Arc<ListInner<T>>);

struct ListInner<T> {
    items: Vec<T>,
    ffi: OnceLock<Array>,
}

impl<T> NodeList<T> {
    /// Wraps items.
    pub fn new(items: Vec<T>) -> Self {
        NodeList(Arc::new(ListInner {
            items,
            ffi: OnceLock::new(),
        }))
    }

    /// An empty list.
    pub fn empty() -> Self {
        NodeList::new(Vec::new())
    }

    /// The items.
    pub fn as_slice(&self) -> &[T] {
        &self.0.items
    }

    /// The items as a vector.
    pub fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.0.items.clone()
    }
}

impl<T> Clone for NodeList<T> {
    fn clone(&self) -> Self {
        NodeList(self.0.clone())
    }
}

impl<T> Default for NodeList<T> {
    fn default() -> Self {
        NodeList::empty()
    }
}

impl<T> Deref for NodeList<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0.items
    }
}

impl<T> From<Vec<T>> for NodeList<T> {
    fn from(v: Vec<T>) -> Self {
        NodeList::new(v)
    }
}

impl<T> FromIterator<T> for NodeList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        NodeList::new(iter.into_iter().collect())
    }
}

impl<'a, T> IntoIterator for &'a NodeList<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.items.iter()
    }
}

impl<T: fmt::Debug> fmt::Debug for NodeList<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.items.iter()).finish()
    }
}

impl<T: Clone + Into<Any>> From<NodeList<T>> for Any {
    fn from(l: NodeList<T>) -> Any {
        l.0.ffi
            .get_or_init(|| Array::new(l.0.items.iter().cloned().map(Into::into).collect()))
            .clone()
            .into()
    }
}

impl<T: TryFromAny> TryFromAny for NodeList<T> {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        let a = Array::try_from_view(v)?;
        let items = a
            .iter()
            .map(|x| T::try_from_view(&x))
            .collect::<Option<Vec<T>>>()?;
        Some(NodeList::new(items))
    }
    fn type_name() -> String {
        format!("Array[{}]", T::type_name())
    }
}

/// An immutable, insertion-ordered map of IR values in a node field; `ffi.Map` for C, Python and
/// JSON (built once, as for [`NodeList`]). Lookups compare keys with `PartialEq` (identity for
/// variables and buffers).
pub struct NodeMap<K, V>(Arc<MapInner<K, V>>);

struct MapInner<K, V> {
    pairs: Vec<(K, V)>,
    ffi: OnceLock<Map>,
}

impl<K, V> NodeMap<K, V> {
    /// Wraps pairs (a later duplicate key is kept as given; use [`NodeMap::insert`] to replace).
    pub fn new(pairs: Vec<(K, V)>) -> Self {
        NodeMap(Arc::new(MapInner {
            pairs,
            ffi: OnceLock::new(),
        }))
    }

    /// An empty map.
    pub fn empty() -> Self {
        NodeMap::new(Vec::new())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.pairs.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.pairs.is_empty()
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.pairs.iter().map(|(k, v)| (k, v))
    }

    /// The entries.
    pub fn entries(&self) -> &[(K, V)] {
        &self.0.pairs
    }

    /// The value for `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: PartialEq<Q>,
        Q: ?Sized,
    {
        self.0.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A copy with `key` set to `value` (replacing an existing entry in place).
    pub fn insert(&self, key: K, value: V) -> Self
    where
        K: Clone + PartialEq,
        V: Clone,
    {
        let mut pairs = self.0.pairs.clone();
        match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => pairs.push((key, value)),
        }
        NodeMap::new(pairs)
    }
}

impl<K, V> Clone for NodeMap<K, V> {
    fn clone(&self) -> Self {
        NodeMap(self.0.clone())
    }
}

impl<K, V> Default for NodeMap<K, V> {
    fn default() -> Self {
        NodeMap::empty()
    }
}

impl<K, V> FromIterator<(K, V)> for NodeMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        NodeMap::new(iter.into_iter().collect())
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for NodeMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.pairs.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

impl<K: Clone + Into<Any>, V: Clone + Into<Any>> From<NodeMap<K, V>> for Any {
    fn from(m: NodeMap<K, V>) -> Any {
        m.0.ffi
            .get_or_init(|| {
                Map::new(
                    m.0.pairs
                        .iter()
                        .map(|(k, v)| (k.clone().into(), v.clone().into())),
                )
            })
            .clone()
            .into()
    }
}

impl<K: TryFromAny, V: TryFromAny> TryFromAny for NodeMap<K, V> {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        let m = Map::try_from_view(v)?;
        let pairs = m
            .iter()
            .map(|(k, x)| Some((K::try_from_view(&k)?, V::try_from_view(&x)?)))
            .collect::<Option<Vec<_>>>()?;
        Some(NodeMap::new(pairs))
    }
    fn type_name() -> String {
        format!("Map[{}, {}]", K::type_name(), V::type_name())
    }
}

/// An immutable string in a node field, kept as an `ffi.String` object so that reflection hands
/// out the same object on every read (a plain `String` field would make a new one each time).
#[derive(Clone, ObjectRef)]
pub struct IrString(Str);

impl IrString {
    /// Makes a string.
    pub fn new(s: &str) -> Self {
        IrString(Str::new(s))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.0.as_bytes()).unwrap_or("<invalid utf-8>")
    }
}

impl Deref for IrString {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for IrString {
    fn from(s: &str) -> Self {
        IrString::new(s)
    }
}

impl From<String> for IrString {
    fn from(s: String) -> Self {
        IrString::new(&s)
    }
}

impl PartialEq for IrString {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_bytes() == other.0.as_bytes()
    }
}
impl Eq for IrString {}

impl PartialEq<str> for IrString {
    fn eq(&self, other: &str) -> bool {
        self.0.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for IrString {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_bytes() == other.as_bytes()
    }
}

impl std::hash::Hash for IrString {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl fmt::Display for IrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for IrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Reads the payload of `r` as the concrete node type `T`.
///
/// # Safety
/// The object must have been allocated with a payload whose layout starts with `T` (its type is
/// `T` or a `#[repr(C)]` descendant whose first field is `T`).
#[inline]
pub(crate) unsafe fn payload<T, U: ObjectType>(r: &ObjectRef<U>) -> &T {
    // SAFETY: the caller guarantees the payload starts with a `T`; it lives as long as `r`.
    unsafe { &*(r.payload_ptr() as *const T) }
}

/// Re-views a reference to a child type as one to its parent.
///
/// # Safety
/// `C`'s layout must start with `P` (`#[repr(C)]`, `P` as first field, transitively).
#[inline]
pub(crate) unsafe fn upcast_ref<P: ObjectType, C: ObjectType>(r: ObjectRef<C>) -> ObjectRef<P> {
    // SAFETY: into_raw hands over `r`'s reference; the caller guarantees `C` starts with `P`.
    unsafe { ObjectRef::from_raw(r.into_raw()) }
}

/// A lookup table from type index to a small tag, built once after all IR types are registered.
pub(crate) struct TagTable<K: Copy>(Vec<Option<K>>);

impl<K: Copy> TagTable<K> {
    /// Builds the table from `(type index, tag)` pairs.
    pub(crate) fn build(entries: Vec<(i32, K)>) -> Self {
        let size = entries
            .iter()
            .map(|(i, _)| *i as usize + 1)
            .max()
            .unwrap_or(0);
        let mut table = vec![None; size];
        for (i, k) in entries {
            table[i as usize] = Some(k);
        }
        TagTable(table)
    }

    /// The tag of a type index, if it is one of the table's types.
    #[inline]
    pub(crate) fn get(&self, index: i32) -> Option<K> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.0.get(i).copied().flatten())
    }
}

/// Hashes an object by identity.
pub(crate) fn ptr_key<T: ObjectType>(r: &ObjectRef<T>) -> usize {
    r.as_ptr().as_ptr() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_maps_convert_through_any() {
        let l: NodeList<i64> = vec![1, 2, 3].into();
        let any: Any = l.clone().into();
        let back = any.try_as::<NodeList<i64>>().unwrap();
        assert_eq!(back.as_slice(), &[1, 2, 3]);
        let m: NodeMap<String, i64> = vec![("a".to_string(), 1), ("b".to_string(), 2)]
            .into_iter()
            .collect();
        let m2 = m.insert("a".into(), 5);
        assert_eq!(m2.get("a"), Some(&5));
        let any: Any = m2.into();
        let back = any.try_as::<NodeMap<String, i64>>().unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back.get("b"), Some(&2));
        assert_eq!(NodeList::<i64>::type_name(), "Array[int]");
    }
}
