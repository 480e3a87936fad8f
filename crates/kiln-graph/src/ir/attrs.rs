//! Call attributes: an `ffi.Map` of name -> value (ints, floats, bools, strings, int lists),
//! with typed accessors. Op constructors complete the map with the op's defaults (see
//! [`crate::op::AttrSpec`]), so accessors on a built call find every declared attribute.

use kiln_ffi::{Any, AnyView, Array, Error, Map, Result};

/// An attribute value when building a call.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A string.
    Str(String),
    /// A list of integers.
    Ints(Vec<i64>),
    /// No value (an optional attribute left unset).
    None,
}

impl AttrValue {
    /// As an FFI value.
    pub fn to_any(&self) -> Any {
        match self {
            AttrValue::Int(v) => Any::from(*v),
            AttrValue::Float(v) => Any::from(*v),
            AttrValue::Bool(v) => Any::from(*v),
            AttrValue::Str(s) => Any::from(s.as_str()),
            AttrValue::Ints(v) => Array::new(v.iter().map(|x| Any::from(*x)).collect()).into(),
            AttrValue::None => Any::none(),
        }
    }
}

impl From<i64> for AttrValue {
    fn from(v: i64) -> Self {
        AttrValue::Int(v)
    }
}
impl From<f64> for AttrValue {
    fn from(v: f64) -> Self {
        AttrValue::Float(v)
    }
}
impl From<bool> for AttrValue {
    fn from(v: bool) -> Self {
        AttrValue::Bool(v)
    }
}
impl From<&str> for AttrValue {
    fn from(v: &str) -> Self {
        AttrValue::Str(v.into())
    }
}
impl From<Vec<i64>> for AttrValue {
    fn from(v: Vec<i64>) -> Self {
        AttrValue::Ints(v)
    }
}
impl<const N: usize> From<[i64; N]> for AttrValue {
    fn from(v: [i64; N]) -> Self {
        AttrValue::Ints(v.to_vec())
    }
}

/// A typed view of a call's attribute map.
#[derive(Clone, Copy)]
pub struct Attrs<'a> {
    map: Option<&'a Map>,
}

impl<'a> Attrs<'a> {
    /// A view of `map`.
    pub fn new(map: &'a Map) -> Self {
        Attrs { map: Some(map) }
    }

    /// No attributes.
    pub fn empty() -> Self {
        Attrs { map: None }
    }

    /// The raw value.
    pub fn get(&self, name: &str) -> Option<AnyView<'a>> {
        self.map?.get(name).filter(|v| !v.is_none())
    }

    fn missing(name: &str) -> Error {
        Error::value_error(format!("attribute `{name}` is missing"))
    }

    /// An integer attribute (bools read as 0/1).
    pub fn int(&self, name: &str) -> Result<i64> {
        let v = self.get(name).ok_or_else(|| Self::missing(name))?;
        v.try_as::<i64>()
            .or_else(|_| v.try_as::<bool>().map(i64::from))
            .map_err(|_| Error::type_error(format!("attribute `{name}` must be an int")))
    }

    /// A float attribute (ints convert).
    pub fn float(&self, name: &str) -> Result<f64> {
        let v = self.get(name).ok_or_else(|| Self::missing(name))?;
        v.try_as::<f64>()
            .or_else(|_| v.try_as::<i64>().map(|x| x as f64))
            .map_err(|_| Error::type_error(format!("attribute `{name}` must be a float")))
    }

    /// A bool attribute (ints convert).
    pub fn bool(&self, name: &str) -> Result<bool> {
        let v = self.get(name).ok_or_else(|| Self::missing(name))?;
        v.try_as::<bool>()
            .or_else(|_| v.try_as::<i64>().map(|x| x != 0))
            .map_err(|_| Error::type_error(format!("attribute `{name}` must be a bool")))
    }

    /// A string attribute.
    pub fn str(&self, name: &str) -> Result<String> {
        let v = self.get(name).ok_or_else(|| Self::missing(name))?;
        v.try_as::<String>()
            .map_err(|_| Error::type_error(format!("attribute `{name}` must be a string")))
    }

    /// An int-list attribute (a single int reads as a one-element list).
    pub fn ints(&self, name: &str) -> Result<Vec<i64>> {
        let v = self.get(name).ok_or_else(|| Self::missing(name))?;
        if let Ok(x) = v.try_as::<i64>() {
            return Ok(vec![x]);
        }
        v.try_as::<Array>()
            .and_then(|a| a.to_vec::<i64>())
            .map_err(|_| Error::type_error(format!("attribute `{name}` must be a list of ints")))
    }

    /// An optional int-list attribute (`None` when unset).
    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        match self.get(name) {
            None => Ok(None),
            Some(_) => self.ints(name).map(Some),
        }
    }

    /// An optional float attribute (`None` when unset).
    pub fn opt_float(&self, name: &str) -> Result<Option<f64>> {
        match self.get(name) {
            None => Ok(None),
            Some(_) => self.float(name).map(Some),
        }
    }

    /// An optional int attribute (`None` when unset).
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        match self.get(name) {
            None => Ok(None),
            Some(_) => self.int(name).map(Some),
        }
    }

    /// Entries in order (names and values), `None` values skipped.
    pub fn entries(&self) -> Vec<(String, AnyView<'a>)> {
        match self.map {
            None => Vec::new(),
            Some(m) => m
                .iter()
                .filter(|(_, v)| !v.is_none())
                .filter_map(|(k, v)| Some((k.try_as::<String>().ok()?, v)))
                .collect(),
        }
    }
}

/// Relay-like text for an attribute value: `1`, `1f`, `True`, `"NCHW"`, `[1, 1]`.
pub fn fmt_value(v: &AnyView<'_>) -> String {
    if v.is_none() {
        return "None".into();
    }
    if let Ok(b) = v.try_as::<bool>() {
        if v.type_name() == "bool" {
            return if b { "True".into() } else { "False".into() };
        }
    }
    if let Ok(i) = v.try_as::<i64>() {
        return i.to_string();
    }
    if let Ok(f) = v.try_as::<f64>() {
        return format!("{f}f");
    }
    if let Ok(s) = v.try_as::<String>() {
        return format!("\"{s}\"");
    }
    if let Ok(a) = v.try_as::<Array>() {
        let items: Vec<String> = a.iter().map(|x| fmt_value(&x)).collect();
        return format!("[{}]", items.join(", "));
    }
    format!("<{}>", v.type_name())
}

/// Structural equality of two attribute maps (same names, values equal as text).
pub fn attrs_equal(a: &Map, b: &Map) -> bool {
    let (ea, eb) = (Attrs::new(a).entries(), Attrs::new(b).entries());
    ea.len() == eb.len()
        && ea.iter().all(|(k, v)| {
            eb.iter()
                .any(|(k2, v2)| k == k2 && fmt_value(v) == fmt_value(v2))
        })
}

/// A map from `(name, value)` pairs.
pub fn make_map(pairs: &[(&str, AttrValue)]) -> Map {
    Map::new(
        pairs
            .iter()
            .map(|(k, v)| (Any::from(*k), v.to_any()))
            .collect::<Vec<_>>(),
    )
}

/// `map` with attribute `name` set to `value` (replaced when present, appended otherwise).
pub fn with_attr(map: &Map, name: &str, value: AttrValue) -> Map {
    let mut pairs: Vec<(Any, Any)> = Vec::new();
    let mut replaced = false;
    for (k, v) in map.iter() {
        if k.try_as::<String>().is_ok_and(|s| s == name) {
            pairs.push((Any::from(name), value.to_any()));
            replaced = true;
        } else {
            pairs.push((k.to_owned(), v.to_owned()));
        }
    }
    if !replaced {
        pairs.push((Any::from(name), value.to_any()));
    }
    Map::new(pairs)
}
