//! Shape functions: the builtins that compute, from input shapes and the values of small
//! integer inputs, the shapes of what a kernel compiled with run-time extents writes (an
//! [`Instr::Kernel`](super::Instr::Kernel) allocates its results by them). Each checks the
//! values it reads and names what was wrong. Shapes are 1-D int64 tensors on the CPU.
//!
//! | builtin | arguments | result |
//! | --- | --- | --- |
//! | `reduce_shape` | x, axes (1-D integers), noop_with_empty_axes | [x's shape with the reduced axes 1, the same without them] |
//! | `reshape_shape` | x, shape (1-D int64), allowzero | ONNX Reshape's result shape (0 copies x's dim unless allowzero; one -1 inferred) |
//! | `squeeze_shape` | x, axes | x's shape without the listed axes (each of extent 1) |
//! | `unsqueeze_shape` | x, axes | x's shape with a 1 inserted at each listed axis of the result |
//! | `range_shape` | start, limit, delta (one-element tensors) | `[max(ceil((limit - start) / delta), 0)]` |
//! | `slice_shape` | x, starts, ends, axes, steps (1-D int64) | [the result's shape, the begin and the step of every axis of x] |
//! | `one_hot_shape` | indices, depth (one element), axis | indices' shape with the depth inserted at axis |
//! | `tile_shape` | x, repeats (1-D int64) | x's shape times the repeats |
//! | `split_shapes` | x, split (1-D int64), axis | per piece: its shape, its begin and its step on every axis |
//! | `broadcast_shape` | tensors..., rank, dims... | their numpy broadcast, which must agree with `dims` where a dim is not -1 |

use crate::tensor::Tensor;
use kiln_ffi::{register_global, Any, AnyView, Array, DataType, Error, Result};

/// A 1-D int64 tensor holding `dims`.
pub fn shape_tensor(dims: &[i64]) -> Result<Tensor> {
    Tensor::from_slice(dims, &[dims.len() as i64])
}

/// The values of a 1-D int64 tensor (axes, sizes: ONNX gives them as int64), or of an
/// int32 or int64 scalar (a window's size).
pub fn int_values(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    let (i32t, i64t) = (DataType::int(32), DataType::int(64));
    let scalar = t.ndim() == 0 && (t.dtype() == i32t || t.dtype() == i64t);
    if !scalar && (t.ndim() != 1 || t.dtype() != i64t) {
        return Err(Error::type_error(format!(
            "{what} must be 1-D int64 or an integer scalar, it is {}",
            t.describe()
        )));
    }
    // to_bytes and to_vec read from any device.
    if t.dtype() == i32t {
        let b = t.to_bytes()?;
        return Ok(vec![i64::from(i32::from_ne_bytes([
            b[0], b[1], b[2], b[3],
        ]))]);
    }
    t.to_vec::<i64>()
}

/// The reduced axes of a rank-`rank` tensor: `axes` made non-negative (each in `[-rank,
/// rank)`, none twice); all axes when `axes` is empty, unless `noop_with_empty_axes`.
pub fn reduced_axes(rank: usize, axes: &[i64], noop_with_empty_axes: bool) -> Result<Vec<bool>> {
    let mut reduced = vec![axes.is_empty() && !noop_with_empty_axes; rank];
    for &a in axes {
        let r = rank as i64;
        if a < -r || a >= r {
            return Err(Error::value_error(format!(
                "axes value {a} is out of range for an input of rank {rank} (axes {axes:?})"
            )));
        }
        let a = a.rem_euclid(r.max(1)) as usize;
        if reduced[a] {
            return Err(Error::value_error(format!(
                "axes {axes:?} name axis {a} twice (input of rank {rank})"
            )));
        }
        reduced[a] = true;
    }
    Ok(reduced)
}

register_global!("vm.builtin.reduce_shape", |x: Tensor,
                                             axes: Tensor,
                                             noop: i64|
 -> Result<Array> {
    let axes = int_values(&axes, "the reduction's axes")?;
    let reduced = reduced_axes(x.ndim(), &axes, noop != 0)?;
    let (mut keep, mut dropped) = (Vec::new(), Vec::new());
    for (&d, &r) in x.shape().iter().zip(&reduced) {
        keep.push(if r { 1 } else { d });
        if !r {
            dropped.push(d);
        }
    }
    Ok(Array::new(vec![
        Any::from(shape_tensor(&keep)?),
        Any::from(shape_tensor(&dropped)?),
    ]))
});

/// The numpy broadcast of `shapes`; the error names the shapes and the dimension.
pub fn broadcast(shapes: &[&[i64]]) -> Result<Vec<i64>> {
    let n = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1i64; n];
    for s in shapes {
        for (k, &d) in s.iter().enumerate() {
            let o = &mut out[n - s.len() + k];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(Error::value_error(format!(
                    "shapes {shapes:?} do not broadcast: dimension {} (from the right) is {} in \
                     one and {d} in another",
                    s.len() - k,
                    *o
                )));
            }
        }
    }
    Ok(out)
}

kiln_ffi::register_global_packed!(
    "vm.builtin.broadcast_shape",
    |args: &[AnyView<'_>]| -> Result<Any> {
        // The tensors come first; then the result's rank and its dims (-1: run time).
        let n = args
            .iter()
            .position(|a| a.try_as::<Tensor>().is_err())
            .unwrap_or(args.len());
        let tensors = args[..n]
            .iter()
            .map(|a| a.try_as::<Tensor>())
            .collect::<Result<Vec<_>>>()?;
        let ints = args[n..]
            .iter()
            .map(|a| a.try_as::<i64>())
            .collect::<Result<Vec<i64>>>()?;
        let (rank, dims) = ints
            .split_first()
            .filter(|(r, d)| **r as usize == d.len())
            .ok_or_else(|| Error::value_error("vm.builtin.broadcast_shape: give rank, dims..."))?;
        let shapes: Vec<&[i64]> = tensors.iter().map(|t| t.shape()).collect();
        let out = broadcast(&shapes)?;
        if out.len() != *rank as usize
            || out
                .iter()
                .zip(dims)
                .any(|(&o, &d)| d >= 0 && o != d && o != 1)
        {
            return Err(Error::value_error(format!(
                "run-time shapes {shapes:?} broadcast to {out:?}, but the model was compiled \
                 for {dims:?} (-1: any)"
            )));
        }
        let out: Vec<i64> = out
            .iter()
            .zip(dims)
            .map(|(&o, &d)| if d >= 0 { d } else { o })
            .collect();
        Ok(shape_tensor(&out)?.into())
    }
);

/// ONNX Reshape's result: `target` with each 0 the input's dim at that place (an empty axis
/// with `allowzero`) and one -1 inferred from the element count, which must be kept.
pub fn reshape(shape: &[i64], target: &[i64], allowzero: bool) -> Result<Vec<i64>> {
    let bad = |why: String| {
        Error::value_error(format!(
            "cannot reshape {shape:?} to {target:?} (allowzero {}): {why}",
            allowzero as i64
        ))
    };
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        out.push(match d {
            0 if !allowzero => *shape
                .get(i)
                .ok_or_else(|| bad(format!("0 at {i} copies no input dimension")))?,
            -1 if infer.is_none() => {
                infer = Some(i);
                1
            }
            d if d < 0 => return Err(bad(format!("{d} at {i}"))),
            d => d,
        });
    }
    let total: i64 = shape.iter().product();
    let known: i64 = out.iter().product();
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(bad(format!(
                "{total} elements do not fill the other dimensions"
            )));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(bad(format!("{total} elements, the target holds {known}")));
    }
    Ok(out)
}

register_global!("vm.builtin.reshape_shape", |x: Tensor,
                                              target: Tensor,
                                              allowzero: i64|
 -> Result<Tensor> {
    let target = int_values(&target, "Reshape's shape")?;
    shape_tensor(&reshape(x.shape(), &target, allowzero != 0)?)
});

register_global!("vm.builtin.squeeze_shape", |x: Tensor,
                                              axes: Tensor|
 -> Result<Tensor> {
    let axes = int_values(&axes, "Squeeze's axes")?;
    // No axes: every axis of extent 1.
    let gone = match axes.is_empty() {
        true => x.shape().iter().map(|&d| d == 1).collect(),
        false => reduced_axes(x.ndim(), &axes, false)?,
    };
    let mut out = Vec::new();
    for (a, (&d, &g)) in x.shape().iter().zip(&gone).enumerate() {
        if g && d != 1 {
            return Err(Error::value_error(format!(
                "Squeeze: axis {a} of {:?} has extent {d}, not 1 (axes {axes:?})",
                x.shape()
            )));
        }
        if !g {
            out.push(d);
        }
    }
    shape_tensor(&out)
});

register_global!("vm.builtin.unsqueeze_shape", |x: Tensor,
                                                axes: Tensor|
 -> Result<Tensor> {
    let axes = int_values(&axes, "Unsqueeze's axes")?;
    let new = reduced_axes(x.ndim() + axes.len(), &axes, true)?;
    let mut dims = x.shape().iter();
    let out: Vec<i64> = new
        .iter()
        .map(|&n| if n { 1 } else { *dims.next().unwrap_or(&1) })
        .collect();
    shape_tensor(&out)
});

register_global!("vm.builtin.range_shape", |start: Tensor,
                                            limit: Tensor,
                                            delta: Tensor|
 -> Result<Tensor> {
    let one = |t: &Tensor, what: &str| -> Result<f64> {
        match t.to_f64_vec()?.as_slice() {
            [v] => Ok(*v),
            _ => Err(Error::value_error(format!(
                "Range's {what} must hold one element, it is {}",
                t.describe()
            ))),
        }
    };
    let (a, b, d) = (
        one(&start, "start")?,
        one(&limit, "limit")?,
        one(&delta, "delta")?,
    );
    // (No float in the messages: formatting one would add its code to the runtime.)
    if d == 0.0 {
        return Err(Error::value_error("Range: delta is 0"));
    }
    let n = ((b - a) / d).ceil().max(0.0);
    if !n.is_finite() || n > (1u64 << 40) as f64 {
        return Err(Error::value_error(
            "Range: the number of elements is not finite or above 2^40",
        ));
    }
    shape_tensor(&[n as i64])
});

/// ONNX Slice on a tensor of `shape`: the result's shape and, per axis, the first index read
/// and the step (starts and ends clamped as the operator defines).
pub fn slice(
    shape: &[i64],
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
) -> Result<[Vec<i64>; 3]> {
    let bad = |why: String| {
        Error::value_error(format!(
            "Slice of {shape:?} (starts {starts:?}, ends {ends:?}, axes {axes:?}, steps \
             {steps:?}): {why}"
        ))
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(bad("starts, ends, axes and steps differ in length".into()));
    }
    // Axes in range, none twice.
    reduced_axes(shape.len(), axes, true)?;
    let mut out = shape.to_vec();
    let mut begin = vec![0i64; shape.len()];
    let mut step = vec![1i64; shape.len()];
    for k in 0..axes.len() {
        let a = axes[k].rem_euclid(shape.len().max(1) as i64) as usize;
        let (d, s) = (shape[a], steps[k]);
        if s == 0 {
            return Err(bad(format!("the step of axis {a} is 0")));
        }
        if d == 0 {
            continue;
        }
        let at = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (lo, hi) = if s > 0 { (0, d) } else { (-1, d - 1) };
        let b = at(starts[k]).clamp(lo.max(0), hi);
        let e = at(ends[k]).clamp(lo, hi);
        let n = if s > 0 {
            (e - b + s - 1) / s
        } else {
            (b - e - s - 1) / -s
        };
        out[a] = n.max(0);
        begin[a] = b;
        step[a] = s;
    }
    Ok([out, begin, step])
}

register_global!("vm.builtin.slice_shape", |x: Tensor,
                                            starts: Tensor,
                                            ends: Tensor,
                                            axes: Tensor,
                                            steps: Tensor|
 -> Result<Array> {
    let [out, begin, step] = slice(
        x.shape(),
        &int_values(&starts, "Slice's starts")?,
        &int_values(&ends, "Slice's ends")?,
        &int_values(&axes, "Slice's axes")?,
        &int_values(&steps, "Slice's steps")?,
    )?;
    Ok(Array::new(vec![
        Any::from(shape_tensor(&out)?),
        Any::from(shape_tensor(&begin)?),
        Any::from(shape_tensor(&step)?),
    ]))
});

register_global!("vm.builtin.one_hot_shape", |indices: Tensor,
                                              depth: Tensor,
                                              axis: i64|
 -> Result<Tensor> {
    let d = match depth.to_f64_vec()?.as_slice() {
        [v] => *v as i64,
        _ => {
            return Err(Error::value_error(format!(
                "OneHot's depth must hold one element, it is {}",
                depth.describe()
            )))
        }
    };
    if d < 1 {
        return Err(Error::value_error(format!(
            "OneHot's depth {d} is not positive"
        )));
    }
    let mut out = indices.shape().to_vec();
    let at = usize::try_from(axis).ok().filter(|&a| a <= out.len());
    out.insert(
        at.ok_or_else(|| Error::value_error(format!("OneHot: axis {axis} out of range")))?,
        d,
    );
    shape_tensor(&out)
});

register_global!("vm.builtin.tile_shape", |x: Tensor,
                                           repeats: Tensor|
 -> Result<Tensor> {
    let reps = int_values(&repeats, "Tile's repeats")?;
    if reps.len() != x.ndim() || reps.iter().any(|&r| r < 0) {
        return Err(Error::value_error(format!(
            "Tile of {:?}: repeats {reps:?} must be one non-negative count per axis",
            x.shape()
        )));
    }
    let out: Vec<i64> = x.shape().iter().zip(&reps).map(|(&d, &r)| d * r).collect();
    shape_tensor(&out)
});

register_global!("vm.builtin.split_shapes", |x: Tensor,
                                             split: Tensor,
                                             axis: i64|
 -> Result<Array> {
    let sizes = int_values(&split, "Split's split")?;
    let a = usize::try_from(axis)
        .ok()
        .filter(|&a| a < x.ndim())
        .ok_or_else(|| Error::value_error(format!("Split: axis {axis} out of range")))?;
    let total: i64 = sizes.iter().sum();
    if sizes.iter().any(|&n| n < 0) || total != x.shape()[a] {
        return Err(Error::value_error(format!(
            "Split of {:?} on axis {a}: sizes {sizes:?} must be non-negative and add up to {}",
            x.shape(),
            x.shape()[a]
        )));
    }
    let mut out = Vec::with_capacity(3 * sizes.len());
    let mut at = 0;
    for &n in &sizes {
        let mut shape = x.shape().to_vec();
        shape[a] = n;
        let mut begin = vec![0i64; x.ndim()];
        begin[a] = at;
        at += n;
        for v in [shape, begin, vec![1i64; x.ndim()]] {
            out.push(Any::from(shape_tensor(&v)?));
        }
    }
    Ok(Array::new(out))
});
