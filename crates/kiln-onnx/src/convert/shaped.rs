//! Nodes whose output shapes depend on small run-time integer inputs (a reduction's `axes`...),
//! computed by kernels compiled with run-time extents: a shape function (a VM builtin of
//! `kiln_runtime::vm::shape_fns`) computes the shapes from the inputs, the VM allocates the
//! results by them and calls the kernel, whose extents are bound from the tensors it is given;
//! a result may then be viewed under another of the shapes (a reduction without `keepdims`).
//! Each operator describes its kernel in its own converter file; [`run_time`] picks it.

use kiln_graph::ir::{visit, Expr, Function, Type, Var};

use super::{convert_nodes, CResult, Ctx};
use crate::Node;

/// Where a result of a [`ShapedKernel`] comes from.
pub(super) enum Source {
    /// The kernel's next result, allocated by this shape (an index among the shape function's
    /// results).
    Kernel(usize),
    /// A value (an input of the node, viewed under another shape).
    Value(Expr),
    /// A shape itself (a 1-D int64 tensor), by index (Shape of a value shaped at run time).
    Shape(usize),
}

/// One result of a [`ShapedKernel`].
pub(super) struct Result_ {
    /// Where it comes from.
    pub source: Source,
    /// The shape the node's output views it as, if another.
    pub view: Option<usize>,
    /// The node output's type (-1 where known at run time).
    pub ty: Type,
}

/// The kernel of a [`ShapedKernel`]: a primitive function over its inputs.
pub(super) struct Kernel {
    /// The kernel's inputs.
    pub inputs: Vec<Expr>,
    /// The variables standing for them in `body`.
    pub params: Vec<Var>,
    /// The kernel's body (typed).
    pub body: Expr,
}

/// How a [`ShapedKernel`]'s shapes are computed from its shape arguments.
pub(super) enum Shapes {
    /// A shape function (`vm.builtin.<name>`) over the arguments and integers, returning
    /// shapes of these ranks.
    Function {
        /// The builtin's name after `vm.builtin.`.
        name: &'static str,
        /// Its integer arguments.
        ints: Vec<i64>,
        /// The rank of each shape it returns.
        ranks: Vec<usize>,
    },
    /// The arguments are the shapes themselves (1-D int64 tensors: ConstantOfShape's input).
    Given,
    /// One shape of `rank`, computed by a program over the arguments' dimensions
    /// (`kiln_runtime::vm::shape_expr`).
    Program {
        /// The program.
        code: Vec<i64>,
        /// The shape's rank.
        rank: usize,
    },
}

impl Shapes {
    /// [`Shapes::Function`] of `name` without integer arguments.
    pub fn function(name: &'static str, ranks: Vec<usize>) -> Shapes {
        Shapes::Function {
            name,
            ints: Vec::new(),
            ranks,
        }
    }
}

/// A node computed by a kernel compiled with run-time extents (or only viewed: Reshape).
pub(super) struct ShapedKernel {
    /// How the shapes are computed.
    pub shapes: Shapes,
    /// The tensors they are computed from.
    pub shape_args: Vec<Expr>,
    /// Results of the shape function that the kernel reads too (a slice's begin and step), by
    /// index, each with the variable standing for it in the kernel's body (after the
    /// kernel's own inputs).
    pub shape_inputs: Vec<(usize, Var)>,
    /// The kernel, if the node computes.
    pub kernel: Option<Kernel>,
    /// The node's outputs.
    pub results: Vec<Result_>,
}

/// A [`ShapedKernel`] of one kernel: `shapes` from `shape_args`,
/// the kernel `body` over the variables of `inputs`, its results allocated and viewed as
/// `results` says (shape index, view index).
pub(super) fn kernel(
    shapes: Shapes,
    shape_args: Vec<Expr>,
    inputs: Vec<(Expr, Var)>,
    body: Expr,
    results: &[(usize, Option<usize>)],
) -> CResult<ShapedKernel> {
    let ty = body.ty()?;
    let (inputs, params) = inputs.into_iter().unzip();
    Ok(ShapedKernel {
        shapes,
        shape_args,
        shape_inputs: Vec::new(),
        results: results
            .iter()
            .map(|&(alloc, view)| Result_ {
                source: Source::Kernel(alloc),
                view,
                ty: ty.clone(),
            })
            .collect(),
        kernel: Some(Kernel {
            inputs,
            params,
            body,
        }),
    })
}

/// The kernel computing `node`, when it is an operator with one and an input deciding its
/// shapes is known only at run time.
pub(super) fn run_time(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    match node.domain.as_str() {
        super::resize_run_time::DOMAIN => return super::resize_run_time::kernel_of(ctx, node),
        super::signal::DOMAIN => return super::signal::kernel_of(ctx, node),
        super::col2im_run_time::DOMAIN => return super::col2im_run_time::kernel_of(ctx, node),
        _ => {}
    }
    if !node.domain.is_empty() {
        return Ok(None);
    }
    match own(ctx, node)? {
        Some(k) => Ok(Some(k)),
        None => generic(ctx, node),
    }
}

/// The nodes computing `node` in its place, each converted as a node of its own: an operator
/// computed at run time in several kernels (Resize: [`super::resize_run_time`]), the taken
/// branch of an If decided at compile time; `None` for other nodes.
pub(super) fn expansion(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Option<Vec<Node>>> {
    match node.op_type.as_str() {
        "Resize" | "Upsample" if node.domain.is_empty() => {
            super::resize_run_time::expand(ctx, node)
        }
        "If" if node.domain.is_empty() => super::control::taken_branch(ctx, node),
        "STFT" if node.domain.is_empty() => super::signal::stft_expand(ctx, node),
        "DFT" if node.domain.is_empty() => super::signal::dft_expand(ctx, node),
        "Col2Im" if node.domain.is_empty() => super::col2im_run_time::expand(ctx, node),
        "SplitToSequence" if node.domain.is_empty() => {
            super::sequence::split_to_sequence_expand(ctx, node)
        }
        "ConcatFromSequence" if node.domain.is_empty() => {
            super::sequence::concat_from_sequence_expand(ctx, node)
        }
        _ => Ok(None),
    }
}

/// The kernel an operator describes in its own converter file, for its run-time inputs.
fn own(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    Ok(match node.op_type.as_str() {
        op if super::reduce::REDUCTIONS.contains(&op) => super::reduce::run_time_axes(ctx, node)?,
        op if RUN_TIME_SHAPE_OPS.contains(&op) => {
            super::shape_run_time::run_time_shaped(ctx, node)?
        }
        "Shape" => super::shape_run_time::shape_run_time(ctx, node)?,
        "OneHot" => super::index::one_hot_run_time(ctx, node)?,
        "CenterCropPad" => super::index::center_crop_pad_run_time(ctx, node)?,
        "Pad" => super::shape_run_time::pad_run_time(ctx, node)?,
        "AffineGrid" => super::grid_sample::affine_grid_run_time(ctx, node)?,
        "TopK" => super::index::topk_run_time(ctx, node)?,
        "MelWeightMatrix" => super::signal::mel_run_time(ctx, node)?,
        op if WINDOWS.contains(&op) => super::generate::window_run_time(ctx, node)?,
        _ => None,
    })
}

/// A node computing one step of `node` (named as it, for messages): `op` of `domain` (`""`
/// for ONNX's own).
pub(super) fn step_node(
    node: &Node,
    op: &str,
    domain: &str,
    inputs: Vec<String>,
    outputs: Vec<String>,
    attributes: Vec<(String, crate::attr::AttrValue)>,
) -> Node {
    Node {
        name: node.name.clone(),
        op_type: op.into(),
        domain: domain.into(),
        inputs,
        outputs,
        attributes,
    }
}

/// The name of `node`'s first output, which its expansion computes last.
pub(super) fn first_output(node: &Node) -> CResult<String> {
    node.outputs
        .first()
        .filter(|o| !o.is_empty())
        .cloned()
        .ok_or_else(|| "output #0 is required".into())
}

/// The length of `e`, a 1-D tensor whose length is known at compile time (`what` names it in
/// the error).
pub(super) fn length(e: &Expr, what: &str) -> CResult<usize> {
    match super::shape_of(e)?.as_slice() {
        [n] if *n >= 0 => Ok(*n as usize),
        s => Err(super::Msg(format!(
            "{what} must be a 1-D tensor of known length, its shape is {s:?}"
        ))),
    }
}

/// Whether `e` has a tensor type with a dimension known only at run time.
pub(super) fn run_time_shaped(e: &Expr) -> bool {
    e.checked_type()
        .and_then(|t| t.as_tensor())
        .is_some_and(|(s, _)| s.contains(&-1))
}

/// A node reading a value shaped at run time: the node converted over variables standing for
/// its non-scalar inputs is the kernel. Elementwise (numpy broadcasting included), its
/// result's shape comes from `vm.builtin.broadcast_shape`, and run-time dimensions that meet
/// must be equal at run time (the kernel binds them to one extent; a run-time 1 does not
/// broadcast). Otherwise the result's shape is the program the compute gives
/// (`kiln_graph::build::shape_program`); run-time extents the compute needs equal (a
/// product's inner dimensions) meet (`kiln_topi::extent`) and are checked when the kernel is
/// called; a node whose compute needs static shapes, or whose result's shape depends on
/// values, is not taken.
fn generic(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    generic_over(ctx, std::slice::from_ref(node))
}

/// [`generic`] over a group of nodes computed by one kernel (see [`fused_group`]): the
/// first reads a value shaped at run time; the kernel's result is the last one's output.
fn generic_over(ctx: &Ctx<'_>, nodes: &[Node]) -> CResult<Option<ShapedKernel>> {
    let Some(node) = nodes.first() else {
        return Ok(None);
    };
    let last = &nodes[nodes.len() - 1];
    let reads_run_time_shape = node
        .inputs
        .iter()
        .any(|n| ctx.values.get(n).is_some_and(run_time_shaped));
    if !reads_run_time_shape || nodes.iter().any(|n| n.outputs.len() != 1) {
        return Ok(None);
    }
    let mut trial = Ctx {
        model: ctx.model,
        opset: ctx.opset,
        values: ctx.values.clone(),
    };
    let mut inputs = Vec::new();
    let mut params = Vec::new();
    // The values the group reads from outside it.
    let produced: Vec<&String> = nodes.iter().flat_map(|n| n.outputs.iter()).collect();
    let external = nodes
        .iter()
        .flat_map(|n| n.inputs.iter())
        .filter(|n| !n.is_empty() && !produced.contains(n));
    for name in external {
        let Some(e) = ctx.values.get(name) else {
            return Ok(None);
        };
        // Constants stay in the conversion (folded with what else is constant, then lifted
        // below); other values are the kernel's inputs.
        let constant = matches!(e, Expr::Constant(_));
        if constant || inputs.iter().any(|i: &Expr| i.key() == e.key()) {
            continue;
        }
        let Some(ty) = e.checked_type().cloned() else {
            return Ok(None);
        };
        let v = Var::new(&format!("p{}", params.len()), ty);
        trial.values.insert(name.clone(), v.expr());
        inputs.push(e.clone());
        params.push(v);
    }
    if convert_nodes(&mut trial, nodes).is_err() {
        return Ok(None);
    }
    let Some(body) = trial.values.get(&last.outputs[0]).cloned() else {
        return Ok(None);
    };
    // Computations over constants alone are folded (a transposed weight); tensor constants
    // (those, and a recurrent layer's zero states) are the kernel's inputs too (a kernel holds
    // scalar constants only).
    let folded = visit::rewrite_post(&body, |e| {
        Ok(kiln_graph::transform::fold_constant::try_fold(e)?.unwrap_or_else(|| e.clone()))
    });
    let Ok(body) = folded else {
        return Ok(None);
    };
    let mut lifted: Vec<(Expr, Var)> = Vec::new();
    let body = visit::rewrite_post(&body, |e| match e {
        Expr::Constant(c) if !c.data.shape().is_empty() => {
            let ty = Type::tensor(c.data.shape(), c.data.dtype());
            let v = Var::new(&format!("c{}", lifted.len()), ty);
            lifted.push((e.clone(), v.clone()));
            Ok(v.expr())
        }
        _ => Ok(e.clone()),
    });
    let Ok(body) = body else {
        return Ok(None);
    };
    for (e, v) in lifted {
        inputs.push(e);
        params.push(v);
    }
    let typed =
        kiln_graph::transform::infer_type::infer_function(&Function::new(params.clone(), body));
    let Ok(typed) = typed else {
        return Ok(None);
    };
    let body = typed.body().clone();
    // A group that computes nothing (Identity) is its input itself.
    if let Some(k) = params.iter().position(|p| p.expr().key() == body.key()) {
        return Ok(Some(ShapedKernel {
            shapes: Shapes::Given,
            shape_args: Vec::new(),
            shape_inputs: Vec::new(),
            kernel: None,
            results: vec![Result_ {
                source: Source::Value(inputs[k].clone()),
                view: None,
                ty: body.ty()?,
            }],
        }));
    }
    let nodes = visit::post_order(&body);
    // Inputs read only for their type (CastLike's second) are not the kernel's.
    let (inputs, params): (Vec<Expr>, Vec<Var>) = inputs
        .into_iter()
        .zip(params)
        .filter(|(_, p)| nodes.iter().any(|e| e.key() == p.expr().key()))
        .unzip();
    let elementwise = kiln_graph::build::lower::is_elementwise(&body);
    let Some((shape, dtype)) = body.checked_type().and_then(|t| t.as_tensor()) else {
        return Ok(None);
    };
    // Elementwise: numpy broadcasting at run time; otherwise the shape program of the
    // compute (whose extents that must agree meet, checked when the kernel is called).
    let shapes = if elementwise {
        let mut ints = vec![shape.len() as i64];
        ints.extend_from_slice(shape);
        Shapes::Function {
            name: "broadcast_shape",
            ints,
            ranks: vec![shape.len()],
        }
    } else {
        let f = Function::new(params.clone(), body.clone());
        match kiln_graph::transform::infer_type::infer_function(&f)
            .and_then(|f| kiln_graph::build::shape_program::result_shape_program(&f))
        {
            Ok(Some(code)) => Shapes::Program {
                code,
                rank: shape.len(),
            },
            _ => return Ok(None),
        }
    };
    Ok(Some(ShapedKernel {
        shapes,
        shape_args: inputs.clone(),
        shape_inputs: Vec::new(),
        results: vec![Result_ {
            source: Source::Kernel(0),
            view: None,
            ty: Type::tensor(shape, dtype),
        }],
        kernel: Some(Kernel {
            inputs,
            params,
            body,
        }),
    }))
}

/// The group of `nodes` (from the first) that one kernel computes: the first, a node
/// [`generic`] takes, then the nodes after it that read the group's results and convert to
/// elementwise computes (a product's bias and activation, a chain of arithmetic), ending
/// where no value inside the group is read after it (`reads_after(j)`: the names the nodes
/// after `nodes[j]`, and the outputs, read). The group's kernel and its length (2 or more), or
/// `None`.
pub(super) fn fused_group(
    ctx: &Ctx<'_>,
    nodes: &[Node],
    reads_after: &dyn Fn(usize) -> Vec<String>,
) -> CResult<Option<(ShapedKernel, usize)>> {
    let Some(first) = nodes.first() else {
        return Ok(None);
    };
    if !first.domain.is_empty() || first.outputs.len() != 1 || own(ctx, first)?.is_some() {
        return Ok(None);
    }
    let mut trial = Ctx {
        model: ctx.model,
        opset: ctx.opset,
        values: ctx.values.clone(),
    };
    if convert_nodes(&mut trial, &nodes[..1]).is_err() {
        return Ok(None);
    }
    let mut produced: Vec<&str> = vec![first.outputs[0].as_str()];
    let mut len = 1;
    for (j, n) in nodes.iter().enumerate().skip(1) {
        let chained = n.inputs.iter().any(|x| produced.contains(&x.as_str()));
        if !n.domain.is_empty() || n.outputs.len() != 1 || !chained {
            break;
        }
        if !elementwise(&trial, n) || convert_nodes(&mut trial, std::slice::from_ref(n)).is_err() {
            break;
        }
        produced.push(n.outputs[0].as_str());
        let inner = &produced[..produced.len() - 1];
        let later = reads_after(j);
        if inner.iter().all(|v| !later.iter().any(|n| n == v)) {
            len = j + 1;
        }
    }
    if len < 2 {
        return Ok(None);
    }
    Ok(generic_over(ctx, &nodes[..len])?.map(|k| (k, len)))
}

/// Whether `node` converts to elementwise computes over its inputs' values in `ctx`.
fn elementwise(ctx: &Ctx<'_>, node: &Node) -> bool {
    let mut probe = Ctx {
        model: ctx.model,
        opset: ctx.opset,
        values: ctx.values.clone(),
    };
    let mut params = Vec::new();
    for name in node.inputs.iter().filter(|n| !n.is_empty()) {
        match ctx.values.get(name) {
            Some(Expr::Constant(_)) => {}
            Some(e) => {
                let Some(ty) = e.checked_type().cloned() else {
                    return false;
                };
                let v = Var::new(name, ty);
                probe.values.insert(name.clone(), v.expr());
                params.push(v);
            }
            None => return false,
        }
    }
    if convert_nodes(&mut probe, std::slice::from_ref(node)).is_err() {
        return false;
    }
    probe
        .values
        .get(&node.outputs[0])
        .is_some_and(kiln_graph::build::lower::is_elementwise)
}

/// Whether `op` may need a kernel with run-time extents (so the model may need the VM).
pub(super) fn may_need(op: &str) -> bool {
    super::reduce::REDUCTIONS.contains(&op)
        || RUN_TIME_SHAPE_OPS.contains(&op)
        || WINDOWS.contains(&op)
        || [
            "OneHot",
            "CenterCropPad",
            "Pad",
            "AffineGrid",
            "TopK",
            "Resize",
            "Upsample",
            "STFT",
            "MelWeightMatrix",
            "Col2Im",
            "SplitToSequence",
            "DFT",
        ]
        .contains(&op)
}

/// The window operators, whose size input may be known only at run time.
const WINDOWS: [&str; 3] = ["HannWindow", "HammingWindow", "BlackmanWindow"];

/// The shape operators with kernels (or views) for run-time shape inputs
/// ([`super::shape_run_time::run_time_shaped`]).
const RUN_TIME_SHAPE_OPS: [&str; 9] = [
    "Expand",
    "Split",
    "Tile",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "ConstantOfShape",
    "Range",
    "Slice",
];
