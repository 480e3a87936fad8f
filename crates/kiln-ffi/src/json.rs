//! Serializing values and object graphs to JSON and back.
//!
//! The document is `{"root": i, "nodes": [...]}`; each node is one value, objects refer to other
//! nodes by index, and an object reached twice is written once, so sharing survives the round
//! trip. Children always come before their parents.
//!
//! Node forms: `{"type": "None"}`, `{"type": "int", "v": 1}`, `{"type": "bool", "v": true}`,
//! `{"type": "float", "v": 1.5}` (or `"nan"`, `"inf"`, `"-inf"`), `{"type": "str", "v": "..."}`,
//! `{"type": "bytes", "hex": "00ff"}`, `{"type": "DataType", "v": "float32"}`,
//! `{"type": "Device", "v": [1, 0]}`, `{"type": "ffi.Shape", "v": [2, 3]}`,
//! `{"type": "ffi.Array", "items": [i, ...]}`, `{"type": "ffi.Map", "items": [[k, v], ...]}`,
//! and for reflected objects `{"type": "<type key>", "fields": {"name": i, ...}}`.

use crate::abi::type_index as ti;
use crate::any::{Any, AnyView, TryFromAny};
use crate::array::Array;
use crate::error::{Error, Result};
use crate::map::Map;
use crate::object::{Object, ObjectRef};
use crate::reflection::{create_object, field_names, get_field_by_name};
use crate::shape::Shape;
use crate::{DataType, Device};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Serializes a value (and everything it refers to) to a JSON string.
pub fn to_json(v: &AnyView<'_>) -> Result<String> {
    let mut w = Writer {
        nodes: Vec::new(),
        seen: HashMap::new(),
        keep: Vec::new(),
    };
    let root = w.node(v)?;
    Ok(json!({"root": root, "nodes": w.nodes}).to_string())
}

struct Writer {
    nodes: Vec<Value>,
    /// Node index of each object already written, by address.
    seen: HashMap<usize, usize>,
    /// Every object written, kept alive until the end: field getters may return temporaries,
    /// and a freed temporary's address could otherwise be reused by a later, different object.
    keep: Vec<Any>,
}

impl Writer {
    fn push(&mut self, v: Value) -> usize {
        self.nodes.push(v);
        self.nodes.len() - 1
    }

    fn node(&mut self, v: &AnyView<'_>) -> Result<usize> {
        if let Some(obj) = v.object_ptr() {
            if let Some(&i) = self.seen.get(&(obj.as_ptr() as usize)) {
                return Ok(i);
            }
        }
        let node = self.encode(v)?;
        let i = self.push(node);
        if let Some(obj) = v.object_ptr() {
            self.seen.insert(obj.as_ptr() as usize, i);
            self.keep.push(v.to_owned());
        }
        Ok(i)
    }

    fn encode(&mut self, v: &AnyView<'_>) -> Result<Value> {
        if let Some(b) = v.str_bytes() {
            return Ok(json!({"type": "str", "v": String::from_utf8_lossy(b)}));
        }
        if let Some(b) = v.bytes_bytes() {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            return Ok(json!({"type": "bytes", "hex": hex}));
        }
        Ok(match v.type_index() {
            ti::NONE => json!({"type": "None"}),
            ti::INT => json!({"type": "int", "v": v.try_as::<i64>()?}),
            ti::BOOL => json!({"type": "bool", "v": v.try_as::<bool>()?}),
            ti::FLOAT => {
                let x = v.try_as::<f64>()?;
                let val = if x.is_nan() {
                    json!("nan")
                } else if x.is_infinite() {
                    json!(if x > 0.0 { "inf" } else { "-inf" })
                } else {
                    json!(x)
                };
                json!({"type": "float", "v": val})
            }
            ti::DATA_TYPE => json!({"type": "DataType", "v": v.try_as::<DataType>()?.to_string()}),
            ti::DEVICE => {
                let d = v.try_as::<Device>()?;
                json!({"type": "Device", "v": [d.device_type(), d.device_id()]})
            }
            ti::SHAPE => {
                json!({"type": "ffi.Shape", "v": Shape::try_from_view(v).unwrap().as_slice()})
            }
            ti::ARRAY => {
                let a = Array::try_from_view(v).unwrap();
                let items = a
                    .iter()
                    .map(|x| self.node(&x))
                    .collect::<Result<Vec<_>>>()?;
                json!({"type": "ffi.Array", "items": items})
            }
            ti::MAP => {
                let m = Map::try_from_view(v).unwrap();
                let items = m
                    .iter()
                    .map(|(k, x)| Ok(vec![self.node(&k)?, self.node(&x)?]))
                    .collect::<Result<Vec<_>>>()?;
                json!({"type": "ffi.Map", "items": items})
            }
            _ => {
                let obj = ObjectRef::<Object>::try_from_view(v).ok_or_else(|| {
                    Error::type_error(format!(
                        "cannot serialize a `{}` value to JSON",
                        v.type_name()
                    ))
                })?;
                let names = field_names(&obj);
                if names.is_empty()
                    && crate::type_registry::entry(obj.type_index())
                        .and_then(|e| e.desc)
                        .is_none()
                {
                    return Err(Error::type_error(format!(
                        "cannot serialize `{}` to JSON: the type declares no reflected fields",
                        obj.type_key()
                    )));
                }
                let mut fields = serde_json::Map::new();
                for n in names {
                    let f = get_field_by_name(&obj, n)?;
                    fields.insert(n.to_string(), json!(self.node(&f.view())?));
                }
                json!({"type": obj.type_key(), "fields": fields})
            }
        })
    }
}

/// Rebuilds a value from [`to_json`]'s output; errors name the node index and what was wrong.
pub fn from_json(text: &str) -> Result<Any> {
    let doc: Value =
        serde_json::from_str(text).map_err(|e| Error::value_error(format!("invalid JSON: {e}")))?;
    let nodes = doc
        .get("nodes")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::value_error("JSON graph has no `nodes` array"))?;
    let root = doc
        .get("root")
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::value_error("JSON graph has no integer `root`"))?
        as usize;
    let mut built: Vec<Any> = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let v = decode(node, &built).map_err(|e| e.context(format!("JSON node {i}")))?;
        built.push(v);
    }
    built.get(root).cloned().ok_or_else(|| {
        Error::value_error(format!(
            "JSON root {root} is out of range ({} nodes)",
            built.len()
        ))
    })
}

fn decode(node: &Value, built: &[Any]) -> Result<Any> {
    let bad = |what: &str| Error::value_error(format!("malformed node: {what}"));
    let ty = node
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no `type`"))?;
    let v = node.get("v");
    let child = |x: &Value| -> Result<Any> {
        let i = x
            .as_u64()
            .ok_or_else(|| bad("child reference is not an index"))? as usize;
        built
            .get(i)
            .cloned()
            .ok_or_else(|| bad(&format!("child {i} is not defined before its parent")))
    };
    Ok(match ty {
        "None" => Any::none(),
        "int" => v
            .and_then(Value::as_i64)
            .ok_or_else(|| bad("int without integer `v`"))?
            .into(),
        "bool" => v
            .and_then(Value::as_bool)
            .ok_or_else(|| bad("bool without boolean `v`"))?
            .into(),
        "float" => match v {
            Some(Value::String(s)) if s == "nan" => f64::NAN.into(),
            Some(Value::String(s)) if s == "inf" => f64::INFINITY.into(),
            Some(Value::String(s)) if s == "-inf" => f64::NEG_INFINITY.into(),
            Some(x) => x
                .as_f64()
                .ok_or_else(|| bad("float without number `v`"))?
                .into(),
            None => return Err(bad("float without `v`")),
        },
        "str" => v
            .and_then(Value::as_str)
            .ok_or_else(|| bad("str without string `v`"))?
            .into(),
        "bytes" => {
            let hex = node
                .get("hex")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("bytes without `hex`"))?;
            if hex.len() % 2 != 0 {
                return Err(bad("odd-length hex"));
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| {
                    u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| bad("invalid hex digit"))
                })
                .collect::<Result<Vec<u8>>>()?;
            bytes.into()
        }
        "DataType" => v
            .and_then(Value::as_str)
            .ok_or_else(|| bad("DataType without `v`"))?
            .parse::<DataType>()?
            .into(),
        "Device" => {
            let pair = v
                .and_then(Value::as_array)
                .filter(|a| a.len() == 2)
                .ok_or_else(|| bad("Device needs [type, id]"))?;
            let t = pair[0]
                .as_i64()
                .and_then(|x| i32::try_from(x).ok())
                .ok_or_else(|| bad("device type"))?;
            let id = pair[1]
                .as_i64()
                .and_then(|x| i32::try_from(x).ok())
                .ok_or_else(|| bad("device id"))?;
            Device::new(t, id).into()
        }
        "ffi.Shape" => {
            let dims = v
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Shape without `v`"))?;
            let dims = dims
                .iter()
                .map(|d| d.as_i64().ok_or_else(|| bad("shape dimension")))
                .collect::<Result<Vec<_>>>()?;
            Shape::new(&dims).into()
        }
        "ffi.Array" => {
            let items = node
                .get("items")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Array without `items`"))?;
            Array::new(items.iter().map(child).collect::<Result<Vec<_>>>()?).into()
        }
        "ffi.Map" => {
            let items = node
                .get("items")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("Map without `items`"))?;
            let pairs = items
                .iter()
                .map(|p| match p.as_array().map(Vec::as_slice) {
                    Some([k, x]) => Ok((child(k)?, child(x)?)),
                    _ => Err(bad("map item is not a [key, value] pair")),
                })
                .collect::<Result<Vec<_>>>()?;
            Map::new(pairs).into()
        }
        key => {
            let fields = node
                .get("fields")
                .and_then(Value::as_object)
                .ok_or_else(|| bad("object without `fields`"))?;
            let values = fields
                .iter()
                .map(|(n, x)| Ok((n.clone(), child(x)?)))
                .collect::<Result<Vec<_>>>()?;
            create_object(key, values)?
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_round_trip_with_sharing() {
        let shared = Array::new(vec![
            Any::from(1i64),
            Any::from("a string longer than seven"),
        ]);
        let m: Map = vec![
            (Any::from("a"), Any::from(shared.clone())),
            (Any::from("b"), Any::from(shared)),
        ]
        .into_iter()
        .collect();
        let top = Array::new(vec![
            Any::from(m),
            Any::from(f64::NAN),
            Any::from(vec![0u8, 255]),
            Any::from("float16x2".parse::<DataType>().unwrap()),
            Any::from(Device::cpu(0)),
            Any::from(Shape::new(&[2, 3])),
            Any::none(),
            Any::from(false),
        ]);
        let text = to_json(&Any::from(top.clone()).view()).unwrap();
        let back = from_json(&text).unwrap();
        let back = back.try_as::<Array>().unwrap();
        let m2 = back.get(0).unwrap().try_as::<Map>().unwrap();
        let (a, b) = (
            m2.at("a").unwrap().to_owned(),
            m2.at("b").unwrap().to_owned(),
        );
        assert!(
            a.try_as::<Array>()
                .unwrap()
                .0
                .same_as(&b.try_as::<Array>().unwrap().0),
            "sharing kept"
        );
        assert!(back.get(1).unwrap().try_as::<f64>().unwrap().is_nan());
        assert_eq!(
            back.get(2).unwrap().try_as::<Vec<u8>>().unwrap(),
            vec![0, 255]
        );
        // Everything but the NaN compares structurally.
        let strip = |a: &Array| {
            Array::new(
                a.iter()
                    .enumerate()
                    .filter(|(i, _)| *i != 1)
                    .map(|(_, v)| v.to_owned())
                    .collect(),
            )
        };
        assert!(crate::reflection::structural_equal(
            &Any::from(strip(&top)).view(),
            &Any::from(strip(&back)).view()
        ));
    }

    #[test]
    fn bad_documents_name_the_node() {
        let e = from_json(r#"{"root": 0, "nodes": [{"type": "ffi.Array", "items": [3]}]}"#)
            .unwrap_err();
        assert!(e.message().contains("JSON node 0"), "{}", e.message());
        assert!(from_json("not json").is_err());
        let e = from_json(r#"{"root": 0, "nodes": [{"type": "no.such.Type", "fields": {}}]}"#)
            .unwrap_err();
        assert!(
            e.message().contains("unknown object type `no.such.Type`"),
            "{}",
            e.message()
        );
    }
}
