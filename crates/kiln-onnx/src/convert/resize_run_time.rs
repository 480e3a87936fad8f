//! Resize and Upsample whose scales, sizes or region are known only at run time, or whose
//! input has extents known only at run time. The node is expanded into internal nodes (domain
//! [`DOMAIN`]), each a kernel with run-time extents: `Geometry` computes the result's extents
//! and each resized axis' tap count, then per resized axis `Table` computes its source indices
//! and weights (the sampling rules of `kiln_topi::transform::resample`, which mirror the
//! compile-time tables of [`super::resize`]) and `Resample` applies them. Shape programs read
//! the geometry's values: an extent that comes out below 1 is refused when the node runs.

use kiln_ffi::dtype::code;
use kiln_ffi::DataType as GDataType;
use kiln_graph::ir::{AttrValue as GAttr, Var};
use kiln_runtime::vm::shape_expr::op;
use kiln_topi::transform::resample::Mode;

use super::resize::{resized_axes, sampling, Sampling};
use super::shaped::{kernel, length, run_time_shaped, ShapedKernel, Shapes};
use super::{call, constant, dtype_of, shape_of, CResult, Ctx, Msg};
use crate::attr::AttrValue;
use crate::Node;

/// The domain of the internal nodes a run-time Resize expands into.
pub(super) const DOMAIN: &str = "kiln.resize";

/// The inputs of `node` that give its target and region: (roi, scales, sizes) by position,
/// as the opset numbers them.
fn input_positions(ctx: &Ctx<'_>, node: &Node) -> (Option<usize>, Option<usize>, Option<usize>) {
    if node.op_type == "Upsample" && ctx.opset < 9 {
        (None, None, None)
    } else if node.op_type == "Upsample" || ctx.opset < 11 {
        (None, Some(1), None)
    } else {
        (Some(1), Some(2), Some(3))
    }
}

/// The internal nodes computing `node` (Resize or Upsample) when an input deciding its shape
/// is known only at run time, or its input is shaped at run time; `None` otherwise.
pub(super) fn expand(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Option<Vec<Node>>> {
    let x = ctx.input(node, 0)?;
    let (roi_at, scales_at, sizes_at) = input_positions(ctx, node);
    let mut run_time = run_time_shaped(&x);
    for i in [roi_at, scales_at, sizes_at].into_iter().flatten() {
        run_time |= ctx.run_time_input(node, i)?;
    }
    if !run_time {
        return Ok(None);
    }
    let rank = shape_of(&x)?.len();
    let s = sampling(ctx, node)?;
    let d = dtype_of(&x)?;
    if !matches!(d.code(), code::FLOAT | code::BFLOAT) && !matches!(s.mode, Mode::Nearest(_)) {
        return Err(Msg(format!(
            "mode {:?} on a {d} tensor is not supported (only nearest resizes integer tensors)",
            node.attr_s("mode", "nearest")?
        )));
    }
    let mut axes = resized_axes(node, rank)?;
    let out = super::shaped::first_output(node)?;
    let internal = |what: &str| format!("{out}::{what}");
    // The target: a given scales or sizes input of known length (an empty one is absent).
    let given = |i: Option<usize>| -> CResult<Option<usize>> {
        let Some(i) = i.filter(|&i| node.input(i).is_some()) else {
            return Ok(None);
        };
        let n = length(&ctx.input(node, i)?, &format!("input #{i}"))?;
        Ok((n > 0).then_some(i))
    };
    let (target, by) = match (given(scales_at)?, given(sizes_at)?) {
        (Some(_), Some(_)) => {
            return Err("inputs scales and sizes are both given; exactly one must be".into())
        }
        (Some(i), None) => (scales(ctx, node, i, &mut axes, &s)?, "scales"),
        (None, Some(i)) => {
            let t = ctx.input(node, i)?;
            if dtype_of(&t)? != GDataType::int(64) {
                return Err(Msg(format!(
                    "input #{i} (sizes) must be int64, it is {}",
                    dtype_of(&t)?
                )));
            }
            (t, "sizes")
        }
        (None, None) if scales_at.is_none() => {
            let v: Vec<f64> = node
                .attr_floats("scales", &[])?
                .iter()
                .map(|&v| v as f64)
                .collect();
            (scales_constant(&v, &mut axes, &s)?, "scales")
        }
        (None, None) => return Err("one of the inputs scales and sizes is required".into()),
    };
    if length(&target, "the scales or sizes")? != axes.len() {
        return Err(Msg(format!(
            "input {by} has {} values, but {} axes are resized",
            length(&target, by)?,
            axes.len()
        )));
    }
    if axes.is_empty() {
        // Every scale is 1: the input itself.
        ctx.bind(&out, x);
        return Ok(Some(Vec::new()));
    }
    let roi = match roi_at {
        Some(i) if s.coord == kiln_topi::transform::resample::Coord::TfCropAndResize => {
            let r = ctx.opt_input(node, i)?.ok_or(
                "input roi is required by coordinate_transformation_mode tf_crop_and_resize",
            )?;
            if length(&r, "input roi")? != 2 * axes.len() {
                return Err(Msg(format!(
                    "input roi must have 2 values per resized axis ({})",
                    2 * axes.len()
                )));
            }
            r
        }
        _ => constant(&[0.0], &[1], GDataType::float(32))?,
    };
    let (target_name, roi_name, geometry) =
        (internal("target"), internal("roi"), internal("geometry"));
    ctx.bind(&target_name, target);
    ctx.bind(&roi_name, roi);
    let mut attrs = sampling_attrs(node, &s, &axes, by)?;
    let x_name = node.inputs[0].clone();
    let mut nodes = vec![internal_node(
        node,
        "Geometry",
        vec![x_name.clone(), target_name.clone()],
        &geometry,
        attrs.clone(),
    )];
    let mut cur = x_name.clone();
    for (k, &a) in axes.iter().enumerate() {
        let table = internal(&format!("table{k}"));
        attrs.push(("axis_index".into(), AttrValue::Int(k as i64)));
        nodes.push(internal_node(
            node,
            "Table",
            vec![
                x_name.clone(),
                target_name.clone(),
                roi_name.clone(),
                geometry.clone(),
            ],
            &table,
            attrs.clone(),
        ));
        attrs.pop();
        let next = if k + 1 == axes.len() {
            out.clone()
        } else {
            internal(&format!("axis{k}"))
        };
        let extrapolate = s.coord == kiln_topi::transform::resample::Coord::TfCropAndResize;
        nodes.push(internal_node(
            node,
            "Resample",
            vec![cur, table],
            &next,
            vec![
                ("axis".into(), AttrValue::Int(a as i64)),
                (
                    "nearest".into(),
                    AttrValue::Int(matches!(s.mode, Mode::Nearest(_)) as i64),
                ),
                ("extrapolate".into(), AttrValue::Int(extrapolate as i64)),
                ("extrapolation".into(), AttrValue::Float(s.extrapolation)),
                ("rank".into(), AttrValue::Int(rank as i64)),
            ],
        ));
        cur = next;
    }
    Ok(Some(nodes))
}

/// A scales input: a constant's axes of scale 1 are left out (they copy the input, except
/// under tf_crop_and_resize); a run-time one must be float32.
fn scales(
    ctx: &Ctx<'_>,
    node: &Node,
    i: usize,
    axes: &mut Vec<usize>,
    s: &Sampling,
) -> CResult<kiln_graph::ir::Expr> {
    if !ctx.run_time_input(node, i)? {
        if let Some(v) = ctx.const_floats(node, i)? {
            return scales_constant(&v, axes, s);
        }
    }
    let t = ctx.input(node, i)?;
    if dtype_of(&t)? != GDataType::float(32) {
        return Err(Msg(format!(
            "input #{i} (scales) must be float32, it is {}",
            dtype_of(&t)?
        )));
    }
    Ok(t)
}

/// Constant scales `v` as a float32 tensor, the axes of scale 1 left out of it and of `axes`.
fn scales_constant(
    v: &[f64],
    axes: &mut Vec<usize>,
    s: &Sampling,
) -> CResult<kiln_graph::ir::Expr> {
    if v.len() != axes.len() {
        return Err(Msg(format!(
            "input scales has {} values, but {} axes are resized",
            v.len(),
            axes.len()
        )));
    }
    if let Some(bad) = v
        .iter()
        .find(|&&s| !(s as f32 > 0.0 && (s as f32).is_finite()))
    {
        return Err(Msg(format!(
            "input scales {v:?} has a non-positive scale {bad}"
        )));
    }
    let crop = s.coord == kiln_topi::transform::resample::Coord::TfCropAndResize;
    let keep: Vec<bool> = v.iter().map(|&s| crop || s as f32 != 1.0).collect();
    let kept: Vec<f64> = v
        .iter()
        .zip(&keep)
        .filter(|(_, &k)| k)
        .map(|(&s, _)| s)
        .collect();
    let mut k = keep.iter();
    axes.retain(|_| *k.next().unwrap_or(&true));
    constant(&kept, &[kept.len() as i64], GDataType::float(32))
}

/// The sampling attributes of the internal nodes (the graph operators' names).
fn sampling_attrs(
    node: &Node,
    s: &Sampling,
    axes: &[usize],
    by: &str,
) -> CResult<Vec<(String, AttrValue)>> {
    let string = |v: &str| AttrValue::String(v.as_bytes().to_vec());
    let (mode, rounding, a) = match s.mode {
        Mode::Nearest(r) => ("nearest", r.name(), -0.75),
        Mode::Linear => ("linear", "floor", -0.75),
        Mode::Cubic(a) => ("cubic", "floor", a),
    };
    Ok(vec![
        (
            "axes".into(),
            AttrValue::Ints(axes.iter().map(|&a| a as i64).collect()),
        ),
        ("target".into(), string(by)),
        (
            "keep_aspect_ratio_policy".into(),
            string(&node.attr_s("keep_aspect_ratio_policy", "stretch")?),
        ),
        ("mode".into(), string(mode)),
        (
            "coordinate_transformation_mode".into(),
            string(s.coord.name()),
        ),
        ("nearest_mode".into(), string(rounding)),
        ("cubic_coeff_a".into(), AttrValue::Float(a)),
        ("antialias".into(), AttrValue::Int(s.antialias as i64)),
        (
            "exclude_outside".into(),
            AttrValue::Int(s.exclude_outside as i64),
        ),
    ])
}

/// Step `op` of Resize `node` in [`DOMAIN`].
fn internal_node(
    node: &Node,
    op: &str,
    inputs: Vec<String>,
    output: &str,
    attributes: Vec<(String, AttrValue)>,
) -> Node {
    super::shaped::step_node(node, op, DOMAIN, inputs, vec![output.into()], attributes)
}

/// The graph operator's attributes from an internal node's.
fn graph_attrs(node: &Node, skip: &[&str]) -> Vec<(String, GAttr)> {
    node.attributes
        .iter()
        .filter(|(n, _)| !skip.contains(&n.as_str()))
        .filter_map(|(n, v)| {
            let v = match v {
                AttrValue::Float(f) => GAttr::Float(*f as f64),
                AttrValue::Int(i) => GAttr::Int(*i),
                AttrValue::String(s) => GAttr::Str(String::from_utf8_lossy(s).into_owned()),
                AttrValue::Ints(v) => GAttr::Ints(v.clone()),
                _ => return None,
            };
            Some((n.clone(), v))
        })
        .collect()
}

/// The kernel of an internal node of [`DOMAIN`].
pub(super) fn kernel_of(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    let vars = |n: usize| -> CResult<Vec<(kiln_graph::ir::Expr, Var)>> {
        (0..n)
            .map(|i| {
                let e = ctx.input(node, i)?;
                let v = Var::new(&format!("p{i}"), e.ty()?);
                Ok((e, v))
            })
            .collect()
    };
    let body = |op: &str, inputs: &[(kiln_graph::ir::Expr, Var)], skip: &[&str]| {
        let attrs = graph_attrs(node, skip);
        let attrs: Vec<(&str, GAttr)> =
            attrs.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
        call(op, inputs.iter().map(|(_, v)| v.expr()).collect(), &attrs)
    };
    let k = match node.op_type.as_str() {
        "Geometry" => {
            let inputs = vars(2)?;
            let b = body("dyn.resize_geometry", &inputs, &[])?;
            let n = shape_of(&b)?[0];
            kernel(
                Shapes::Program {
                    code: vec![op::PUSH, n, op::EMIT],
                    rank: 1,
                },
                Vec::new(),
                inputs,
                b,
                &[(0, None)],
            )?
        }
        "Table" => {
            let inputs = vars(3)?;
            let b = body("dyn.resize_table", &inputs, &[])?;
            let axes = node.attr_ints("axes", &[])?;
            let k = node.attr_i("axis_index", 0)?;
            let rank = shape_of(&inputs[0].0)?.len() as i64;
            let axis = axes[k as usize];
            // The extent must be at least 1 (a scale may make it 0).
            let code = vec![
                op::PUSH,
                0,
                op::VALUE,
                0,
                axis,
                op::LT,
                op::CHECK,
                op::VALUE,
                0,
                axis,
                op::EMIT,
                op::VALUE,
                0,
                rank + k,
                op::EMIT,
                op::PUSH,
                2,
                op::EMIT,
            ];
            kernel(
                Shapes::Program { code, rank: 3 },
                vec![ctx.input(node, 3)?],
                inputs,
                b,
                &[(0, None)],
            )?
        }
        "Resample" => {
            let inputs = vars(2)?;
            let b = body("dyn.resample", &inputs, &["rank"])?;
            let axis = node.attr_i("axis", 0)?;
            let rank = node.attr_i("rank", 0)?;
            let mut code = Vec::new();
            for j in 0..rank {
                if j == axis {
                    code.extend([op::DIM, 1, 0]);
                } else {
                    code.extend([op::DIM, 0, j]);
                }
                code.push(op::EMIT);
            }
            let shape_args = inputs.iter().map(|(e, _)| e.clone()).collect();
            kernel(
                Shapes::Program {
                    code,
                    rank: rank as usize,
                },
                shape_args,
                inputs,
                b,
                &[(0, None)],
            )?
        }
        op => return Err(Msg(format!("unknown internal operator {op}"))),
    };
    Ok(Some(k))
}
