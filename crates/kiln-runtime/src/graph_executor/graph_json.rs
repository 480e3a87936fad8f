//! TVM's graph JSON: what the graph executor runs.
//!
//! ```json
//! {
//!   "nodes": [
//!     {"op": "null", "name": "x", "inputs": []},
//!     {"op": "tvm_op", "name": "fused_relu", "inputs": [[0, 0, 0]],
//!      "attrs": {"func_name": "relu", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}}
//!   ],
//!   "arg_nodes": [0],
//!   "heads": [[1, 0, 0]],
//!   "node_row_ptr": [0, 1, 2],
//!   "attrs": {
//!     "shape": ["list_shape", [[4, 8], [4, 8]]],
//!     "dltype": ["list_str", ["float32", "float32"]],
//!     "storage_id": ["list_int", [0, 1]],
//!     "device_index": ["list_int", [1, 1]]
//!   }
//! }
//! ```
//!
//! Nodes are in topological order; `null` nodes are graph inputs (`arg_nodes` lists them) and
//! `tvm_op` nodes call the library function `func_name` with their inputs, then their outputs,
//! as `DLTensor*` arguments (`__nop` does nothing, `__copy` copies its input to its output).
//! Node `i` has outputs (entries) `node_row_ptr[i]..node_row_ptr[i + 1]`; an input `[node, index,
//! version]` is entry `node_row_ptr[node] + index`. The `attrs` lists are indexed by entry:
//! entries with one `storage_id` share memory (the compiler's plan), `device_index` (optional)
//! holds DLPack device types. `device_index` and `storage_scope` are optional; other attributes
//! and unknown keys are ignored.
//!
//! [`Graph::parse`] checks everything the executor relies on; errors are `ValueError`s that name
//! the node (index and name) or the attribute and entry.

use super::json::{self, Json};
use crate::tensor::layout::MAX_NDIM;
use kiln_ffi::{DataType, Error, Result};
use std::fmt::Write as _;

/// The `op` of input nodes.
pub const OP_NULL: &str = "null";
/// The `op` of nodes that call a library function.
pub const OP_TVM: &str = "tvm_op";
/// A `func_name` that does nothing.
pub const FUNC_NOP: &str = "__nop";
/// A `func_name` that copies its input to its output (across devices).
pub const FUNC_COPY: &str = "__copy";

/// One output of a node: `[node_id, index, version]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// The node.
    pub node_id: usize,
    /// Which output of the node.
    pub index: usize,
    /// Version (kept, unused).
    pub version: usize,
}

/// The attributes of a `tvm_op` node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpParam {
    /// The library function to call (or `__nop` / `__copy`).
    pub func_name: String,
    /// Number of inputs (equals `inputs.len()`).
    pub num_inputs: usize,
    /// Number of outputs.
    pub num_outputs: usize,
    /// Pass every argument as a 1-D tensor of its element count.
    pub flatten_data: bool,
}

/// A node of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// `null` (an input) or `tvm_op`.
    pub op: String,
    /// The node's name (input names are how inputs are found).
    pub name: String,
    /// The outputs of earlier nodes this node reads.
    pub inputs: Vec<NodeEntry>,
    /// For `tvm_op` nodes.
    pub param: Option<OpParam>,
    /// Other attributes, as text (e.g. `hash`).
    pub extra_attrs: Vec<(String, String)>,
}

impl Node {
    /// Number of outputs (1 for inputs).
    pub fn num_outputs(&self) -> usize {
        self.param.as_ref().map_or(1, |p| p.num_outputs)
    }

    /// True for `null` nodes.
    pub fn is_input(&self) -> bool {
        self.op == OP_NULL
    }
}

/// A parsed, validated graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// The input nodes, in input order.
    pub arg_nodes: Vec<usize>,
    /// The graph outputs, in output order.
    pub heads: Vec<NodeEntry>,
    /// Entry ranges of nodes (`nodes.len() + 1` items).
    pub node_row_ptr: Vec<usize>,
    /// Shape of every entry.
    pub shapes: Vec<Vec<i64>>,
    /// Element type of every entry.
    pub dtypes: Vec<DataType>,
    /// Storage of every entry (entries with one id share memory).
    pub storage_ids: Vec<usize>,
    /// DLPack device type of every entry, when the graph says.
    pub device_types: Option<Vec<i32>>,
    /// Storage scope of every entry, when the graph says.
    pub storage_scopes: Option<Vec<String>>,
}

fn err(what: impl std::fmt::Display) -> Error {
    Error::value_error(format!("graph JSON: {what}"))
}

fn node_label(i: usize, name: &str) -> String {
    format!("nodes[{i}] ({name:?})")
}

fn field<'a>(obj: &'a Json, key: &str, whose: &str) -> Result<&'a Json> {
    obj.get(key)
        .ok_or_else(|| err(format!("{whose} has no `{key}`")))
}

fn index_of(v: &Json, what: &str) -> Result<usize> {
    v.as_i64()
        .and_then(|i| usize::try_from(i).ok())
        .ok_or_else(|| {
            err(format!(
                "{what} must be a non-negative integer, not {}",
                describe(v)
            ))
        })
}

fn array_of<'a>(v: &'a Json, what: &str) -> Result<&'a [Json]> {
    v.as_array()
        .ok_or_else(|| err(format!("{what} must be an array, not {}", describe(v))))
}

fn describe(v: &Json) -> String {
    match v {
        Json::Number(n) => format!("the number {n}"),
        Json::String(s) => format!("the string {s:?}"),
        other => other.kind().to_string(),
    }
}

/// An attribute value that is an integer or a string holding one (TVM writes strings).
fn int_attr(v: &Json, what: &str) -> Result<i64> {
    let parsed = match v {
        Json::String(s) => s.trim().parse().ok(),
        other => other.as_i64(),
    };
    parsed.ok_or_else(|| err(format!("{what} must be an integer, not {}", describe(v))))
}

fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Number(n) => n.clone(),
        Json::Bool(b) => b.to_string(),
        Json::Null => "null".into(),
        other => other.kind().to_string(),
    }
}

fn parse_entry(v: &Json, what: &str) -> Result<NodeEntry> {
    let items = array_of(v, what)?;
    if !(2..=3).contains(&items.len()) {
        return Err(err(format!(
            "{what} must be [node_id, index] or [node_id, index, version], not {} items",
            items.len()
        )));
    }
    Ok(NodeEntry {
        node_id: index_of(&items[0], &format!("{what}[0] (node id)"))?,
        index: index_of(&items[1], &format!("{what}[1] (output index)"))?,
        version: match items.get(2) {
            Some(v) => index_of(v, &format!("{what}[2] (version)"))?,
            None => 0,
        },
    })
}

fn parse_node(i: usize, v: &Json) -> Result<Node> {
    let whose = format!("nodes[{i}]");
    if !matches!(v, Json::Object(_)) {
        return Err(err(format!(
            "{whose} must be an object, not {}",
            describe(v)
        )));
    }
    let name = field(v, "name", &whose)?
        .as_str()
        .ok_or_else(|| err(format!("{whose}.name must be a string")))?
        .to_string();
    let label = node_label(i, &name);
    let op = field(v, "op", &label)?
        .as_str()
        .ok_or_else(|| err(format!("{label}: `op` must be a string")))?
        .to_string();
    let inputs = array_of(field(v, "inputs", &label)?, &format!("{label}: inputs"))?
        .iter()
        .enumerate()
        .map(|(k, e)| parse_entry(e, &format!("{label}: inputs[{k}]")))
        .collect::<Result<Vec<_>>>()?;
    let attrs = match (v.get("attrs"), v.get("attr")) {
        (Some(a), _) | (None, Some(a)) => match a {
            Json::Object(items) => items.clone(),
            other => {
                return Err(err(format!(
                    "{label}: attrs must be an object, not {}",
                    describe(other)
                )))
            }
        },
        (None, None) => Vec::new(),
    };
    let param;
    let extra_attrs;
    match op.as_str() {
        OP_NULL => {
            if !inputs.is_empty() {
                return Err(err(format!(
                    "{label}: an input (`null`) node has no inputs"
                )));
            }
            extra_attrs = attrs.iter().map(|(k, v)| (k.clone(), text_of(v))).collect();
            param = None;
        }
        OP_TVM => {
            let get = |key: &str| {
                attrs
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v)
                    .ok_or_else(|| err(format!("{label}: attrs has no `{key}`")))
            };
            let func_name = get("func_name")?
                .as_str()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    err(format!(
                        "{label}: attrs.func_name must be a non-empty string"
                    ))
                })?
                .to_string();
            let count = |key: &str| -> Result<usize> {
                let n = int_attr(get(key)?, &format!("{label}: attrs.{key}"))?;
                usize::try_from(n)
                    .map_err(|_| err(format!("{label}: attrs.{key} is negative ({n})")))
            };
            let num_inputs = count("num_inputs")?;
            let num_outputs = count("num_outputs")?;
            let flatten_data = match attrs.iter().find(|(k, _)| k == "flatten_data") {
                Some((_, v)) => int_attr(v, &format!("{label}: attrs.flatten_data"))? != 0,
                None => false,
            };
            if num_inputs != inputs.len() {
                return Err(err(format!(
                    "{label}: attrs.num_inputs is {num_inputs} but the node has {} inputs",
                    inputs.len()
                )));
            }
            extra_attrs = attrs
                .iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "func_name" | "num_inputs" | "num_outputs" | "flatten_data"
                    )
                })
                .map(|(k, v)| (k.clone(), text_of(v)))
                .collect();
            param = Some(OpParam {
                func_name,
                num_inputs,
                num_outputs,
                flatten_data,
            });
        }
        other => {
            return Err(err(format!(
                "{label}: unknown op {other:?} (expected \"null\" or \"tvm_op\")"
            )))
        }
    }
    Ok(Node {
        op,
        name,
        inputs,
        param,
        extra_attrs,
    })
}

/// Reads `attrs.<key>`: `["<tag>", [items]]`.
fn tagged_list<'a>(attrs: &'a Json, key: &str, tag: &str) -> Result<Option<&'a [Json]>> {
    let Some(v) = attrs.get(key) else {
        return Ok(None);
    };
    let what = format!("attrs.{key}");
    let pair = array_of(v, &what)?;
    if pair.len() != 2 || pair[0].as_str() != Some(tag) {
        return Err(err(format!("{what} must be [\"{tag}\", [...]]")));
    }
    Ok(Some(array_of(&pair[1], &format!("{what}[1]"))?))
}

impl Graph {
    /// Parses and validates graph JSON.
    pub fn parse(text: &str) -> Result<Graph> {
        let doc = json::parse(text).map_err(|e| err(e.message()))?;
        if !matches!(doc, Json::Object(_)) {
            return Err(err(format!(
                "the document must be an object, not {}",
                describe(&doc)
            )));
        }
        let nodes = array_of(field(&doc, "nodes", "the graph")?, "nodes")?
            .iter()
            .enumerate()
            .map(|(i, n)| parse_node(i, n))
            .collect::<Result<Vec<_>>>()?;
        let list = |key: &str| -> Result<Vec<usize>> {
            array_of(field(&doc, key, "the graph")?, key)?
                .iter()
                .enumerate()
                .map(|(i, v)| index_of(v, &format!("{key}[{i}]")))
                .collect()
        };
        let arg_nodes = list("arg_nodes")?;
        let node_row_ptr = list("node_row_ptr")?;
        let heads = array_of(field(&doc, "heads", "the graph")?, "heads")?
            .iter()
            .enumerate()
            .map(|(i, e)| parse_entry(e, &format!("heads[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let attrs = field(&doc, "attrs", "the graph")?;
        if !matches!(attrs, Json::Object(_)) {
            return Err(err("attrs must be an object"));
        }
        let need = |key: &str, tag: &str| -> Result<&[Json]> {
            tagged_list(attrs, key, tag)?.ok_or_else(|| err(format!("attrs has no `{key}`")))
        };
        let shapes = need("shape", "list_shape")?
            .iter()
            .enumerate()
            .map(|(e, s)| {
                let what = format!("attrs.shape[{e}]");
                array_of(s, &what)?
                    .iter()
                    .map(|d| {
                        d.as_i64().filter(|&d| d >= 0).ok_or_else(|| {
                            err(format!(
                                "{what} must hold non-negative integers, not {}",
                                describe(d)
                            ))
                        })
                    })
                    .collect::<Result<Vec<i64>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let dtypes = need("dltype", "list_str")?
            .iter()
            .enumerate()
            .map(|(e, d)| {
                let what = format!("attrs.dltype[{e}]");
                let s = d
                    .as_str()
                    .ok_or_else(|| err(format!("{what} must be a string")))?;
                s.parse::<DataType>()
                    .map_err(|_| err(format!("{what}: unknown data type {s:?}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let storage_ids = need("storage_id", "list_int")?
            .iter()
            .enumerate()
            .map(|(e, v)| {
                v.as_i64()
                    .ok_or_else(|| err(format!("attrs.storage_id[{e}] must be an integer")))
            })
            .collect::<Result<Vec<i64>>>()?;
        let device_types = tagged_list(attrs, "device_index", "list_int")?
            .map(|items| {
                items
                    .iter()
                    .enumerate()
                    .map(|(e, v)| {
                        v.as_i64()
                            .and_then(|d| i32::try_from(d).ok())
                            .filter(|&d| d > 0)
                            .ok_or_else(|| {
                                err(format!(
                                    "attrs.device_index[{e}] must be a DLPack device type (a \
                                     positive integer), not {}",
                                    describe(v)
                                ))
                            })
                    })
                    .collect::<Result<Vec<i32>>>()
            })
            .transpose()?;
        let storage_scopes = tagged_list(attrs, "storage_scope", "list_str")?
            .map(|items| {
                items
                    .iter()
                    .enumerate()
                    .map(|(e, v)| {
                        v.as_str().map(str::to_string).ok_or_else(|| {
                            err(format!("attrs.storage_scope[{e}] must be a string"))
                        })
                    })
                    .collect::<Result<Vec<String>>>()
            })
            .transpose()?;
        let mut graph = Graph {
            nodes,
            arg_nodes,
            heads,
            node_row_ptr,
            shapes,
            dtypes,
            storage_ids: Vec::new(),
            device_types,
            storage_scopes,
        };
        graph.storage_ids = graph.check_storage_ids(&storage_ids)?;
        graph.validate()?;
        Ok(graph)
    }

    fn check_storage_ids(&self, ids: &[i64]) -> Result<Vec<usize>> {
        ids.iter()
            .enumerate()
            .map(|(e, &sid)| {
                usize::try_from(sid).map_err(|_| {
                    err(format!(
                        "attrs.storage_id[{e}] = {sid} ({}) is out of range: storage ids are \
                         non-negative",
                        self.entry_owner(e)
                    ))
                })
            })
            .collect()
    }

    /// `output #k of nodes[i] ("name")` for entry `eid`, for messages.
    pub fn entry_owner(&self, eid: usize) -> String {
        let nid = self
            .node_row_ptr
            .windows(2)
            .position(|w| w[0] <= eid && eid < w[1]);
        match nid {
            Some(i) if i < self.nodes.len() => format!(
                "output #{} of {}",
                eid - self.node_row_ptr[i],
                node_label(i, &self.nodes[i].name)
            ),
            _ => format!("entry {eid}"),
        }
    }

    /// Checks the structure: entry ranges, topological order, inputs, outputs and that every
    /// per-entry attribute has one item per entry.
    pub fn validate(&self) -> Result<()> {
        let n = self.nodes.len();
        if self.node_row_ptr.len() != n + 1 {
            return Err(err(format!(
                "node_row_ptr has {} items but there are {n} nodes (it needs {})",
                self.node_row_ptr.len(),
                n + 1
            )));
        }
        if self.node_row_ptr[0] != 0 {
            return Err(err("node_row_ptr must start with 0"));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let label = node_label(i, &node.name);
            let rows = self.node_row_ptr[i + 1].checked_sub(self.node_row_ptr[i]);
            if rows != Some(node.num_outputs()) {
                return Err(err(format!(
                    "{label}: node_row_ptr[{}] - node_row_ptr[{i}] must be its number of \
                     outputs ({}), but node_row_ptr is {:?}..{:?}",
                    i + 1,
                    node.num_outputs(),
                    self.node_row_ptr[i],
                    self.node_row_ptr[i + 1]
                )));
            }
            for (k, e) in node.inputs.iter().enumerate() {
                if e.node_id >= i {
                    return Err(err(format!(
                        "{label}: input #{k} refers to node {}, which does not come before it \
                         (nodes must be in topological order)",
                        e.node_id
                    )));
                }
                let src = &self.nodes[e.node_id];
                if e.index >= src.num_outputs() {
                    return Err(err(format!(
                        "{label}: input #{k} reads output {} of {}, which has {} outputs",
                        e.index,
                        node_label(e.node_id, &src.name),
                        src.num_outputs()
                    )));
                }
            }
        }
        let entries = self.num_entries();
        let lengths = [
            ("shape", self.shapes.len()),
            ("dltype", self.dtypes.len()),
            ("storage_id", self.storage_ids.len()),
            (
                "device_index",
                self.device_types.as_ref().map_or(entries, Vec::len),
            ),
            (
                "storage_scope",
                self.storage_scopes.as_ref().map_or(entries, Vec::len),
            ),
        ];
        for (key, len) in lengths {
            if len != entries {
                return Err(err(format!(
                    "attrs.{key} has {len} items but the graph has {entries} entries \
                     (node_row_ptr ends at {entries})"
                )));
            }
        }
        for (e, &sid) in self.storage_ids.iter().enumerate() {
            if sid >= entries {
                return Err(err(format!(
                    "attrs.storage_id[{e}] = {sid} ({}) is out of range: storage ids go from 0 \
                     to the number of entries ({entries}) minus one",
                    self.entry_owner(e)
                )));
            }
        }
        for (e, shape) in self.shapes.iter().enumerate() {
            if shape.len() > MAX_NDIM {
                return Err(err(format!(
                    "attrs.shape[{e}] ({}) has more than {MAX_NDIM} dimensions",
                    self.entry_owner(e)
                )));
            }
        }
        for (e, dt) in self.dtypes.iter().enumerate() {
            if dt.bits() == 0 || dt.lanes() == 0 {
                return Err(err(format!(
                    "attrs.dltype[{e}] ({}) is `{dt}`, which has no size",
                    self.entry_owner(e)
                )));
            }
        }
        for (k, &nid) in self.arg_nodes.iter().enumerate() {
            let node = self.nodes.get(nid).ok_or_else(|| {
                err(format!(
                    "arg_nodes[{k}] is node {nid} but there are only {n} nodes"
                ))
            })?;
            if !node.is_input() {
                return Err(err(format!(
                    "arg_nodes[{k}] is {}, which is a {:?} node, not an input (\"null\")",
                    node_label(nid, &node.name),
                    node.op
                )));
            }
            // A linear scan (no hash map in the deployable runtime for this one check).
            let first = self.arg_nodes[..k]
                .iter()
                .copied()
                .find(|&m| self.nodes[m].name == node.name);
            if let Some(first) = first {
                return Err(err(format!(
                    "arg_nodes[{k}]: two inputs are named {:?} (nodes {first} and {nid})",
                    node.name
                )));
            }
        }
        for (k, h) in self.heads.iter().enumerate() {
            let node = self.nodes.get(h.node_id).ok_or_else(|| {
                err(format!(
                    "heads[{k}] refers to node {} but there are only {n} nodes",
                    h.node_id
                ))
            })?;
            if h.index >= node.num_outputs() {
                return Err(err(format!(
                    "heads[{k}] reads output {} of {}, which has {} outputs",
                    h.index,
                    node_label(h.node_id, &node.name),
                    node.num_outputs()
                )));
            }
        }
        Ok(())
    }

    /// Number of entries (outputs of all nodes).
    pub fn num_entries(&self) -> usize {
        self.node_row_ptr.last().copied().unwrap_or(0)
    }

    /// The entry of output `index` of node `nid`.
    pub fn entry_id(&self, nid: usize, index: usize) -> usize {
        self.node_row_ptr[nid] + index
    }

    /// The entry an input refers to.
    pub fn entry_of(&self, e: &NodeEntry) -> usize {
        self.entry_id(e.node_id, e.index)
    }

    /// The index of the input named `name` (a linear scan; names are unique, checked by
    /// [`Graph::parse`]).
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.arg_nodes
            .iter()
            .position(|&nid| self.nodes[nid].name == name)
    }

    /// [`input_index`](Self::input_index), or a `KeyError` from `what` listing the inputs.
    pub fn require_input(&self, name: &str, what: &str) -> Result<usize> {
        self.input_index(name).ok_or_else(|| {
            Error::key_error(format!(
                "{what}: the graph has no input named {name:?} (inputs: {})",
                self.input_names().join(", ")
            ))
        })
    }

    /// Names of the inputs, in input order.
    pub fn input_names(&self) -> Vec<&str> {
        self.arg_nodes
            .iter()
            .map(|&n| self.nodes[n].name.as_str())
            .collect()
    }

    /// Writes the graph as JSON (TVM's layout; attribute values as strings, as TVM writes).
    pub fn to_json(&self) -> String {
        let mut s = String::from("{\n  \"nodes\": [");
        for (i, node) in self.nodes.iter().enumerate() {
            s.push_str(if i == 0 { "\n    {" } else { ",\n    {" });
            s.push_str("\"op\": ");
            json::write_string(&mut s, &node.op);
            s.push_str(", \"name\": ");
            json::write_string(&mut s, &node.name);
            let inputs: Vec<String> = node
                .inputs
                .iter()
                .map(|e| format!("[{}, {}, {}]", e.node_id, e.index, e.version))
                .collect();
            let _ = write!(s, ", \"inputs\": [{}]", inputs.join(", "));
            let mut attrs: Vec<(String, String)> = Vec::new();
            if let Some(p) = &node.param {
                attrs.push(("func_name".into(), p.func_name.clone()));
                attrs.push(("num_inputs".into(), p.num_inputs.to_string()));
                attrs.push(("num_outputs".into(), p.num_outputs.to_string()));
                attrs.push(("flatten_data".into(), (p.flatten_data as u8).to_string()));
            }
            attrs.extend(node.extra_attrs.iter().cloned());
            if !attrs.is_empty() {
                s.push_str(", \"attrs\": {");
                for (k, (key, value)) in attrs.iter().enumerate() {
                    if k > 0 {
                        s.push_str(", ");
                    }
                    json::write_string(&mut s, key);
                    s.push_str(": ");
                    json::write_string(&mut s, value);
                }
                s.push('}');
            }
            s.push('}');
        }
        let join = |v: &[usize]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let heads: Vec<String> = self
            .heads
            .iter()
            .map(|e| format!("[{}, {}, {}]", e.node_id, e.index, e.version))
            .collect();
        let _ = write!(
            s,
            "\n  ],\n  \"arg_nodes\": [{}],\n  \"heads\": [{}],\n  \"node_row_ptr\": [{}],\n",
            join(&self.arg_nodes),
            heads.join(", "),
            join(&self.node_row_ptr)
        );
        let shapes: Vec<String> = self.shapes.iter().map(|d| format!("{d:?}")).collect();
        let dtypes: Vec<String> = self.dtypes.iter().map(|d| format!("\"{d}\"")).collect();
        let _ = write!(
            s,
            "  \"attrs\": {{\n    \"shape\": [\"list_shape\", [{}]],\n    \"dltype\": \
             [\"list_str\", [{}]],\n    \"storage_id\": [\"list_int\", [{}]]",
            shapes.join(", "),
            dtypes.join(", "),
            join(&self.storage_ids)
        );
        if let Some(d) = &self.device_types {
            let items: Vec<String> = d.iter().map(|x| x.to_string()).collect();
            let _ = write!(
                s,
                ",\n    \"device_index\": [\"list_int\", [{}]]",
                items.join(", ")
            );
        }
        if let Some(scopes) = &self.storage_scopes {
            let mut items = String::new();
            for (k, scope) in scopes.iter().enumerate() {
                if k > 0 {
                    items.push_str(", ");
                }
                json::write_string(&mut items, scope);
            }
            let _ = write!(s, ",\n    \"storage_scope\": [\"list_str\", [{items}]]");
        }
        s.push_str("\n  }\n}\n");
        s
    }
}
