//! Col2Im whose image or block shape is known only at run time (or whose columns have
//! run-time extents): the columns viewed as `[N, C, block..., windows...]` (a shape program
//! computes and checks the view: the channels a multiple of the block size, each block
//! fitting the padded image, as many columns as window positions), then one kernel
//! (`dyn.col2im`) sums them into the image.

use kiln_graph::ir::{AttrValue as GAttr, Expr, Type, Var};
use kiln_runtime::vm::shape_expr::op;

use super::shaped::{
    kernel, length, run_time_shaped, step_node, Result_, ShapedKernel, Shapes, Source,
};
use super::{call, dtype_of, shape_of, CResult, Ctx, Msg};
use crate::attr::AttrValue;
use crate::Node;

/// The domain of the internal nodes a run-time Col2Im becomes.
pub(super) const DOMAIN: &str = "kiln.col2im";

/// The strides, dilations and pads of `node` for `r` spatial axes (checked).
fn geometry(node: &Node, r: usize) -> CResult<[Vec<i64>; 3]> {
    let ints = |name: &str, default: i64, len: usize| -> CResult<Vec<i64>> {
        let v = node.attr_ints(name, &vec![default; len])?;
        if v.len() != len {
            return Err(Msg(format!(
                "attribute {name} has {} values, expected {len}",
                v.len()
            )));
        }
        Ok(v)
    };
    let (strides, dilations, pads) = (
        ints("strides", 1, r)?,
        ints("dilations", 1, r)?,
        ints("pads", 0, 2 * r)?,
    );
    if strides.iter().chain(&dilations).any(|&d| d < 1) || pads.iter().any(|&p| p < 0) {
        return Err(Msg(format!(
            "strides {strides:?} and dilations {dilations:?} must be positive and pads {pads:?} \
             non-negative"
        )));
    }
    Ok([strides, dilations, pads])
}

/// The internal nodes computing Col2Im `node` when a shape input is known only at run time or
/// its columns have run-time extents; `None` otherwise.
pub(super) fn expand(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Option<Vec<Node>>> {
    let x = ctx.input(node, 0)?;
    if !(run_time_shaped(&x) || ctx.run_time_input(node, 1)? || ctx.run_time_input(node, 2)?) {
        return Ok(None);
    }
    let r = length(&ctx.input(node, 1)?, "input #1 (image_shape)")?;
    if r == 0
        || length(&ctx.input(node, 2)?, "input #2 (block_shape)")? != r
        || shape_of(&x)?.len() != 3
    {
        return Err(Msg(format!(
            "expects input [N, C * prod(block_shape), L] and image_shape, block_shape of one \
             equal length; got input {:?}",
            shape_of(&x)?
        )));
    }
    let [strides, dilations, pads] = geometry(node, r)?;
    let out = super::shaped::first_output(node)?;
    let attrs = vec![
        ("strides".to_string(), AttrValue::Ints(strides)),
        ("dilations".to_string(), AttrValue::Ints(dilations)),
        ("pads".to_string(), AttrValue::Ints(pads)),
    ];
    let cols = format!("{out}::cols");
    let step = |op: &str, inputs: Vec<String>, output: &str| {
        step_node(node, op, DOMAIN, inputs, vec![output.into()], attrs.clone())
    };
    Ok(Some(vec![
        step("View", node.inputs[..3].to_vec(), &cols),
        step("Col2Im", vec![cols.clone(), node.inputs[1].clone()], &out),
    ]))
}

/// The kernel (or view) of an internal node of [`DOMAIN`].
pub(super) fn kernel_of(ctx: &Ctx<'_>, node: &Node) -> CResult<Option<ShapedKernel>> {
    let r = node.attr_ints("strides", &[])?.len();
    let [strides, dilations, pads] = geometry(node, r)?;
    let x = ctx.input(node, 0)?;
    let (ri, n) = (r as i64, shape_of(&x)?[0]);
    match node.op_type.as_str() {
        "View" => {
            // Shape arguments: 0 the columns, 1 the image shape, 2 the block shape.
            let mut code = Vec::new();
            for a in 0..ri {
                code.extend([op::PUSH, 0, op::VALUE, 1, a, op::LT, op::CHECK]);
                code.extend([op::PUSH, 0, op::VALUE, 2, a, op::LT, op::CHECK]);
            }
            let mut patch = vec![op::PUSH, 1];
            for a in 0..ri {
                patch.extend([op::VALUE, 2, a, op::MUL]);
            }
            code.extend([op::DIM, 0, 1]);
            code.extend(&patch);
            code.extend([op::FLOOR_MOD, op::PUSH, 0, op::EQ, op::CHECK]);
            // Room for the block along axis a: image + pads - (dilation (block - 1) + 1).
            let room = |a: usize| {
                let (d, extra) = (dilations[a], pads[a] + pads[r + a] - 1 + dilations[a]);
                vec![
                    op::VALUE,
                    1,
                    a as i64,
                    op::PUSH,
                    extra,
                    op::ADD,
                    op::VALUE,
                    2,
                    a as i64,
                ]
                .into_iter()
                .chain([op::PUSH, d, op::MUL, op::SUB])
                .collect::<Vec<i64>>()
            };
            let windows = |a: usize| {
                let mut c = room(a);
                c.extend([op::PUSH, strides[a], op::FLOOR_DIV, op::PUSH, 1, op::ADD]);
                c
            };
            let mut count = vec![op::PUSH, 1];
            for a in 0..r {
                code.push(op::PUSH);
                code.push(-1);
                code.extend(room(a));
                code.extend([op::LT, op::CHECK]);
                count.extend(windows(a));
                count.push(op::MUL);
            }
            code.extend(count);
            code.extend([op::DIM, 0, 2, op::EQ, op::CHECK]);
            code.extend([op::DIM, 0, 0, op::EMIT, op::DIM, 0, 1]);
            code.extend(patch);
            code.extend([op::FLOOR_DIV, op::EMIT]);
            for a in 0..ri {
                code.extend([op::VALUE, 2, a, op::EMIT]);
            }
            for a in 0..r {
                code.extend(windows(a));
                code.push(op::EMIT);
            }
            let mut dims = vec![n];
            dims.extend(vec![-1; 1 + 2 * r]);
            Ok(Some(ShapedKernel {
                shapes: Shapes::Program {
                    code,
                    rank: 2 + 2 * r,
                },
                shape_args: vec![x.clone(), ctx.input(node, 1)?, ctx.input(node, 2)?],
                shape_inputs: Vec::new(),
                kernel: None,
                results: vec![Result_ {
                    source: Source::Value(x.clone()),
                    view: Some(0),
                    ty: Type::tensor(&dims, dtype_of(&x)?),
                }],
            }))
        }
        "Col2Im" => {
            let p = Var::new("cols", x.ty()?);
            let ints = |v: &[i64]| GAttr::Ints(v.to_vec());
            let body = call(
                "dyn.col2im",
                vec![p.expr()],
                &[
                    ("strides", ints(&strides)),
                    ("dilations", ints(&dilations)),
                    ("pads", ints(&pads)),
                ],
            )?;
            let mut code = vec![op::DIM, 0, 0, op::EMIT, op::DIM, 0, 1, op::EMIT];
            for a in 0..ri {
                code.extend([op::VALUE, 1, a, op::EMIT]);
            }
            let args: Vec<Expr> = vec![x.clone(), ctx.input(node, 1)?];
            Ok(Some(kernel(
                Shapes::Program { code, rank: 2 + r },
                args,
                vec![(x, p)],
                body,
                &[(0, None)],
            )?))
        }
        op => Err(Msg(format!("unknown internal operator {op}"))),
    }
}
