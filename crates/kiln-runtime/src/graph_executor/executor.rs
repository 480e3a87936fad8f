//! The graph executor: runs a [`Graph`] with the functions of a library module.
//!
//! At creation every entry gets its memory (see [`super::storage`]) and every `tvm_op` node is
//! prepared once: its library function is looked up by `func_name` (a missing one is an error
//! naming the node), and its arguments (inputs, then outputs) are built as `DLTensor`s that
//! [`GraphExecutor::run`] passes as `DLTensor*` values, as TVM does, so a run does no allocation
//! and no lookup. Binding an input or output to outside memory (zero copy) rewrites the data
//! pointer of every argument that refers to that entry.
//!
//! An executor is used by one thread at a time (`&mut self`); several executors over one
//! library run concurrently (the module wrapper, [`super::module`], puts each behind a mutex).

use super::graph_json::{Graph, FUNC_COPY, FUNC_NOP, OP_TVM};
use super::params;
use super::storage::{Storage, StoragePlan};
use crate::device::{device_label, ALLOC_ALIGNMENT};
use crate::module::{LibraryModule, Module};
use crate::tensor::Tensor;
use kiln_ffi::abi::{DLTensor, RawAny};
use kiln_ffi::{Any, AnyView, DataType, Device, Error, Function, Result};
use std::sync::Arc;

/// What a prepared node does.
pub(super) enum OpKind {
    /// Calls a library function with the arguments.
    Call(Function),
    /// `__nop`.
    Nop,
    /// `__copy`: argument 0 to argument 1.
    Copy,
}

/// A prepared `tvm_op` node: its arguments as `DLTensor`s and the packed values pointing at them.
pub(super) struct OpExec {
    pub(super) kind: OpKind,
    /// Owned (from `Box::into_raw`); reached through this pointer only.
    args: *mut [DLTensor],
    /// The shapes the `DLTensor`s point into.
    _shapes: Vec<Box<[i64]>>,
    /// `DLTensor*` values pointing into `args`.
    values: Box<[RawAny]>,
}

// SAFETY: the pointers lead into this struct's own allocations and to tensor memory that the
// executor keeps alive (its bound tensors); nothing is shared with another thread without the
// executor being moved or locked as a whole.
unsafe impl Send for OpExec {}

impl Drop for OpExec {
    fn drop(&mut self) {
        // SAFETY: from Box::into_raw in `OpExec::new`, freed once.
        drop(unsafe { Box::from_raw(self.args) });
    }
}

impl OpExec {
    fn new(kind: OpKind, tensors: &[&Tensor], flatten: bool) -> OpExec {
        let shapes: Vec<Box<[i64]>> = tensors
            .iter()
            .map(|t| {
                if flatten {
                    vec![t.numel() as i64].into_boxed_slice()
                } else {
                    t.shape().to_vec().into_boxed_slice()
                }
            })
            .collect();
        let args: Box<[DLTensor]> = tensors
            .iter()
            .zip(&shapes)
            .map(|(t, shape)| DLTensor {
                data: t.raw_data(),
                device: t.device().0,
                ndim: shape.len() as i32,
                dtype: t.dtype().0,
                shape: shape.as_ptr() as *mut i64,
                strides: std::ptr::null_mut(),
                byte_offset: t.byte_offset(),
            })
            .collect();
        let args = Box::into_raw(args);
        let base = args as *mut DLTensor;
        let values = (0..tensors.len())
            // SAFETY: `i` is within the slice.
            .map(|i| Any::from(unsafe { base.add(i) }).into_raw())
            .collect();
        OpExec {
            kind,
            args,
            _shapes: shapes,
            values,
        }
    }

    fn rebind(&mut self, arg: usize, t: &Tensor) {
        // SAFETY: `arg` is an index of this node's arguments (recorded at creation).
        let dl = unsafe { &mut *(self.args as *mut DLTensor).add(arg) };
        dl.data = t.raw_data();
        dl.byte_offset = t.byte_offset();
        dl.device = t.device().0;
    }

    /// Runs the node once.
    pub(super) fn run(&self) -> Result<()> {
        match &self.kind {
            OpKind::Call(f) => {
                // SAFETY: the values are DLTensor* into `self.args`, alive as long as `self`.
                let args = unsafe {
                    AnyView::slice_from_raw(self.values.as_ptr(), self.values.len() as i32)
                };
                f.call(args).map(|_| ())
            }
            OpKind::Nop => Ok(()),
            OpKind::Copy => {
                let base = self.args as *const DLTensor;
                // SAFETY: `__copy` nodes have two arguments, checked alike at creation, whose
                // memory is kept alive by the executor.
                unsafe { crate::device::copy_between(&*base, &*base.add(1), std::ptr::null_mut()) }
            }
        }
    }
}

/// A graph executor (TVM's `GraphExecutor`).
pub struct GraphExecutor {
    pub(super) graph: Arc<Graph>,
    lib: Module,
    devices: Vec<Device>,
    storage: Storage,
    /// The tensor each entry currently uses: its storage view, or outside memory (zero copy).
    bound: Vec<Tensor>,
    /// Prepared `tvm_op` nodes, by node index.
    pub(super) ops: Vec<Option<OpExec>>,
    /// For every entry, the (node, argument) pairs that read or write it.
    uses: Vec<Vec<(usize, usize)>>,
    output_eids: Vec<usize>,
}

fn label(graph: &Graph, nid: usize) -> String {
    format!("nodes[{nid}] ({:?})", graph.nodes[nid].name)
}

fn missing_function(graph: &Graph, nid: usize, func: &str, lib: &Module) -> Error {
    let mut msg = format!(
        "graph executor: {} calls `{func}`, which the library (module kind `{}`) does not define",
        label(graph, nid),
        lib.kind()
    );
    if let Some(l) = lib.downcast_node::<LibraryModule>() {
        let names = l.function_names();
        if !names.is_empty() {
            let shown: Vec<&str> = names.iter().take(12).map(String::as_str).collect();
            msg.push_str(&format!("; it defines: {}", shown.join(", ")));
            if names.len() > shown.len() {
                msg.push_str(", ...");
            }
        }
    } else if lib.kind() == "static_library" {
        msg.push_str(
            " (a static library cannot run: export the factory with export_library and load the \
             result)",
        );
    }
    Error::attribute_error(msg)
}

impl GraphExecutor {
    /// Parses `graph_json` and makes an executor (see [`GraphExecutor::new`]).
    pub fn from_json(graph_json: &str, lib: Module, devices: &[Device]) -> Result<GraphExecutor> {
        GraphExecutor::new(Arc::new(Graph::parse(graph_json)?), lib, devices)
    }

    /// Makes an executor of `graph` whose nodes call the functions of `lib` (or its imports),
    /// with memory on `devices` (entries go to the device of their `device_index`, else the
    /// first). A graph with entries on the host CPU beside entries on another device
    /// (`device_index` 1: functions of a device build that run on the host) gets `cpu(0)` added
    /// when `devices` has no CPU. Errors name the node whose function is missing or whose
    /// arguments do not fit.
    pub fn new(graph: Arc<Graph>, lib: Module, devices: &[Device]) -> Result<GraphExecutor> {
        GraphExecutor::with_params(graph, lib, devices, std::iter::empty())
    }

    /// [`new`](Self::new) with the params set: a param tensor that can serve as the entry's
    /// memory (its shape and dtype, compact, 64-byte aligned, on the entry's device) is used
    /// in place, no memory allocated for it (executors made from the same tensors share one
    /// copy of the weights; they must not be changed through this executor); the others are
    /// copied, as [`set_params`](Self::set_params) does. Names that are not inputs are errors.
    pub fn with_params<'a>(
        graph: Arc<Graph>,
        lib: Module,
        devices: &[Device],
        params: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    ) -> Result<GraphExecutor> {
        // Each param's input index and entry, resolved once.
        let params = params
            .into_iter()
            .map(|(name, t)| {
                let i = graph.require_input(name, "with_params")?;
                Ok((i, graph.entry_id(graph.arg_nodes[i], 0), t))
            })
            .collect::<Result<Vec<_>>>()?;
        let given = params.iter().map(|&(_, eid, t)| (eid, t.clone())).collect();
        if devices.is_empty() {
            return Err(Error::value_error(
                "a graph executor needs at least one device",
            ));
        }
        let mut devices = devices.to_vec();
        let cpu = Device::cpu(0);
        let wants_cpu = graph.device_types.as_ref().is_some_and(|d| {
            d.contains(&cpu.device_type()) && d.iter().any(|&t| t != cpu.device_type())
        });
        if wants_cpu && !devices.iter().any(|d| d.device_type() == cpu.device_type()) {
            devices.push(cpu);
        }
        let devices = &devices[..];
        let plan = StoragePlan::new(&graph, devices[0].device_type())?;
        let storage = Storage::allocate_with(&graph, &plan, devices, &given)?;
        let bound = storage.views.clone();
        let mut uses = vec![Vec::new(); graph.num_entries()];
        let mut ops = Vec::with_capacity(graph.nodes.len());
        for (nid, node) in graph.nodes.iter().enumerate() {
            let Some(param) = node.param.as_ref().filter(|_| node.op == OP_TVM) else {
                ops.push(None);
                continue;
            };
            let eids: Vec<usize> = node
                .inputs
                .iter()
                .map(|e| graph.entry_of(e))
                .chain((0..param.num_outputs).map(|k| graph.entry_id(nid, k)))
                .collect();
            let kind = match param.func_name.as_str() {
                FUNC_NOP => OpKind::Nop,
                FUNC_COPY => {
                    let ok = eids.len() == 2
                        && param.num_outputs == 1
                        && graph.shapes[eids[0]] == graph.shapes[eids[1]]
                        && graph.dtypes[eids[0]] == graph.dtypes[eids[1]];
                    if !ok {
                        return Err(Error::value_error(format!(
                            "graph executor: {} is a `__copy`, which needs one input and one \
                             output of the same shape and dtype",
                            label(&graph, nid)
                        )));
                    }
                    OpKind::Copy
                }
                name => OpKind::Call(
                    lib.get_function(name, true)?
                        .ok_or_else(|| missing_function(&graph, nid, name, &lib))?,
                ),
            };
            for (arg, &eid) in eids.iter().enumerate() {
                uses[eid].push((nid, arg));
            }
            let tensors: Vec<&Tensor> = eids.iter().map(|&e| &bound[e]).collect();
            ops.push(Some(OpExec::new(kind, &tensors, param.flatten_data)));
        }
        let output_eids = graph.heads.iter().map(|h| graph.entry_of(h)).collect();
        let mut exec = GraphExecutor {
            graph,
            lib,
            devices: devices.to_vec(),
            storage,
            bound,
            ops,
            uses,
            output_eids,
        };
        for (i, eid, t) in params {
            if !exec.bound[eid].same_as(t) {
                exec.set_input(i, t)?;
            }
        }
        Ok(exec)
    }

    /// The graph.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The library module the nodes call.
    pub fn lib(&self) -> &Module {
        &self.lib
    }

    /// The devices given at creation.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Bytes of memory the executor allocated for its entries.
    pub fn storage_bytes(&self) -> usize {
        self.storage
            .pools
            .iter()
            .flatten()
            .map(Tensor::nbytes)
            .sum()
    }

    /// Number of graph inputs (parameters included).
    pub fn num_inputs(&self) -> usize {
        self.graph.arg_nodes.len()
    }

    /// Number of graph outputs.
    pub fn num_outputs(&self) -> usize {
        self.output_eids.len()
    }

    /// The index of the input named `name`.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.graph.input_index(name)
    }

    /// The name of input `index`.
    pub fn input_name(&self, index: usize) -> Result<&str> {
        let nid = self.input_node(index, "input_name")?;
        Ok(&self.graph.nodes[nid].name)
    }

    fn input_node(&self, index: usize, what: &str) -> Result<usize> {
        self.graph.arg_nodes.get(index).copied().ok_or_else(|| {
            Error::index_error(format!(
                "{what}: input index {index} is out of range: the graph has {} inputs ({})",
                self.num_inputs(),
                self.graph.input_names().join(", ")
            ))
        })
    }

    /// The index of the input named `name`, or a `KeyError` that lists the inputs.
    pub fn require_input(&self, name: &str, what: &str) -> Result<usize> {
        self.graph.require_input(name, what)
    }

    fn input_eid(&self, index: usize, what: &str) -> Result<usize> {
        Ok(self.graph.entry_id(self.input_node(index, what)?, 0))
    }

    fn output_eid(&self, index: usize, what: &str) -> Result<usize> {
        self.output_eids.get(index).copied().ok_or_else(|| {
            Error::index_error(format!(
                "{what}: output index {index} is out of range: the graph has {} outputs",
                self.num_outputs()
            ))
        })
    }

    /// Shape and dtype of input `index`.
    pub fn input_info(&self, index: usize) -> Result<(&[i64], DataType)> {
        let eid = self.input_eid(index, "input_info")?;
        Ok((&self.graph.shapes[eid], self.graph.dtypes[eid]))
    }

    /// Shape and dtype of output `index`.
    pub fn output_info(&self, index: usize) -> Result<(&[i64], DataType)> {
        let eid = self.output_eid(index, "output_info")?;
        Ok((&self.graph.shapes[eid], self.graph.dtypes[eid]))
    }

    fn input_label(&self, index: usize) -> String {
        let name = self.input_name(index).unwrap_or("?");
        format!("input {name:?} (#{index})")
    }

    /// Checks that `t` has the shape and dtype of entry `eid`.
    fn check_fits(&self, eid: usize, t: &Tensor, what: &str, who: &str) -> Result<()> {
        let (shape, dtype) = (&self.graph.shapes[eid], self.graph.dtypes[eid]);
        if t.shape() != shape.as_slice() {
            return Err(Error::value_error(format!(
                "{what} {who}: expected shape {shape:?} (dtype {dtype}) but got a tensor of shape \
                 {:?} (dtype {})",
                t.shape(),
                t.dtype()
            )));
        }
        if t.dtype() != dtype {
            return Err(Error::type_error(format!(
                "{what} {who}: expected dtype {dtype} but got {} (shape {:?})",
                t.dtype(),
                t.shape()
            )));
        }
        Ok(())
    }

    /// Makes entry `eid` use `t` (every argument that refers to it is rewritten).
    fn bind(&mut self, eid: usize, t: Tensor) {
        for &(nid, arg) in &self.uses[eid] {
            if let Some(op) = self.ops[nid].as_mut() {
                op.rebind(arg, &t);
            }
        }
        self.bound[eid] = t;
        // A `__nop` views its input's memory as its output (a reshape): with either side bound
        // to outside memory (zero copy) the two no longer share it, and the node copies.
        for &(nid, _) in &self.uses[eid] {
            let node = &self.graph.nodes[nid];
            let is_view = node.inputs.len() == 1
                && node
                    .param
                    .as_ref()
                    .is_some_and(|p| p.func_name == FUNC_NOP && p.num_outputs == 1);
            let Some(op) = self.ops[nid].as_mut().filter(|_| is_view) else {
                continue;
            };
            let (src, dst) = (
                self.graph.entry_of(&node.inputs[0]),
                self.graph.entry_id(nid, 0),
            );
            let own = |e: usize| self.bound[e].same_as(&self.storage.views[e]);
            op.kind = if own(src) && own(dst) {
                OpKind::Nop
            } else {
                OpKind::Copy
            };
        }
    }

    /// Copies `value` into input `index` (shape and dtype must match; any device and layout).
    /// An input bound to outside memory by [`set_input_zero_copy`](Self::set_input_zero_copy)
    /// goes back to the executor's own memory.
    pub fn set_input(&mut self, index: usize, value: &Tensor) -> Result<()> {
        let eid = self.input_eid(index, "set_input")?;
        self.check_fits(eid, value, "set_input", &self.input_label(index))?;
        if !self.bound[eid].same_as(&self.storage.views[eid]) {
            let own = self.storage.views[eid].clone();
            self.bind(eid, own);
        }
        let dst = &self.bound[eid];
        if dst.raw_data() == value.raw_data()
            && dst.byte_offset() == value.byte_offset()
            && dst.device() == value.device()
        {
            return Ok(()); // the input's own memory
        }
        dst.copy_from(value)
            .map_err(|e| e.context(format!("set_input {}", self.input_label(index))))
    }

    /// Copies `value` into the input named `name`.
    pub fn set_input_by_name(&mut self, name: &str, value: &Tensor) -> Result<()> {
        let index = self.require_input(name, "set_input")?;
        self.set_input(index, value)
    }

    fn check_zero_copy(&self, eid: usize, t: &Tensor, what: &str, who: &str) -> Result<()> {
        self.check_fits(eid, t, what, who)?;
        let want = self.storage.views[eid].device();
        if t.device() != want {
            return Err(Error::value_error(format!(
                "{what} {who}: the tensor is on {} but the entry is on {}",
                device_label(t.device()),
                device_label(want)
            )));
        }
        if !t.is_contiguous() {
            return Err(Error::value_error(format!(
                "{what} {who}: the tensor is not contiguous"
            )));
        }
        if t.numel() > 0 && !t.is_aligned(ALLOC_ALIGNMENT) {
            return Err(Error::value_error(format!(
                "{what} {who}: the tensor's data is not aligned to {ALLOC_ALIGNMENT} bytes, which \
                 compiled code may assume; copy it with set_input instead"
            )));
        }
        Ok(())
    }

    /// Makes input `index` use `value`'s memory (no copy) until the next `set_input`.
    /// `value` must match the input's shape, dtype and device, be contiguous and 64-byte
    /// aligned; the executor keeps it alive.
    pub fn set_input_zero_copy(&mut self, index: usize, value: &Tensor) -> Result<()> {
        let eid = self.input_eid(index, "set_input_zero_copy")?;
        self.check_zero_copy(eid, value, "set_input_zero_copy", &self.input_label(index))?;
        self.bind(eid, value.clone());
        Ok(())
    }

    /// Makes output `index` be written into `value`'s memory (no copy), like
    /// [`set_input_zero_copy`](Self::set_input_zero_copy).
    pub fn set_output_zero_copy(&mut self, index: usize, value: &Tensor) -> Result<()> {
        let eid = self.output_eid(index, "set_output_zero_copy")?;
        self.check_zero_copy(
            eid,
            value,
            "set_output_zero_copy",
            &format!("output #{index}"),
        )?;
        self.bind(eid, value.clone());
        Ok(())
    }

    /// The tensor input `index` uses (the executor's memory, or the zero-copy tensor).
    pub fn get_input(&self, index: usize) -> Result<Tensor> {
        Ok(self.bound[self.input_eid(index, "get_input")?].clone())
    }

    /// The tensor output `index` is written to. It is the executor's memory: the next run
    /// overwrites it (copy it, or use [`copy_output_to`](Self::copy_output_to), to keep it).
    pub fn get_output(&self, index: usize) -> Result<Tensor> {
        Ok(self.bound[self.output_eid(index, "get_output")?].clone())
    }

    /// Copies output `index` into `out` (same shape and dtype; any device).
    pub fn copy_output_to(&self, index: usize, out: &Tensor) -> Result<()> {
        let eid = self.output_eid(index, "get_output")?;
        self.check_fits(
            eid,
            out,
            "get_output",
            &format!("into `out` for output #{index}"),
        )?;
        out.copy_from(&self.bound[eid])
    }

    /// Runs every node once, in order. An error names the node and its function.
    pub fn run(&mut self) -> Result<()> {
        for nid in 0..self.ops.len() {
            self.run_node(nid)?;
        }
        Ok(())
    }

    /// Runs node `nid` alone (nothing for inputs).
    pub fn run_node(&self, nid: usize) -> Result<()> {
        let Some(op) = self.ops.get(nid).and_then(Option::as_ref) else {
            return Ok(());
        };
        op.run().map_err(|e| {
            let func = self.graph.nodes[nid]
                .param
                .as_ref()
                .map_or("", |p| p.func_name.as_str());
            e.context(format!(
                "graph executor: running {} (function `{func}`)",
                label(&self.graph, nid)
            ))
        })
    }

    /// Runs the nodes up to and including `nid` and returns copies of its outputs on the host
    /// (TVM's `debug_get_node_output`).
    pub fn debug_get_node_output(&mut self, nid: usize) -> Result<Vec<Tensor>> {
        if nid >= self.graph.nodes.len() {
            return Err(Error::index_error(format!(
                "debug_get_node_output: node {nid} is out of range: the graph has {} nodes",
                self.graph.nodes.len()
            )));
        }
        for i in 0..=nid {
            self.run_node(i)?;
        }
        (0..self.graph.nodes[nid].num_outputs())
            .map(|k| self.bound[self.graph.entry_id(nid, k)].to_device(Device::cpu(0)))
            .collect()
    }

    /// Copies the tensors of a params file into the inputs they name (names that are not
    /// inputs are skipped, as in TVM). Returns how many were set.
    pub fn load_params(&mut self, bytes: &[u8]) -> Result<usize> {
        let mut set = 0;
        for (name, t) in params::load_params(bytes)? {
            if let Some(i) = self.input_index(&name) {
                self.set_input(i, &t)
                    .map_err(|e| e.context(format!("load_params: param {name:?}")))?;
                set += 1;
            }
        }
        Ok(set)
    }

    /// Copies named tensors into the inputs of those names; unknown names are an error.
    pub fn set_params<'a>(
        &mut self,
        params: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    ) -> Result<()> {
        for (name, t) in params {
            let i = self.require_input(name, "set_params")?;
            self.set_input(i, t)?;
        }
        Ok(())
    }

    /// Makes the inputs named in the params file `params` use the memory of `other`'s inputs of
    /// the same names (no copy), as TVM's `share_params`: several executors then hold one copy
    /// of the weights. Names that are not inputs of both are skipped. Returns how many inputs
    /// now share memory.
    pub fn share_params(&mut self, other: &GraphExecutor, params: &[u8]) -> Result<usize> {
        let names = params::load_param_names(params)?;
        let shared = other.inputs_named(&names)?;
        self.bind_shared(shared)
    }

    /// The tensors of the inputs called `names` (names that are not inputs are skipped).
    pub fn inputs_named(&self, names: &[String]) -> Result<Vec<(String, Tensor)>> {
        names
            .iter()
            .filter_map(|n| self.input_index(n).map(|i| (n, i)))
            .map(|(n, i)| Ok((n.clone(), self.get_input(i)?)))
            .collect()
    }

    /// Binds the inputs of the given names (when this graph has them) to the tensors, zero
    /// copy; returns how many were bound.
    pub fn bind_shared(&mut self, tensors: Vec<(String, Tensor)>) -> Result<usize> {
        let mut n = 0;
        for (name, t) in tensors {
            if let Some(i) = self.input_index(&name) {
                self.set_input_zero_copy(i, &t)
                    .map_err(|e| e.context(format!("share_params: param {name:?}")))?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// The device of entry `eid` (for timing).
    pub(super) fn entry_device(&self, eid: usize) -> Device {
        self.storage.views[eid].device()
    }
}

impl std::fmt::Debug for GraphExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GraphExecutor({} nodes, {} inputs, {} outputs, {} bytes of storage)",
            self.graph.nodes.len(),
            self.num_inputs(),
            self.num_outputs(),
            self.storage_bytes()
        )
    }
}

impl crate::executor::Executor for GraphExecutor {
    fn num_inputs(&self) -> usize {
        GraphExecutor::num_inputs(self)
    }

    fn num_outputs(&self) -> usize {
        GraphExecutor::num_outputs(self)
    }

    fn input_index(&self, name: &str) -> Option<usize> {
        GraphExecutor::input_index(self, name)
    }

    fn require_input(&self, name: &str, what: &str) -> Result<usize> {
        GraphExecutor::require_input(self, name, what)
    }

    fn input_name(&self, index: usize) -> Result<&str> {
        GraphExecutor::input_name(self, index)
    }

    fn input_info(&self, index: usize) -> Result<(&[i64], DataType)> {
        GraphExecutor::input_info(self, index)
    }

    fn output_info(&self, index: usize) -> Result<(&[i64], DataType)> {
        GraphExecutor::output_info(self, index)
    }

    fn set_input(&mut self, index: usize, value: &Tensor) -> Result<()> {
        GraphExecutor::set_input(self, index, value)
    }

    fn set_input_zero_copy(&mut self, index: usize, value: &Tensor) -> Result<()> {
        GraphExecutor::set_input_zero_copy(self, index, value)
    }

    fn get_input(&self, index: usize) -> Result<Tensor> {
        GraphExecutor::get_input(self, index)
    }

    fn get_output(&self, index: usize) -> Result<Tensor> {
        GraphExecutor::get_output(self, index)
    }

    fn copy_output_to(&self, index: usize, out: &Tensor) -> Result<()> {
        GraphExecutor::copy_output_to(self, index, out)
    }

    fn run(&mut self) -> Result<()> {
        GraphExecutor::run(self)
    }
}
