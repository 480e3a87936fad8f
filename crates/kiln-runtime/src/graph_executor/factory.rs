//! The graph executor factory (TVM's `GraphExecutorFactory`, module kind
//! `GraphExecutorFactory`): graph JSON, params and a compiled library in one module, which
//! `export_library` writes into one shared library and `load_module` restores.
//!
//! The library is the factory's first import (so `export_library` links it and records it in
//! the import tree). Functions:
//!
//! | function | arguments | result |
//! | --- | --- | --- |
//! | `<module name>` (`default`) | devices... | a new `GraphExecutor` module with the params set |
//! | `debug_create` | module name, devices... | the same (every executor has the debug functions) |
//! | `get_graph_json` | | str |
//! | `get_graph_params` | | `{name: tensor}` |
//! | `list_params` | | names |
//! | `get_lib` | | the library module |
//! | `get_module_name` | | str |
//! | `remove_params` | | a factory with the same graph and library and no params |
//!
//! Serialized form (`save_to_bytes`, as TVM's `SaveToBinary`): graph JSON (u64 length + bytes),
//! u64 count, the names (u64 count + strings), the tensors in the params format, the module
//! name; loaded by the global `ffi.Module.load_from_bytes.GraphExecutorFactory`.

use super::executor::GraphExecutor;
use super::graph_json::Graph;
use super::module::GraphExecutorModule;
use super::params::ByteReader;
#[cfg(feature = "compiler")]
use super::params::{put_string, put_u64, write_tensor};
use crate::module::{Module, ModuleNode};
use crate::tensor::Tensor;
use kiln_ffi::abi::ObjectHeader;
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Any, AnyView, Array, Device, Error, Function, Map, ObjectRef, Result};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The module kind of factories.
pub const KIND: &str = "GraphExecutorFactory";

/// A reference from a node to the module object that wraps it, which does not keep that module
/// alive (the module's function cache holds the node's functions, so a strong one would be a
/// cycle). [`SelfRef::upgrade`] takes a strong reference only while the module lives.
pub(crate) struct SelfRef {
    /// The module object, or 0 once it is gone. The node's `Drop` clears it under the lock, so
    /// while the lock is held the object's memory is valid.
    ptr: Mutex<usize>,
}

impl SelfRef {
    /// The library of the factory module of kind `kind`: its first import while the module
    /// lives, else `kept` (the library when a function was made, so that
    /// `load_module(p)["default"](dev)` works after the temporary factory is dropped, as in
    /// TVM).
    pub(crate) fn library(&self, kept: &Option<Module>, kind: &str) -> Result<Module> {
        let Some(this) = self.upgrade() else {
            return kept
                .clone()
                .ok_or_else(|| Error::runtime_error(format!("the {kind} module is gone")));
        };
        this.imports().into_iter().next().ok_or_else(|| {
            Error::runtime_error(format!(
                "this {kind} has no library: its first import must be the compiled library"
            ))
        })
    }
}

impl Default for SelfRef {
    fn default() -> Self {
        SelfRef { ptr: Mutex::new(0) }
    }
}

impl SelfRef {
    pub(crate) fn set(&self, m: &Module) {
        *self.ptr.lock().recover() = m.as_raw() as usize;
    }

    pub(crate) fn clear(&self) {
        *self.ptr.lock().recover() = 0;
    }

    pub(crate) fn upgrade(&self) -> Option<Module> {
        let guard = self.ptr.lock().recover();
        let ptr = *guard as *mut ObjectHeader;
        let header = std::ptr::NonNull::new(ptr)?;
        // SAFETY: the pointer is cleared (under this lock) before the object's memory goes, so
        // the header is valid here. A strong reference is added only while the strong count
        // (low 32 bits) is not zero: once it is, the object is being destroyed.
        let count = unsafe { &(*header.as_ptr()).ref_count };
        let mut cur = count.load(Ordering::Acquire);
        loop {
            if cur & 0xffff_ffff == 0 {
                return None;
            }
            match count.compare_exchange_weak(
                cur,
                cur + kiln_ffi::abi::REF_STRONG_ONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        // SAFETY: the reference taken above is handed to the new handle.
        Some(Module(unsafe { ObjectRef::from_raw(header) }))
    }
}

/// `params` by name, each checked to be an input of `graph` with its shape and dtype, none
/// given twice (the tensors are held, not copied); errors start with `who`.
pub(crate) fn graph_params(
    graph: &Graph,
    params: impl IntoIterator<Item = (String, Tensor)>,
    who: &str,
) -> Result<BTreeMap<String, Tensor>> {
    let mut map = BTreeMap::new();
    for (name, t) in params {
        let index = graph
            .arg_nodes
            .iter()
            .position(|&n| graph.nodes[n].name == name)
            .ok_or_else(|| {
                Error::key_error(format!(
                    "{who}: param {name:?} is not an input of the graph (inputs: {})",
                    graph.input_names().join(", ")
                ))
            })?;
        let eid = graph.entry_id(graph.arg_nodes[index], 0);
        if t.shape() != graph.shapes[eid].as_slice() || t.dtype() != graph.dtypes[eid] {
            return Err(Error::value_error(format!(
                "{who}: param {name:?} is {:?} {} but the graph's input is {:?} {}",
                t.shape(),
                t.dtype(),
                graph.shapes[eid],
                graph.dtypes[eid]
            )));
        }
        if map.insert(name.clone(), t).is_some() {
            return Err(Error::value_error(format!(
                "{who}: param {name:?} is given twice"
            )));
        }
    }
    Ok(map)
}

/// What a factory's functions share with it.
struct Shared {
    graph_json: String,
    graph: Arc<Graph>,
    params: BTreeMap<String, Tensor>,
    module_name: String,
    this: SelfRef,
}

impl Shared {
    /// The library: the factory's first import.
    fn lib(&self) -> Result<Module> {
        self.lib_or(&None)
    }

    /// The library: the factory's first import while the factory lives, else `kept`.
    fn lib_or(&self, kept: &Option<Module>) -> Result<Module> {
        self.this.library(kept, KIND)
    }

    fn create(&self, devices: &[Device], kept: &Option<Module>) -> Result<Module> {
        let mut exec = GraphExecutor::new(self.graph.clone(), self.lib_or(kept)?, devices)?;
        exec.set_params(self.params.iter().map(|(k, v)| (k.as_str(), v)))?;
        Ok(GraphExecutorModule::new_module(exec))
    }
}

/// The factory module node.
pub struct GraphExecutorFactory {
    shared: Arc<Shared>,
}

impl Drop for GraphExecutorFactory {
    fn drop(&mut self) {
        self.shared.this.clear();
    }
}

impl GraphExecutorFactory {
    /// Makes a factory module: `graph_json` is parsed and checked, every param must name an
    /// input of the graph and match its shape and dtype (the tensors are held, not copied), and
    /// `lib` becomes the module's import. `module_name` is the name of the function that
    /// creates executors (TVM's default: `default`).
    #[cfg(feature = "compiler")]
    pub fn create(
        graph_json: &str,
        lib: &Module,
        params: impl IntoIterator<Item = (String, Tensor)>,
        module_name: &str,
    ) -> Result<Module> {
        let m = Self::without_lib(graph_json.to_string(), params, module_name.to_string())?;
        m.import(lib)?;
        Ok(m)
    }

    fn without_lib(
        graph_json: String,
        params: impl IntoIterator<Item = (String, Tensor)>,
        module_name: String,
    ) -> Result<Module> {
        if module_name.is_empty() {
            return Err(Error::value_error(
                "GraphExecutorFactory: the module name must not be empty",
            ));
        }
        let graph = Arc::new(Graph::parse(&graph_json)?);
        let map = graph_params(&graph, params, KIND)?;
        let shared = Arc::new(Shared {
            graph_json,
            graph,
            params: map,
            module_name,
            this: SelfRef { ptr: Mutex::new(0) },
        });
        let m = Module::new(GraphExecutorFactory {
            shared: shared.clone(),
        });
        shared.this.set(&m);
        Ok(m)
    }

    /// The graph JSON as given.
    pub fn graph_json(&self) -> &str {
        &self.shared.graph_json
    }

    /// The parsed graph.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.shared.graph
    }

    /// The params by name.
    pub fn params(&self) -> &BTreeMap<String, Tensor> {
        &self.shared.params
    }

    /// The name of the function that creates executors.
    pub fn module_name(&self) -> &str {
        &self.shared.module_name
    }

    /// A new executor on `devices` over the factory's library, params set.
    pub fn create_executor(&self, devices: &[Device]) -> Result<Module> {
        self.shared.create(devices, &None)
    }

    /// Restores a factory from [`ModuleNode::save_to_bytes`]'s output (without its library:
    /// the loader of the shared library adds the import).
    pub fn load_from_bytes(bytes: &[u8]) -> Result<Module> {
        let mut r = ByteReader::new(bytes, "GraphExecutorFactory");
        let graph_json = r.string("graph JSON")?;
        let at = r.pos();
        let count = r.u64("param count")?;
        let names = r.strings("param names")?;
        if count != names.len() as u64 {
            return Err(r.error_at(
                at,
                format!(
                    "the param count is {count} but {} names follow",
                    names.len()
                ),
            ));
        }
        let mut params = Vec::with_capacity(names.len());
        for (i, name) in names.into_iter().enumerate() {
            let t = r.tensor(&format!("param #{i} ({name:?})"))?;
            params.push((name, t));
        }
        let module_name = r.string("module name")?;
        if r.remaining() != 0 {
            return Err(r.error_at(
                r.pos(),
                format!("{} unread bytes after the module name", r.remaining()),
            ));
        }
        Self::without_lib(graph_json, params, module_name)
    }
}

pub(crate) fn devices_from(args: &[AnyView<'_>], what: &str) -> Result<Vec<Device>> {
    if args.is_empty() {
        return Err(Error::type_error(format!(
            "{what}: pass at least one device (e.g. kiln.cpu())"
        )));
    }
    args.iter()
        .enumerate()
        .map(|(i, a)| {
            a.try_as::<Device>().map_err(|_| {
                Error::type_error(format!(
                    "{what}: argument #{i} must be a device, not `{}`",
                    a.type_name()
                ))
            })
        })
        .collect()
}

impl ModuleNode for GraphExecutorFactory {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let s = self.shared.clone();
        // The functions keep the library (not the factory: the factory's function cache holds
        // them, which would be a cycle) for when they outlive the factory module.
        let kept = s.lib().ok();
        let f = if name == s.module_name {
            Function::from_packed(move |args| {
                let what = format!("GraphExecutorFactory[{:?}]", s.module_name);
                Ok(s.create(&devices_from(args, &what)?, &kept)?.into())
            })
        } else {
            match name {
                "debug_create" => Function::from_packed(move |args| {
                    let what = "GraphExecutorFactory.debug_create(module_name, *devices)";
                    let given = args.first().and_then(|a| a.try_as::<String>().ok());
                    if given.as_deref() != Some(s.module_name.as_str()) {
                        return Err(Error::value_error(format!(
                            "{what}: the module name must be {:?}",
                            s.module_name
                        )));
                    }
                    Ok(s.create(&devices_from(&args[1..], what)?, &kept)?.into())
                }),
                "get_graph_json" => Function::from_typed(move || s.graph_json.clone()),
                "get_graph_params" => Function::from_typed(move || -> Map {
                    s.params
                        .iter()
                        .map(|(k, v)| (Any::from(k.clone()), Any::from(v.clone())))
                        .collect()
                }),
                "list_params" => Function::from_typed(move || -> Array {
                    s.params.keys().map(|k| Any::from(k.clone())).collect()
                }),
                "get_lib" => Function::from_typed(move || s.lib_or(&kept)),
                "get_module_name" => Function::from_typed(move || s.module_name.clone()),
                "remove_params" => Function::from_typed(move || -> Result<Module> {
                    let lib = s.lib_or(&kept)?;
                    let m = GraphExecutorFactory::without_lib(
                        s.graph_json.clone(),
                        Vec::new(),
                        s.module_name.clone(),
                    )?;
                    m.import(&lib)?;
                    Ok(m)
                }),
                _ => return Ok(None),
            }
        };
        Ok(Some(f))
    }

    #[cfg(feature = "compiler")]
    fn is_binary_serializable(&self) -> bool {
        true
    }

    #[cfg(feature = "compiler")]
    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        let s = &self.shared;
        let mut out = Vec::new();
        put_string(&mut out, &s.graph_json);
        put_u64(&mut out, s.params.len() as u64);
        put_u64(&mut out, s.params.len() as u64);
        for name in s.params.keys() {
            put_string(&mut out, name);
        }
        for (name, t) in &s.params {
            write_tensor(&mut out, t).map_err(|e| e.context(format!("saving param {name:?}")))?;
        }
        put_string(&mut out, &s.module_name);
        Ok(out)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
