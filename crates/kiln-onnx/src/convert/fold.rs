//! Compile-time evaluation of calls over constants: the operators' reference evaluators
//! (kiln-graph's FoldConstant) plus small evaluators here for the data-movement ops that shape
//! computations use and kiln-graph does not evaluate (`concatenate`, `take`, `strided_slice`).

use kiln_ffi::Device;
use kiln_graph::ir::Expr;
use kiln_graph::op::eval::for_each_index;
use kiln_graph::op::normalize_axis;
use kiln_graph::transform::fold_constant::try_fold;
use kiln_runtime::tensor::Tensor;

use super::{CResult, Msg};

/// Row-major strides of `shape`.
fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

fn flat(idx: &[i64], st: &[i64]) -> usize {
    idx.iter().zip(st).map(|(i, s)| i * s).sum::<i64>() as usize
}

/// The folded value of typed call `e` when all its arguments are constants and Kiln can
/// evaluate it; `None` otherwise.
pub fn fold(e: &Expr) -> CResult<Option<Expr>> {
    let Some(name) = e.op_name() else {
        return Ok(None);
    };
    let args: Option<Vec<Tensor>> = e.args().iter().map(|a| a.as_constant().cloned()).collect();
    let Some(args) = args else {
        return Ok(None);
    };
    // Keep big constants (weights) as they are: only small shape-like values are folded here.
    if args.iter().map(|a| a.numel()).sum::<usize>() > 1 << 16 {
        return Ok(None);
    }
    if let Some(f) = try_fold(e)? {
        return Ok(Some(super::typed_constant(f)?));
    }
    let ty = e.ty()?;
    let Some((out_shape, dtype)) = ty.as_tensor() else {
        return Ok(None);
    };
    let attrs = e.attrs();
    let vals: Vec<Vec<f64>> = args
        .iter()
        .map(|a| a.to_f64_vec())
        .collect::<Result<_, _>>()?;
    let out: Vec<f64> = match name {
        "concatenate" => {
            let axis = normalize_axis(attrs.int("axis")?, out_shape.len())?;
            let ost = strides(out_shape);
            let mut out = vec![0.0; out_shape.iter().product::<i64>() as usize];
            let mut off = 0i64;
            for (a, v) in args.iter().zip(&vals) {
                let st = strides(a.shape());
                for_each_index(a.shape(), |idx| {
                    let mut o = idx.to_vec();
                    o[axis] += off;
                    out[flat(&o, &ost)] = v[flat(idx, &st)];
                });
                off += a.shape()[axis];
            }
            out
        }
        "take" => {
            let (d, ix) = (&args[0], &vals[1]);
            let axis = match attrs.opt_int("axis")? {
                Some(a) => normalize_axis(a, d.ndim())?,
                None => return Ok(None),
            };
            let n = d.shape()[axis];
            let st = strides(d.shape());
            let ir = args[1].ndim();
            let mut out = Vec::new();
            for_each_index(out_shape, |o| {
                let ist = strides(args[1].shape());
                let i = ix[flat(&o[axis..axis + ir], &ist)] as i64;
                let i = if i < 0 { i + n } else { i }.clamp(0, n - 1);
                let mut src = o[..axis].to_vec();
                src.push(i);
                src.extend_from_slice(&o[axis + ir..]);
                out.push(vals[0][flat(&src, &st)]);
            });
            out
        }
        "strided_slice" => {
            let d = &args[0];
            let rank = d.ndim();
            let begin = attrs.ints("begin")?;
            let axes: Vec<usize> = match attrs.opt_ints("axes")? {
                Some(a) => a
                    .iter()
                    .map(|&x| normalize_axis(x, rank))
                    .collect::<Result<_, _>>()?,
                None => (0..begin.len()).collect(),
            };
            let steps = attrs
                .opt_ints("strides")?
                .unwrap_or_else(|| vec![1; axes.len()]);
            let mut b = vec![0i64; rank];
            let mut s = vec![1i64; rank];
            for (k, &ax) in axes.iter().enumerate() {
                let n = d.shape()[ax];
                let x = if begin[k] < 0 { begin[k] + n } else { begin[k] };
                b[ax] = if steps[k] > 0 {
                    x.clamp(0, n)
                } else {
                    x.clamp(-1, n - 1)
                };
                s[ax] = steps[k];
            }
            let st = strides(d.shape());
            let mut out = Vec::new();
            for_each_index(out_shape, |o| {
                let src: Vec<i64> = (0..rank).map(|i| b[i] + o[i] * s[i]).collect();
                out.push(vals[0][flat(&src, &st)]);
            });
            out
        }
        _ => return Ok(None),
    };
    let t = Tensor::from_f64s(&out, out_shape, dtype, Device::cpu(0)).map_err(Msg::from)?;
    Ok(Some(super::typed_constant(Expr::constant(t))?))
}
