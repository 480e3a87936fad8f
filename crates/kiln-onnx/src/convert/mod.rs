//! The ONNX to Kiln graph converter (TVM's `relay.frontend.from_onnx`).
//!
//! [`from_onnx`] maps a validated [`Model`] to a `kiln_graph` [`IRModule`] whose `main` takes
//! the runtime inputs (static shapes from [`InputShapes`]) and then the parameters:
//! floating-point initializers become named parameter variables, returned with their values
//! (like TVM's `params`), while integer and boolean initializers and `Constant` nodes become
//! constants. Each ONNX op has one small converter function in the table [`converters`],
//! grouped by family (`elemwise`, `nn`, `conv`, `pool`, `normalize`, `attention`, `loss`,
//! `quant`, `index`, `data_dependent`, `einsum`, `recurrent`, `reduce`, `resize`, `shape`, `signal`, `control`, `tfidf`, `sequence`, and `ml` for the `ai.onnx.ml` domain, whose keys are
//! spelled `ai.onnx.ml.Op`); the table's keys are what
//! [`Model::check_supported_ops`] is given, so an unsupported op stops the import with one
//! error listing every gap.
//!
//! Every converted node is typed at once (errors carry the ONNX node's label and op type), and
//! a call whose arguments are all constants is folded ([`fold`]): shape computations
//! (`Shape -> Gather -> Concat -> Reshape`, `ConstantOfShape`, `Range`...) become constants
//! at compile time. The finished module goes through `InferType`.

mod attention;
mod col2im_run_time;
mod control;
mod conv;
mod data_dependent;
mod einsum;
mod elemwise;
mod fold;
mod generate;
mod grid_sample;
mod index;
mod loss;
mod ml;
mod nn;
mod normalize;
mod pool;
mod program;
pub use program::{from_onnx_dims, from_onnx_program};
mod quant;
mod recurrent;
mod reduce;
mod resize;
mod resize_run_time;
mod sequence;
mod shape;
mod shape_run_time;
mod shaped;
mod signal;
mod tfidf;

use std::collections::{BTreeMap, HashMap};

use kiln_ffi::DataType as GDataType;
use kiln_graph::ir::{AttrValue, Expr, Function, IRModule, Type, Var};
use kiln_runtime::tensor::Tensor as RtTensor;

use crate::{
    BoundShapes, DataType, InputShapes, Model, Node, OnnxError, Result, StaticInput, Tensor,
    TensorData,
};

/// A converter's error message (the driver adds the node's label and op type).
#[derive(Debug)]
pub struct Msg(pub String);

impl From<kiln_ffi::Error> for Msg {
    fn from(e: kiln_ffi::Error) -> Self {
        Msg(e.to_string())
    }
}
impl From<OnnxError> for Msg {
    fn from(e: OnnxError) -> Self {
        Msg(e.to_string())
    }
}
impl From<String> for Msg {
    fn from(e: String) -> Self {
        Msg(e)
    }
}
impl From<&str> for Msg {
    fn from(e: &str) -> Self {
        Msg(e.to_string())
    }
}

/// The result of a converter.
pub type CResult<T> = std::result::Result<T, Msg>;

/// One op's converter: the node's outputs, in order (a converter may return fewer than the
/// node declares when the rest are optional and unused).
pub type ConvertFn = fn(&mut Ctx<'_>, &Node) -> CResult<Vec<Expr>>;

/// The converter table: ONNX op type (default domain) to converter.
pub fn converters() -> &'static HashMap<&'static str, ConvertFn> {
    static TABLE: std::sync::OnceLock<HashMap<&'static str, ConvertFn>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: HashMap<&'static str, ConvertFn> = HashMap::new();
        attention::register(&mut t);
        elemwise::register(&mut t);
        generate::register(&mut t);
        grid_sample::register(&mut t);
        loss::register(&mut t);
        ml::register(&mut t);
        index::register(&mut t);
        nn::register(&mut t);
        conv::register(&mut t);
        control::register(&mut t);
        data_dependent::register(&mut t);
        pool::register(&mut t);
        quant::register(&mut t);
        normalize::register(&mut t);
        recurrent::register(&mut t);
        reduce::register(&mut t);
        resize::register(&mut t);
        sequence::register(&mut t);
        shape::register(&mut t);
        signal::register(&mut t);
        tfidf::register(&mut t);
        t.insert("Constant", |_, _| Ok(Vec::new())); // handled by the driver
        t
    })
}

/// The op types [`from_onnx`] converts, sorted.
pub fn supported_ops() -> Vec<&'static str> {
    let mut v: Vec<&str> = converters().keys().copied().collect();
    v.sort();
    v
}

/// Conversion state: the value of every ONNX name seen so far, typed.
pub struct Ctx<'a> {
    /// The model being converted.
    pub model: &'a Model,
    /// The default-domain opset.
    pub opset: i64,
    values: HashMap<String, Expr>,
}

impl Ctx<'_> {
    /// Input `i` of `node`, required.
    pub fn input(&self, node: &Node, i: usize) -> CResult<Expr> {
        let name = node
            .input(i)
            .ok_or_else(|| Msg(format!("input #{i} is required")))?;
        self.value(name)
    }

    /// Input `i` of `node` if present.
    pub fn opt_input(&self, node: &Node, i: usize) -> CResult<Option<Expr>> {
        node.input(i).map(|n| self.value(n)).transpose()
    }

    /// The names bound so far (graph inputs, initializers, node outputs).
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.values.keys()
    }

    /// Binds `name` to `value` (a subgraph's initializer).
    pub fn bind(&mut self, name: &str, value: Expr) {
        self.values.insert(name.to_string(), value);
    }

    /// The value bound to `name`.
    pub fn value_of(&self, name: &str) -> CResult<Expr> {
        self.value(name)
    }

    fn value(&self, name: &str) -> CResult<Expr> {
        self.values
            .get(name)
            .cloned()
            .ok_or_else(|| Msg(format!("value '{name}' is not defined")))
    }

    /// The constant value of input `i`, if the input is present and constant (initializers,
    /// `Constant` nodes and folded values).
    pub fn const_input(&self, node: &Node, i: usize) -> CResult<Option<RtTensor>> {
        let Some(name) = node.input(i) else {
            return Ok(None);
        };
        if let Some(t) = self.value(name)?.as_constant() {
            return Ok(Some(t.clone()));
        }
        match self.model.graph.constant(name) {
            Some(t) => Ok(Some(to_runtime(t)?)),
            None => Ok(None),
        }
    }

    /// Whether input `i` of `node` is present and known only at run time (not constant).
    pub fn run_time_input(&self, node: &Node, i: usize) -> CResult<bool> {
        Ok(node.input(i).is_some() && self.const_input(node, i)?.is_none())
    }

    /// Input `i` as constant integers; `None` if absent, an error if not constant.
    pub fn const_ints(&self, node: &Node, i: usize) -> CResult<Option<Vec<i64>>> {
        if node.input(i).is_none() {
            return Ok(None);
        }
        let t = self
            .const_input(node, i)?
            .ok_or_else(|| self.not_constant(node, i))?;
        Ok(Some(
            t.to_f64_vec()?.into_iter().map(|v| v as i64).collect(),
        ))
    }

    /// Input `i` as constant floats; `None` if absent, an error if not constant.
    pub fn const_floats(&self, node: &Node, i: usize) -> CResult<Option<Vec<f64>>> {
        if node.input(i).is_none() {
            return Ok(None);
        }
        let t = self
            .const_input(node, i)?
            .ok_or_else(|| self.not_constant(node, i))?;
        Ok(Some(t.to_f64_vec()?))
    }

    /// The error for input `i` of `node`, which must be known at compile time but is not.
    pub fn not_constant(&self, node: &Node, i: usize) -> Msg {
        self.not_constant_for(
            node,
            i,
            "its value decides the output's shape, which Kiln fixes at compile time",
        )
    }

    /// The error for input `i` of `node`, which must be known at compile time because of
    /// `why`, but is not.
    pub fn not_constant_for(&self, node: &Node, i: usize, why: &str) -> Msg {
        let Some(name) = node.input(i) else {
            return Msg(format!("input #{i} is required"));
        };
        if self.model.graph.inputs.iter().any(|v| v.name == *name) {
            Msg(format!(
                "input #{i} ('{name}') is a run-time input of the graph, but {why}: make it an \
                 initializer or freeze it at import (frozen inputs)"
            ))
        } else {
            // The graph inputs it is computed from (freezing them would make it constant).
            let mut from: Vec<String> = Vec::new();
            if let Ok(e) = self.value(name) {
                for v in kiln_graph::ir::visit::post_order(&e) {
                    if let Expr::Var(v) = v {
                        let n = v.name().to_string();
                        let is_input = self.model.graph.inputs.iter().any(|i| i.name == n);
                        if is_input && !from.contains(&n) {
                            from.push(n);
                        }
                    }
                }
            }
            let from = if from.is_empty() {
                String::new()
            } else {
                let names: Vec<String> = from.iter().map(|n| format!("'{n}'")).collect();
                format!(
                    " from the graph's run-time input(s) {} (freeze them at import to fix it)",
                    names.join(", ")
                )
            };
            Msg(format!(
                "input #{i} ('{name}') must be a compile-time constant: it is computed at run \
                 time{from}, but {why}"
            ))
        }
    }

    /// Axes given by attribute `attr` before opset `input_since`, by input `input` from it on.
    pub fn axes(
        &self,
        node: &Node,
        attr: &str,
        input_since: i64,
        input: usize,
    ) -> CResult<Option<Vec<i64>>> {
        if self.opset < input_since {
            Ok(node.opt_ints(attr)?)
        } else {
            self.const_ints(node, input)
        }
    }
}

/// A call of a registered op, typed at once (and folded when its arguments are constants).
pub fn call(name: &str, args: Vec<Expr>, attrs: &[(&str, AttrValue)]) -> CResult<Expr> {
    let e = kiln_graph::op::call(name, args, attrs)?;
    typed(e)
}

/// Types `e` (its arguments are typed already) and folds it when it is a call over constants.
pub fn typed(e: Expr) -> CResult<Expr> {
    let e = shallow_infer(&e)?;
    Ok(fold::fold(&e)?.unwrap_or(e))
}

/// A typed variable standing for a typed argument.
fn proxy(a: &Expr) -> CResult<Expr> {
    match a {
        Expr::Constant(_) => Ok(a.clone()), // folding reads constant arguments
        _ => Ok(Expr::var("arg", a.ty()?)),
    }
}

/// Types the node `e` whose children are typed, without walking the graph below it: the type
/// is inferred on a copy whose non-constant children are typed variables (InferType over the
/// whole expression would make the conversion quadratic in the graph's size).
fn shallow_infer(e: &Expr) -> CResult<Expr> {
    if e.checked_type().is_some() {
        return Ok(e.clone());
    }
    let probe = match e {
        Expr::Call(c) => {
            let args = c.args.iter().map(proxy).collect::<CResult<Vec<_>>>()?;
            Expr::call_raw(c.op.clone(), args, c.attrs.clone())
        }
        Expr::Tuple(t) => Expr::tuple(t.fields.iter().map(proxy).collect::<CResult<_>>()?),
        Expr::TupleGetItem(g) => Expr::get_item(proxy(&g.tuple)?, g.index as usize),
        _ => return Ok(kiln_graph::transform::infer_type::infer_expr(e)?),
    };
    let ty = kiln_graph::transform::infer_type::infer_expr(&probe)?.ty()?;
    Ok(e.with_type(ty))
}

/// `x` with its shape changed to `shape` (itself when the shape is already that). A shape
/// without `-1` is taken literally: a 0 in it is an empty axis, not a copy of the input's.
pub fn reshape(x: Expr, shape: impl Into<Vec<i64>>) -> CResult<Expr> {
    let shape = shape.into();
    if shape_of(&x)? == shape {
        return Ok(x);
    }
    let allowzero = !shape.contains(&-1);
    call(
        "reshape",
        vec![x],
        &[("newshape", shape.into()), ("allowzero", allowzero.into())],
    )
}

/// `x` with its axes permuted to `axes`.
pub fn transpose(x: Expr, axes: impl Into<Vec<i64>>) -> CResult<Expr> {
    call("transpose", vec![x], &[("axes", axes.into().into())])
}

/// The static shape of a typed tensor expression.
pub fn shape_of(e: &Expr) -> CResult<Vec<i64>> {
    let ty = e.ty()?;
    ty.as_tensor()
        .map(|(s, _)| s.to_vec())
        .ok_or_else(|| Msg(format!("expected a tensor, got a value of type {ty}")))
}

/// The element type of a typed tensor expression.
pub fn dtype_of(e: &Expr) -> CResult<GDataType> {
    let ty = e.ty()?;
    ty.as_tensor()
        .map(|(_, d)| d)
        .ok_or_else(|| Msg(format!("expected a tensor, got a value of type {ty}")))
}

/// A scalar constant of `dtype`.
pub fn scalar(v: f64, dtype: GDataType) -> CResult<Expr> {
    Ok(Expr::constant(RtTensor::from_f64s(
        &[v],
        &[],
        dtype,
        kiln_ffi::Device::cpu(0),
    )?))
}

/// A constant of `dtype` and `shape` from values.
pub fn constant(values: &[f64], shape: &[i64], dtype: GDataType) -> CResult<Expr> {
    typed(Expr::constant(RtTensor::from_f64s(
        values,
        shape,
        dtype,
        kiln_ffi::Device::cpu(0),
    )?))
}

/// An `int64` 1-D constant.
pub fn const_i64(values: &[i64]) -> CResult<Expr> {
    let v: Vec<f64> = values.iter().map(|&x| x as f64).collect();
    constant(&v, &[values.len() as i64], GDataType::int(64))
}

/// Kiln's element type for an ONNX one.
pub fn graph_dtype(d: DataType) -> GDataType {
    d.kiln_dtype()
}

/// A host tensor of the ONNX view as a Kiln runtime tensor (CPU).
pub fn to_runtime(t: &Tensor) -> Result<RtTensor> {
    let shape: Vec<i64> = t.dims.iter().map(|&d| d as i64).collect();
    let dtype = graph_dtype(t.dtype());
    let bad = |e: kiln_ffi::Error| OnnxError::Tensor {
        tensor: t.name.clone(),
        message: e.to_string(),
    };
    let out = RtTensor::empty(&shape, dtype, kiln_ffi::Device::cpu(0)).map_err(bad)?;
    let bytes = match &t.data {
        // One byte per bool in both formats.
        TensorData::Bool(v) => v.iter().map(|&b| b as u8).collect(),
        _ => t.to_le_bytes(),
    };
    out.copy_from_bytes(&bytes).map_err(bad)?;
    Ok(out)
}

fn node_error(node: &Node, m: Msg) -> OnnxError {
    OnnxError::Convert {
        node: node.label(),
        op_type: node.op_type.clone(),
        message: m.0,
    }
}

/// Graph inputs given fixed values at import: each becomes a constant of the graph instead of a
/// run-time input (like an initializer), so that shapes computed from it (Resize's `sizes`,
/// Reshape's `shape`, Slice's `starts`, a Reduce's `axes`...) are known at compile time.
pub type FrozenInputs = BTreeMap<String, RtTensor>;

/// Converts `model` to a Kiln graph module and its parameters.
///
/// `shapes` gives static shapes to inputs with symbolic dimensions (see
/// [`crate::Graph::bind_input_shapes`]). Returns the module (typed by `InferType`) whose `main`
/// takes the runtime inputs and then one parameter per returned `(name, value)`.
pub fn from_onnx(
    model: &Model,
    shapes: &InputShapes,
) -> Result<(IRModule, Vec<(String, RtTensor)>)> {
    from_onnx_frozen(model, shapes, &FrozenInputs::new())
}

/// [`from_onnx`] with the graph inputs of `frozen` fixed to their values (see [`FrozenInputs`]);
/// each value must have the input's element type and (bound) shape.
pub fn from_onnx_frozen(
    model: &Model,
    shapes: &InputShapes,
    frozen: &FrozenInputs,
) -> Result<(IRModule, Vec<(String, RtTensor)>)> {
    let table = converters();
    model.check_supported_ops(table.keys().copied())?;
    let bound = model.graph.bind_input_shapes(shapes)?;
    let mut ctx = Ctx {
        model,
        opset: model.opset(),
        values: HashMap::new(),
    };
    check_frozen(&bound, frozen)?;
    let mut vars = Vec::new();
    for inp in &bound.inputs {
        let (ty, fixed) = input_binding(inp, frozen)?;
        if let Some(e) = fixed {
            ctx.values.insert(inp.name.clone(), e);
            continue;
        }
        let v = Var::new(&inp.name, ty);
        ctx.values.insert(inp.name.clone(), v.expr());
        vars.push(v);
    }
    let n_inputs = vars.len();
    let mut params = Vec::new();
    for t in model.graph.initializers() {
        let rt = to_runtime(t)?;
        let is_float = matches!(
            t.dtype(),
            DataType::Float32 | DataType::Float16 | DataType::Float64 | DataType::BFloat16
        );
        let e = if is_float && !t.is_scalar() {
            let v = Var::new(&t.name, Type::tensor(rt.shape(), rt.dtype()));
            vars.push(v.clone());
            params.push((t.name.clone(), rt));
            v.expr()
        } else {
            typed(Expr::constant(rt)).map_err(|m| OnnxError::Graph(m.0))?
        };
        ctx.values.insert(t.name.clone(), e);
    }
    convert_nodes(&mut ctx, &model.graph.nodes)?;
    let outs: Vec<Expr> = model
        .graph
        .outputs
        .iter()
        .map(|o| {
            ctx.values
                .get(&o.name)
                .cloned()
                .ok_or_else(|| OnnxError::Graph(format!("graph output '{}' is undefined", o.name)))
        })
        .collect::<Result<_>>()?;
    let body = if outs.len() == 1 {
        outs.into_iter().next().unwrap()
    } else {
        Expr::tuple(outs)
    };
    // Keep every runtime input, and the parameters the graph uses (initializers read only as
    // compile-time values, like Reshape shapes or Resize scales, are dropped).
    let used: std::collections::HashSet<usize> = kiln_graph::ir::visit::post_order(&body)
        .iter()
        .filter(|e| matches!(e, Expr::Var(_)))
        .map(Expr::key)
        .collect();
    let mut kept_vars = vars[..n_inputs].to_vec();
    let mut kept_params = Vec::new();
    for (v, p) in vars[n_inputs..].iter().zip(params) {
        if used.contains(&v.expr().key()) {
            kept_vars.push(v.clone());
            kept_params.push(p);
        }
    }
    let (vars, params) = (kept_vars, kept_params);
    let m = IRModule::from_main(Function::new(vars, body));
    let m = kiln_graph::transform::infer_type()
        .apply(m)
        .map_err(|e| OnnxError::Graph(e.to_string()))?;
    Ok((m, params))
}

/// Checks that every input of `frozen` is a run-time input of the bound graph.
fn check_frozen(bound: &BoundShapes, frozen: &FrozenInputs) -> Result<()> {
    for name in frozen.keys() {
        if !bound.inputs.iter().any(|i| i.name == *name) {
            return Err(OnnxError::Graph(format!(
                "frozen input '{name}' is not a run-time input of the graph"
            )));
        }
    }
    Ok(())
}

/// The type of the bound input `inp`, and the typed constant that stands for it when `frozen`
/// fixes its value (which must have that type).
fn input_binding(inp: &StaticInput, frozen: &FrozenInputs) -> Result<(Type, Option<Expr>)> {
    let shape: Vec<i64> = inp.shape.iter().map(|&d| d as i64).collect();
    let ty = Type::tensor(&shape, graph_dtype(inp.dtype));
    let Some(t) = frozen.get(&inp.name) else {
        return Ok((ty, None));
    };
    let given = Type::tensor(t.shape(), t.dtype());
    if given != ty {
        return Err(OnnxError::Graph(format!(
            "frozen input '{}' is declared {ty} but its value is {given}",
            inp.name
        )));
    }
    let e = typed_constant(Expr::constant(t.clone())).map_err(|m| OnnxError::Graph(m.0))?;
    Ok((ty, Some(e)))
}

/// Converts `nodes` (in order) into `ctx`, binding each output name to its value: the body of
/// the main graph, and of the subgraphs that control flow inlines.
fn convert_nodes(ctx: &mut Ctx<'_>, nodes: &[Node]) -> Result<()> {
    let table = converters();
    for node in nodes {
        if node.is_constant() {
            let t = node.constant_value()?;
            let e = typed(Expr::constant(to_runtime(&t)?)).map_err(|m| node_error(node, m))?;
            let out = node
                .outputs
                .first()
                .ok_or_else(|| node_error(node, Msg("the node has no output".into())))?;
            ctx.values.insert(out.clone(), e);
            continue;
        }
        let f = table.get(node.qualified_op().as_str()).ok_or_else(|| {
            node_error(
                node,
                Msg(format!(
                    "operator type {} is not supported",
                    node.qualified_op()
                )),
            )
        })?;
        let outs = f(ctx, node).map_err(|m| node_error(node, m))?;
        for (k, name) in node.outputs.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let e = outs.get(k).cloned().ok_or_else(|| {
                node_error(
                    node,
                    Msg(format!("output #{k} ('{name}') is not supported by Kiln")),
                )
            })?;
            let e = typed(e).map_err(|m| node_error(node, m))?;
            ctx.values.insert(name.clone(), e);
        }
    }
    Ok(())
}

/// Normalizes a possibly negative `axis` for rank `ndim`.
pub fn norm_axis(axis: i64, ndim: usize) -> CResult<usize> {
    Ok(kiln_graph::op::normalize_axis(axis, ndim)?)
}

/// Types a constant expression (no folding needed).
fn typed_constant(e: Expr) -> CResult<Expr> {
    Ok(kiln_graph::transform::infer_type::infer_expr(&e)?)
}
