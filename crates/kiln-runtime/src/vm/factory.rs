//! The VM factory (module kind `VMFactory`): a program, its static graph segments (graph JSON
//! and params each) and the compiled library (its first import), in one module that
//! `export_library` writes into one shared library and `load_module` restores, as the graph
//! executor's factory does. Functions:
//!
//! | function | arguments | result |
//! | --- | --- | --- |
//! | `<module name>` (`default`) | devices... | a new `VirtualMachine` executor module |
//! | `get_lib` | | the library module |
//! | `get_module_name` | | str |
//! | `get_num_segments` | | int |
//! | `get_segment_json` | index | the graph JSON of that segment |
//!
//! Serialized form: u64 magic "KILNVMF2", the module name, u64 tensor count and the distinct
//! param tensors in the params format (a tensor several segments hold, such as a weight of a
//! model compiled for several shapes, is written once), u64 segment count, per segment its
//! graph JSON then its params (u64 count + names, then u64 count + indices into the tensors),
//! then the program ([`super::code`]); loaded by the global `ffi.Module.load_from_bytes.VMFactory`.

use super::code::Code;
use super::machine::VirtualMachine;
use super::module::VirtualMachineModule;
use crate::graph_executor::factory::{devices_from, graph_params, SelfRef};
use crate::graph_executor::graph_json::Graph;
use crate::graph_executor::params::ByteReader;
#[cfg(feature = "compiler")]
use crate::graph_executor::params::{put_string, put_u64, write_tensor};
use crate::module::{Module, ModuleNode};
use crate::tensor::Tensor;
use kiln_ffi::{Device, Error, Function, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The module kind of VM factories.
pub const KIND: &str = "VMFactory";

const MAGIC: u64 = u64::from_le_bytes(*b"KILNVMF2");

/// One static graph of a program: what a graph executor factory holds, without the library.
pub struct Segment {
    /// The graph JSON as given.
    pub graph_json: String,
    /// The parsed graph.
    pub graph: Arc<Graph>,
    /// Its params by name.
    pub params: BTreeMap<String, Tensor>,
}

impl Segment {
    /// A segment from its graph JSON and params; every param must be an input of the graph
    /// with its shape and dtype.
    pub fn new(graph_json: String, params: Vec<(String, Tensor)>) -> Result<Segment> {
        let graph = Arc::new(Graph::parse(&graph_json)?);
        let map = graph_params(&graph, params, "VM segment")?;
        Ok(Segment {
            graph_json,
            graph,
            params: map,
        })
    }

    /// The indices (among the graph's inputs) of the inputs that are not params, in order: the
    /// ones a `Run` instruction passes.
    pub fn runtime_inputs(&self) -> Vec<usize> {
        let g = &self.graph;
        (0..g.arg_nodes.len())
            .filter(|&i| !self.params.contains_key(&g.nodes[g.arg_nodes[i]].name))
            .collect()
    }
}

struct Shared {
    code: Arc<Code>,
    segments: Vec<Segment>,
    module_name: String,
    this: SelfRef,
}

impl Shared {
    fn lib_or(&self, kept: &Option<Module>) -> Result<Module> {
        self.this.library(kept, KIND)
    }

    fn create(&self, devices: &[Device], kept: &Option<Module>) -> Result<Module> {
        let vm = VirtualMachine::new(
            self.code.clone(),
            &self.segments,
            &self.lib_or(kept)?,
            devices,
        )?;
        Ok(VirtualMachineModule::new_module(vm))
    }
}

/// The factory module node.
pub struct VmFactory {
    shared: Arc<Shared>,
}

impl Drop for VmFactory {
    fn drop(&mut self) {
        self.shared.this.clear();
    }
}

impl VmFactory {
    /// Makes a factory module of `code` over `segments`, importing `lib`. (Feature `compiler`.)
    #[cfg(feature = "compiler")]
    pub fn create(
        code: Code,
        segments: Vec<Segment>,
        lib: &Module,
        module_name: &str,
    ) -> Result<Module> {
        let m = Self::without_lib(code, segments, module_name.to_string())?;
        m.import(lib)?;
        Ok(m)
    }

    fn without_lib(code: Code, segments: Vec<Segment>, module_name: String) -> Result<Module> {
        if module_name.is_empty() {
            return Err(Error::value_error(
                "VMFactory: the module name must not be empty",
            ));
        }
        code.validate()?;
        let shared = Arc::new(Shared {
            code: Arc::new(code),
            segments,
            module_name,
            this: SelfRef::default(),
        });
        let m = Module::new(VmFactory {
            shared: shared.clone(),
        });
        shared.this.set(&m);
        Ok(m)
    }

    /// The program.
    pub fn code(&self) -> &Code {
        &self.shared.code
    }

    /// The static graph segments.
    pub fn segments(&self) -> &[Segment] {
        &self.shared.segments
    }

    /// The name of the function that creates executors.
    pub fn module_name(&self) -> &str {
        &self.shared.module_name
    }

    /// Restores a factory from [`ModuleNode::save_to_bytes`]'s output (without its library:
    /// the loader of the shared library adds the import).
    pub fn load_from_bytes(bytes: &[u8]) -> Result<Module> {
        let mut r = ByteReader::new(bytes, "VMFactory");
        if r.u64("magic")? != MAGIC {
            return Err(r.error_at(0, "the magic number is not KILNVMF2"));
        }
        let module_name = r.string("module name")?;
        let n = r.count("tensor count", 16)?;
        let tensors = (0..n)
            .map(|i| r.tensor(&format!("param tensor #{i}")))
            .collect::<Result<Vec<_>>>()?;
        let n = r.count("segment count", 16)?;
        let mut segments = Vec::with_capacity(n);
        for k in 0..n {
            let at = r.pos();
            let json = r.string(&format!("graph JSON of segment {k}"))?;
            let names = r.strings(&format!("param names of segment {k}"))?;
            let count = r.count(&format!("param count of segment {k}"), 8)?;
            if count != names.len() {
                return Err(r.error_at(
                    at,
                    format!("segment {k} names {} params but has {count}", names.len()),
                ));
            }
            let mut params = Vec::with_capacity(names.len());
            for name in names {
                let at = r.pos();
                let i = r.u64(&format!("tensor index of param {name:?} of segment {k}"))?;
                let t = usize::try_from(i)
                    .ok()
                    .and_then(|i| tensors.get(i))
                    .ok_or_else(|| {
                        r.error_at(
                            at,
                            format!(
                                "param {name:?} of segment {k} is tensor #{i}, but there are {}",
                                tensors.len()
                            ),
                        )
                    })?;
                params.push((name, t.clone()));
            }
            let seg = Segment::new(json, params)
                .map_err(|e| r.error_at(at, format!("segment {k}: {e}")))?;
            segments.push(seg);
        }
        let at = r.pos();
        let code = Code::from_bytes(&bytes[at..])?;
        Self::without_lib(code, segments, module_name)
    }
}

impl ModuleNode for VmFactory {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let s = self.shared.clone();
        let kept = s.lib_or(&None).ok();
        let f = if name == s.module_name {
            Function::from_packed(move |args| {
                let what = format!("VMFactory[{:?}]", s.module_name);
                Ok(s.create(&devices_from(args, &what)?, &kept)?.into())
            })
        } else {
            match name {
                "get_lib" => Function::from_typed(move || s.lib_or(&kept)),
                "get_module_name" => Function::from_typed(move || s.module_name.clone()),
                "get_num_segments" => Function::from_typed(move || s.segments.len() as i64),
                "get_segment_json" => Function::from_typed(move |i: i64| -> Result<String> {
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| s.segments.get(i))
                        .map(|seg| seg.graph_json.clone())
                        .ok_or_else(|| {
                            Error::index_error(format!(
                                "VMFactory.get_segment_json: segment {i} of {}",
                                s.segments.len()
                            ))
                        })
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
        put_u64(&mut out, MAGIC);
        put_string(&mut out, &s.module_name);
        // Distinct tensors (by identity) once; segments refer to them by index.
        let mut pool: Vec<&Tensor> = Vec::new();
        let mut refs: Vec<Vec<u64>> = Vec::with_capacity(s.segments.len());
        for seg in &s.segments {
            let mut r = Vec::with_capacity(seg.params.len());
            for t in seg.params.values() {
                let i = match pool.iter().position(|p| p.same_as(t)) {
                    Some(i) => i,
                    None => {
                        pool.push(t);
                        pool.len() - 1
                    }
                };
                r.push(i as u64);
            }
            refs.push(r);
        }
        put_u64(&mut out, pool.len() as u64);
        for (i, t) in pool.iter().enumerate() {
            write_tensor(&mut out, t)
                .map_err(|e| e.context(format!("saving param tensor #{i}")))?;
        }
        put_u64(&mut out, s.segments.len() as u64);
        for (seg, r) in s.segments.iter().zip(&refs) {
            put_string(&mut out, &seg.graph_json);
            put_u64(&mut out, seg.params.len() as u64);
            for name in seg.params.keys() {
                put_string(&mut out, name);
            }
            put_u64(&mut out, r.len() as u64);
            for &i in r {
                put_u64(&mut out, i);
            }
        }
        out.extend_from_slice(&s.code.to_bytes());
        Ok(out)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
