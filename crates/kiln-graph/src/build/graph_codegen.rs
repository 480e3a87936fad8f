//! Graph codegen (TVM's `GraphExecutorCodegen`): `main` of a fused module to the graph
//! executor's JSON, the params and the list of primitive functions to compile.
//!
//! - `main`'s parameters become `null` nodes named after the variables (graph inputs);
//!   constants that `main` passes to fused functions become `null` nodes `p0`, `p1`, ... (the
//!   first names no input has) and params of those names.
//! - Each call of a `Primitive = 1` function becomes a `tvm_op` node whose `func_name` names
//!   the lowered function (`fused_nn_conv2d_add_nn_relu`); structurally equal functions share
//!   one name and are compiled once (TVM's compile-engine cache, keyed by
//!   [`structural_hash`]); other functions with the same
//!   op sequence get `_1`, `_2`, ... suffixes. A direct operator call in `main` (no FuseOps) is
//!   wrapped into its own primitive function.
//! - Tuples and tuple projections only route entries; `main`'s result (a tensor or a tuple of
//!   tensors) gives the heads.
//! - Storage ids come from [`super::storage::plan_storage_on`].
//!
//! [`graph_codegen_placed`] places the graph on a device (TVM's heterogeneous execution): every
//! entry is on the device, except the inputs and outputs of the functions that the placement
//! puts on the host CPU (those without a device schedule). A `__copy` node brings each entry
//! to the device of a function that reads it from the other one (once per entry and device);
//! graph inputs and constants read only on the host are placed there (no copies of weights each
//! run); entries of the two devices never share storage, and the JSON's `device_index` gives each
//! entry's DLPack device type (written only when some entry is on the host).

use super::hash::structural_hash;
use super::storage::{plan_storage_on, PlanNode};
use crate::ir::attrs::{make_map, AttrValue};
use crate::ir::structural::structural_equal;
use crate::ir::{Expr, Function, IRModule, Type, Var};
use crate::transform::fuse_ops::fused_name;
use crate::transform::infer_type::infer_function;
use kiln_ffi::{DataType, Error, Result};
use kiln_runtime::graph_executor::graph_json::{
    Graph, Node, NodeEntry, OpParam, FUNC_COPY, FUNC_NOP, OP_NULL, OP_TVM,
};
use kiln_runtime::graph_executor::storage::entry_bytes;
use kiln_runtime::tensor::Tensor;
use std::collections::HashMap;

/// What the graph codegen produces.
pub struct GraphCodegenResult {
    /// The graph, storage planned.
    pub graph: Graph,
    /// The graph JSON (TVM's format).
    pub graph_json: String,
    /// Named constants (`p0`, ...).
    pub params: Vec<(String, Tensor)>,
    /// The distinct primitive functions by their lowered name, in first-use order.
    pub functions: Vec<(String, Function)>,
    /// The functions placed on the host CPU by [`graph_codegen_placed`] (none otherwise).
    pub host_functions: Vec<String>,
}

/// DLPack device type of the host CPU.
pub const HOST_DEVICE_TYPE: i32 = 1;

/// Decides, for a primitive function of the given lowered name, whether it runs on the host.
pub type HostPlacement<'a> = &'a dyn Fn(&str, &Function) -> Result<bool>;

/// The tensor (shape, dtype) list of a type: one for a tensor, one per field for a tuple.
fn flat_types(t: &Type) -> Result<Vec<(Vec<i64>, DataType)>> {
    match t {
        Type::Tensor(_) => {
            let (s, d) = t.as_tensor().expect("tensor");
            Ok(vec![(s.to_vec(), d)])
        }
        Type::Tuple(_) => {
            let mut v = Vec::new();
            for f in t.as_tuple().expect("tuple") {
                v.extend(flat_types(f)?);
            }
            Ok(v)
        }
    }
}

/// TVM's limit on fused function names (`kMaxFuncNameLength`).
pub const MAX_FUNC_NAME_LENGTH: usize = 80;

/// A name longer than [`MAX_FUNC_NAME_LENGTH`] cut there, followed by `_<hash>_` of the whole
/// name (as TVM's compile engine does), so long fused chains keep distinct, bounded names.
pub fn truncate_name(name: String) -> String {
    use std::hash::{Hash, Hasher};
    if name.len() <= MAX_FUNC_NAME_LENGTH {
        return name;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    format!("{}_{:x}_", &name[..MAX_FUNC_NAME_LENGTH], h.finish())
}

/// Wraps a direct operator call of `main` into a primitive function of fresh parameters.
fn wrap_call(call: &Expr) -> Result<(Function, Vec<Expr>)> {
    let c = call.as_call().expect("a call");
    let mut params = Vec::new();
    let mut inner = Vec::new();
    let mut outer = Vec::new();
    for a in c.args.iter() {
        if let Expr::Tuple(t) = a {
            let mut fields = Vec::new();
            for f in t.fields.iter() {
                let v = Var::new(&format!("p{}", params.len()), f.ty()?);
                fields.push(v.expr());
                params.push(v);
                outer.push(f.clone());
            }
            inner.push(Expr::tuple(fields));
        } else {
            let v = Var::new(&format!("p{}", params.len()), a.ty()?);
            inner.push(v.expr());
            params.push(v);
            outer.push(a.clone());
        }
    }
    let body = Expr::call_raw(c.op.clone(), inner, c.attrs.clone());
    let f = Function::with_attrs(params, body, make_map(&[("Primitive", AttrValue::Int(1))]));
    Ok((infer_function(&f)?, outer))
}

struct Codegen<'a> {
    graph: Graph,
    params: Vec<(String, Tensor)>,
    functions: Vec<(String, Function)>,
    /// Structural hash -> indices into `functions`.
    cache: HashMap<u64, Vec<usize>>,
    memo: HashMap<usize, Vec<NodeEntry>>,
    /// The DLPack device type of every entry.
    entry_devices: Vec<i32>,
    /// The graph's device type and the host placement, for a placed graph.
    placement: Option<(i32, HostPlacement<'a>)>,
    /// Placement by function name.
    on_host: HashMap<String, bool>,
    /// (entry id, device type) -> the `__copy` output holding that entry there.
    copies: HashMap<(usize, i32), NodeEntry>,
    /// Graph inputs and constants (by expression key) -> the device of their readers.
    leaf_devices: HashMap<usize, i32>,
    /// `__nop` nodes (views of their one input, [`is_view`]).
    views: std::collections::HashSet<usize>,
}

/// Whether fused function `f` only views its one tensor parameter under another shape (every
/// call in its body is of an operator marked `view`, down to the parameter): its output is
/// the parameter's bytes, so the graph gives it the parameter's storage and runs nothing.
fn is_view(f: &Function) -> bool {
    let [p] = f.params() else {
        return false;
    };
    let mut e = f.body().clone();
    let mut calls = 0;
    loop {
        if let Expr::Var(v) = &e {
            return calls > 0 && v.expr().key() == p.expr().key();
        }
        let Some(name) = e.op_name() else {
            return false;
        };
        let view = crate::op::get(name).is_ok_and(|d| d.view);
        if !view || e.args().len() != 1 {
            return false;
        }
        e = e.args()[0].clone();
        calls += 1;
    }
}

impl Codegen<'_> {
    fn entry(node_id: usize, index: usize) -> NodeEntry {
        NodeEntry {
            node_id,
            index,
            version: 0,
        }
    }

    /// The device type of the graph (0 when not placed).
    fn graph_device(&self) -> i32 {
        self.placement.as_ref().map_or(0, |p| p.0)
    }

    /// Adds a node with outputs of `types` on device type `dev`; returns its entries.
    fn add_node_on(
        &mut self,
        node: Node,
        types: Vec<(Vec<i64>, DataType)>,
        dev: i32,
    ) -> Vec<NodeEntry> {
        let nid = self.graph.nodes.len();
        let is_input = node.is_input();
        self.graph.nodes.push(node);
        if is_input {
            self.graph.arg_nodes.push(nid);
        }
        let base = *self.graph.node_row_ptr.last().expect("starts with 0");
        self.graph.node_row_ptr.push(base + types.len());
        let mut out = Vec::new();
        for (k, (s, d)) in types.into_iter().enumerate() {
            self.graph.shapes.push(s);
            self.graph.dtypes.push(d);
            self.entry_devices.push(dev);
            out.push(Self::entry(nid, k));
        }
        out
    }

    /// The device of a graph input or constant: the one of all the functions reading it, else
    /// the graph's device.
    fn leaf_device(&self, e: &Expr) -> i32 {
        self.leaf_devices
            .get(&e.key())
            .copied()
            .unwrap_or_else(|| self.graph_device())
    }

    /// Records, for every graph input and constant of `main`, the device of the functions
    /// reading it (the graph's device when they disagree), so that inputs and weights read
    /// only on the host are there without copies.
    fn place_leaves(&mut self, main: &Function) -> Result<()> {
        let gd = self.graph_device();
        for e in crate::ir::visit::post_order(main.body()) {
            let Expr::Call(c) = &e else { continue };
            let f = match &c.op {
                Expr::Function(f) if f.is_primitive() => f.clone(),
                Expr::Op(_) => wrap_call(&e)?.0,
                _ => continue,
            };
            let name = self.function_name(&f);
            let dev = if self.is_host(&name, &f)? {
                HOST_DEVICE_TYPE
            } else {
                gd
            };
            let mut leaves = Vec::new();
            for a in c.args.iter() {
                match a {
                    Expr::Tuple(t) => leaves.extend(t.fields.iter().cloned()),
                    other => leaves.push(other.clone()),
                }
            }
            for a in leaves {
                if matches!(a, Expr::Var(_) | Expr::Constant(_)) {
                    self.leaf_devices
                        .entry(a.key())
                        .and_modify(|d| {
                            if *d != dev {
                                *d = gd;
                            }
                        })
                        .or_insert(dev);
                }
            }
        }
        Ok(())
    }

    fn input_node(&mut self, name: &str, ty: &Type, dev: i32) -> Result<Vec<NodeEntry>> {
        let node = Node {
            op: OP_NULL.into(),
            name: name.into(),
            inputs: vec![],
            param: None,
            extra_attrs: vec![],
        };
        let types = flat_types(ty)?;
        Ok(self.add_node_on(node, types, dev))
    }

    /// The lowered name of `f`: an existing one for a structurally equal function (looked up
    /// by [`structural_hash`], confirmed by `structural_equal`).
    fn function_name(&mut self, f: &Function) -> String {
        let fe = Expr::Function(f.clone());
        let hash = structural_hash(f);
        for &i in self.cache.get(&hash).map(Vec::as_slice).unwrap_or(&[]) {
            let (name, g) = &self.functions[i];
            if structural_equal(&fe, &Expr::Function(g.clone())) {
                return name.clone();
            }
        }
        let base = truncate_name(fused_name(f));
        let mut name = base.clone();
        let mut k = 1;
        while self.functions.iter().any(|(n, _)| *n == name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.cache
            .entry(hash)
            .or_default()
            .push(self.functions.len());
        self.functions.push((name.clone(), f.clone()));
        name
    }

    /// Whether the function `name` runs on the host (asked once per function).
    fn is_host(&mut self, name: &str, f: &Function) -> Result<bool> {
        let Some((_, place)) = self.placement else {
            return Ok(false);
        };
        if let Some(&h) = self.on_host.get(name) {
            return Ok(h);
        }
        let h = place(name, f)?;
        self.on_host.insert(name.to_string(), h);
        Ok(h)
    }

    /// `e` on device type `dev`: itself when it is there, else the output of a `__copy` node
    /// (one per entry and device).
    fn on_device(&mut self, e: NodeEntry, dev: i32) -> NodeEntry {
        let eid = self.graph.entry_of(&e);
        if self.entry_devices[eid] == dev {
            return e;
        }
        if let Some(&c) = self.copies.get(&(eid, dev)) {
            return c;
        }
        let node = Node {
            op: OP_TVM.into(),
            name: format!("__copy_{}_{}", self.graph.nodes[e.node_id].name, e.index),
            inputs: vec![e],
            param: Some(OpParam {
                func_name: FUNC_COPY.into(),
                num_inputs: 1,
                num_outputs: 1,
                flatten_data: false,
            }),
            extra_attrs: vec![],
        };
        let ty = (self.graph.shapes[eid].clone(), self.graph.dtypes[eid]);
        let c = self.add_node_on(node, vec![ty], dev)[0];
        self.copies.insert((eid, dev), c);
        c
    }

    fn call_node(&mut self, f: &Function, args: &[Expr], ty: &Type) -> Result<Vec<NodeEntry>> {
        if self.placement.is_none() && is_view(f) {
            let input = self.memo[&args[0].key()].clone();
            // A graph input may be bound without a copy (set_input_zero_copy): keep its kernel.
            if let [e] = input.as_slice() {
                if !self.graph.nodes[e.node_id].is_input() {
                    let node = Node {
                        op: OP_TVM.into(),
                        name: FUNC_NOP.into(),
                        param: Some(OpParam {
                            func_name: FUNC_NOP.into(),
                            num_inputs: 1,
                            num_outputs: 1,
                            flatten_data: false,
                        }),
                        inputs: input.clone(),
                        extra_attrs: vec![],
                    };
                    self.views.insert(self.graph.nodes.len());
                    let dev = self.graph_device();
                    return Ok(self.add_node_on(node, flat_types(ty)?, dev));
                }
            }
        }
        let name = self.function_name(f);
        let dev = if self.is_host(&name, f)? {
            HOST_DEVICE_TYPE
        } else {
            self.graph_device()
        };
        let mut inputs = Vec::new();
        for a in args {
            let entries = self.memo[&a.key()].clone();
            for e in entries {
                let e = if self.placement.is_some() {
                    self.on_device(e, dev)
                } else {
                    e
                };
                inputs.push(e);
            }
        }
        let types = flat_types(ty)?;
        let node = Node {
            op: OP_TVM.into(),
            name: name.clone(),
            param: Some(OpParam {
                func_name: name,
                num_inputs: inputs.len(),
                num_outputs: types.len(),
                flatten_data: false,
            }),
            inputs,
            extra_attrs: vec![],
        };
        Ok(self.add_node_on(node, types, dev))
    }

    fn visit(&mut self, e: &Expr) -> Result<()> {
        let entries = match e {
            Expr::Op(_) | Expr::Function(_) => return Ok(()),
            Expr::Var(v) => {
                if self.memo.contains_key(&e.key()) {
                    return Ok(());
                }
                return Err(Error::value_error(format!(
                    "graph codegen: `{}` is not a parameter of main",
                    v.name()
                )));
            }
            Expr::Constant(c) => {
                let taken = |n: &str| self.graph.nodes.iter().any(|x| x.is_input() && x.name == n);
                let mut k = self.params.len();
                while taken(&format!("p{k}")) {
                    k += 1;
                }
                let name = format!("p{k}");
                self.params.push((name.clone(), c.data.clone()));
                let dev = self.leaf_device(e);
                self.input_node(&name, &e.ty()?, dev)?
            }
            Expr::Tuple(t) => {
                let mut v = Vec::new();
                for f in t.fields.iter() {
                    v.extend(self.memo[&f.key()].iter().copied());
                }
                v
            }
            Expr::TupleGetItem(g) => {
                let src = &self.memo[&g.tuple.key()];
                vec![*src
                    .get(g.index as usize)
                    .ok_or_else(|| Error::value_error("graph codegen: tuple index out of range"))?]
            }
            Expr::Call(c) => {
                let ty = e.ty()?;
                match &c.op {
                    Expr::Function(f) if f.is_primitive() => self.call_node(f, &c.args, &ty)?,
                    Expr::Op(_) => {
                        let (f, args) = wrap_call(e)?;
                        for a in &args {
                            if !self.memo.contains_key(&a.key()) {
                                self.visit(a)?;
                            }
                        }
                        self.call_node(&f, &args, &ty)?
                    }
                    _ => {
                        return Err(Error::value_error(
                            "graph codegen: main may only call primitive functions and operators",
                        ))
                    }
                }
            }
        };
        self.memo.insert(e.key(), entries);
        Ok(())
    }
}

/// Runs the graph codegen on `module`'s (typed, fused) `main`.
pub fn graph_codegen(module: &IRModule) -> Result<GraphCodegenResult> {
    codegen(module, None)
}

/// [`graph_codegen`] for a graph on the device of DLPack type `device_type`, with the
/// functions for which `on_host` is true on the host CPU (see the module docs).
pub fn graph_codegen_placed(
    module: &IRModule,
    device_type: i32,
    on_host: HostPlacement<'_>,
) -> Result<GraphCodegenResult> {
    codegen(module, Some((device_type, on_host)))
}

fn codegen(
    module: &IRModule,
    placement: Option<(i32, HostPlacement<'_>)>,
) -> Result<GraphCodegenResult> {
    let main = infer_function(&module.main()?)?;
    let mut cg = Codegen {
        graph: Graph {
            nodes: vec![],
            arg_nodes: vec![],
            heads: vec![],
            node_row_ptr: vec![0],
            shapes: vec![],
            dtypes: vec![],
            storage_ids: vec![],
            device_types: None,
            storage_scopes: None,
        },
        params: vec![],
        functions: vec![],
        cache: HashMap::new(),
        memo: HashMap::new(),
        entry_devices: vec![],
        placement,
        on_host: HashMap::new(),
        copies: HashMap::new(),
        leaf_devices: HashMap::new(),
        views: Default::default(),
    };
    if cg.placement.is_some() {
        cg.place_leaves(&main)?;
    }
    for p in main.params() {
        let ty = p
            .expr()
            .checked_type()
            .cloned()
            .ok_or_else(|| Error::value_error("graph codegen: untyped main parameter"))?;
        let dev = cg.leaf_device(&p.expr());
        let entries = cg.input_node(p.name(), &ty, dev)?;
        cg.memo.insert(p.expr().key(), entries);
    }
    for e in crate::ir::visit::post_order(main.body()) {
        if !cg.memo.contains_key(&e.key()) {
            cg.visit(&e)?;
        }
    }
    cg.graph.heads = cg.memo[&main.body().key()].clone();
    if let Some(gd) = cg.placement.as_ref().map(|p| p.0) {
        // Everything on the host (every function without a device schedule): the outputs are
        // copied to the device, so that the executor created there has memory on both.
        if !cg.entry_devices.contains(&gd) && cg.entry_devices.contains(&HOST_DEVICE_TYPE) {
            let heads = cg.graph.heads.clone();
            cg.graph.heads = heads.into_iter().map(|h| cg.on_device(h, gd)).collect();
        }
    }
    // Storage plan.
    let g = &cg.graph;
    let plan_nodes: Vec<PlanNode> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(nid, n)| PlanNode {
            is_input: n.is_input(),
            inputs: n.inputs.iter().map(|e| g.entry_of(e)).collect(),
            outputs: (g.node_row_ptr[nid]..g.node_row_ptr[nid + 1]).collect(),
            alias: cg.views.contains(&nid).then(|| g.entry_of(&n.inputs[0])),
        })
        .collect();
    let bytes: Vec<usize> = g
        .shapes
        .iter()
        .zip(&g.dtypes)
        .map(|(s, d)| entry_bytes(s, *d))
        .collect::<Result<_>>()?;
    let heads: Vec<usize> = g.heads.iter().map(|e| g.entry_of(e)).collect();
    cg.graph.storage_ids = plan_storage_on(
        &plan_nodes,
        &bytes,
        &cg.graph.dtypes,
        &cg.entry_devices,
        &heads,
    );
    if cg.entry_devices.contains(&HOST_DEVICE_TYPE) {
        cg.graph.device_types = Some(cg.entry_devices.clone());
    }
    cg.graph.validate()?;
    let graph_json = cg.graph.to_json();
    let host_functions = cg
        .functions
        .iter()
        .filter(|(n, _)| cg.on_host.get(n).copied().unwrap_or(false))
        .map(|(n, _)| n.clone())
        .collect();
    Ok(GraphCodegenResult {
        graph: cg.graph,
        graph_json,
        params: cg.params,
        functions: cg.functions,
        host_functions,
    })
}
