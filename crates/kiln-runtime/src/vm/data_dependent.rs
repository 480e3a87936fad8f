//! Operators whose output shapes depend on the values of their inputs (ONNX `NonZero`,
//! `Unique`, `NonMaxSuppression`, `Compress`), computed on the host: the VM calls them as
//! builtins (`vm.builtin.non_zero`, `vm.builtin.unique`, `vm.builtin.non_max_suppression`,
//! `vm.builtin.compress`) and the ONNX front end folds them with the same functions when their
//! inputs are constants (for `Compress` with a constant condition, it gathers the
//! [`selected_positions`] with a compiled `take`), so each has one definition.

use crate::tensor::Tensor;
use kiln_ffi::{register_global, Array, Device, Error, Result};
use std::cmp::Ordering;

fn host(t: &Tensor) -> Result<Tensor> {
    t.to_device(Device::cpu(0))
}

/// `0..n` ordered by `cmp`, which must order every pair (ties broken by the caller), through
/// one instance of the sorting code.
fn sorted_indices(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    v.sort_unstable_by(|&a, &b| cmp(a, b));
    v
}

/// `x` seen as `[outer, len, inner]` around `axis` (normalized, `None` when absent: the whole
/// flattened tensor is the axis); an axis out of range is an error naming `op`.
fn around_axis(
    x: &Tensor,
    axis: Option<i64>,
    op: &str,
) -> Result<(usize, usize, usize, Option<usize>)> {
    let shape = x.shape();
    let Some(a) = axis else {
        return Ok((1, x.numel(), 1, None));
    };
    let rank = shape.len() as i64;
    if a < -rank || a >= rank {
        return Err(Error::value_error(format!(
            "{op}: axis {a} is out of range for rank {rank}"
        )));
    }
    let a = (if a < 0 { a + rank } else { a }) as usize;
    let outer: i64 = shape[..a].iter().product();
    let inner: i64 = shape[a + 1..].iter().product();
    Ok((outer as usize, shape[a] as usize, inner as usize, Some(a)))
}

fn int64_tensor(values: &[i64], shape: &[i64]) -> Result<Tensor> {
    Tensor::from_slice(values, shape)
}

/// ONNX `NonZero`: the coordinates of the non-zero elements of `x`, `[rank, count]` int64, in
/// row-major order.
pub fn non_zero(x: &Tensor) -> Result<Tensor> {
    let v = host(x)?.to_f64_vec()?;
    let shape = x.shape();
    let hits: Vec<usize> = (0..v.len()).filter(|&i| v[i] != 0.0).collect();
    let n = hits.len();
    let mut out = vec![0i64; shape.len() * n];
    for (j, &h) in hits.iter().enumerate() {
        let mut rem = h as i64;
        for d in (0..shape.len()).rev() {
            out[d * n + j] = rem % shape[d];
            rem /= shape[d];
        }
    }
    int64_tensor(&out, &[shape.len() as i64, n as i64])
}

/// ONNX `Unique` of `x` along `axis` (of the flattened tensor when `None`): the unique values
/// (or slices), in ascending order when `sorted`, else in order of first occurrence; the index
/// of each one's first occurrence; each input element's (slice's) index in the output; and the
/// counts. Values compare as numbers (NaNs equal each other and sort last).
pub fn unique(x: &Tensor, axis: Option<i64>, sorted: bool) -> Result<[Tensor; 4]> {
    let x = host(x)?;
    let shape = x.shape().to_vec();
    let (outer, len, inner, axis) = around_axis(&x, axis, "Unique")?;
    let v = x.to_f64_vec()?;
    // Slice k of the axis: elements (o, k, i) for every outer o and inner i.
    let key = |k: usize| -> Vec<f64> {
        let mut s = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            s.extend_from_slice(&v[(o * len + k) * inner..(o * len + k + 1) * inner]);
        }
        s
    };
    let cmp = |a: &[f64], b: &[f64]| -> Ordering {
        for (x, y) in a.iter().zip(b) {
            let o = x.total_cmp(y);
            let o = if x.is_nan() && y.is_nan() {
                Ordering::Equal
            } else {
                o
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    };
    let keys: Vec<Vec<f64>> = (0..len).map(key).collect();
    // Distinct slices by first occurrence.
    let mut firsts: Vec<usize> = Vec::new();
    let order = sorted_indices(len, &|a, b| cmp(&keys[a], &keys[b]).then(a.cmp(&b)));
    let mut group_of = vec![0usize; len];
    let mut groups: Vec<(usize, usize)> = Vec::new(); // (first index, count)
    for (i, &k) in order.iter().enumerate() {
        if i == 0 || cmp(&keys[order[i - 1]], &keys[k]) != Ordering::Equal {
            groups.push((k, 0));
        }
        let g = groups.len() - 1;
        groups[g].1 += 1;
        group_of[k] = g;
    }
    // Output positions: sorted order, or order of first occurrence.
    let mut rank_of = (0..groups.len()).collect::<Vec<_>>();
    if !sorted {
        let by_first = sorted_indices(groups.len(), &|a, b| groups[a].0.cmp(&groups[b].0));
        for (pos, &g) in by_first.iter().enumerate() {
            rank_of[g] = pos;
        }
    }
    let m = groups.len();
    let mut out_first = vec![0i64; m];
    let mut counts = vec![0i64; m];
    for (g, &(first, count)) in groups.iter().enumerate() {
        out_first[rank_of[g]] = first as i64;
        counts[rank_of[g]] = count as i64;
    }
    firsts.extend(out_first.iter().map(|&f| f as usize));
    let inverse: Vec<i64> = (0..len).map(|k| rank_of[group_of[k]] as i64).collect();
    // The unique slices, copied byte for byte.
    let bytes = x.to_bytes()?;
    let es = x.dtype().bytes();
    let mut y = Vec::with_capacity(outer * m * inner * es);
    for o in 0..outer {
        for &k in &firsts {
            let start = ((o * len + k) * inner) * es;
            y.extend_from_slice(&bytes[start..start + inner * es]);
        }
    }
    let y_shape: Vec<i64> = match axis {
        None => vec![m as i64],
        Some(a) => {
            let mut s = shape.clone();
            s[a] = m as i64;
            s
        }
    };
    let yt = Tensor::empty(&y_shape, x.dtype(), Device::cpu(0))?;
    yt.copy_from_bytes(&y)?;
    Ok([
        yt,
        int64_tensor(&out_first, &[m as i64])?,
        int64_tensor(&inverse, &[len as i64])?,
        int64_tensor(&counts, &[m as i64])?,
    ])
}

/// ONNX `NonMaxSuppression`: for each batch and class, boxes (`boxes [B, N, 4]`, corners
/// `[y1, x1, y2, x2]` in either order, or `[x_center, y_center, width, height]` with
/// `center_point_box`) whose score (`scores [B, C, N]`) is above `score_threshold` (when
/// given), taken by descending score (lower index first among equal scores) while their IoU
/// with every box already taken is at most `iou_threshold`, at most `max_per_class` of them.
/// Returns `[count, 3]` int64 rows `(batch, class, box)`.
pub fn non_max_suppression(
    boxes: &Tensor,
    scores: &Tensor,
    max_per_class: i64,
    iou_threshold: f64,
    score_threshold: Option<f64>,
    center_point_box: bool,
) -> Result<Tensor> {
    let (bs, ss) = (boxes.shape(), scores.shape());
    if bs.len() != 3 || bs[2] != 4 {
        return Err(Error::value_error(format!(
            "NonMaxSuppression: boxes must be [batch, boxes, 4], got {bs:?}"
        )));
    }
    if ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(Error::value_error(format!(
            "NonMaxSuppression: scores must be [batch, classes, boxes] = [{}, C, {}], got {ss:?}",
            bs[0], bs[1]
        )));
    }
    let (nb, nc, n) = (bs[0] as usize, ss[1] as usize, bs[1] as usize);
    let b = host(boxes)?.to_f64_vec()?;
    let s = host(scores)?.to_f64_vec()?;
    let mut out = Vec::new();
    if max_per_class <= 0 {
        return int64_tensor(&out, &[0, 3]);
    }
    // Corners (y1, x1, y2, x2) with y1 <= y2, x1 <= x2.
    let corners = |batch: usize, i: usize| -> [f64; 4] {
        let p = &b[(batch * n + i) * 4..(batch * n + i) * 4 + 4];
        if center_point_box {
            let (xc, yc, w, h) = (p[0], p[1], p[2], p[3]);
            [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
        } else {
            [
                p[0].min(p[2]),
                p[1].min(p[3]),
                p[0].max(p[2]),
                p[1].max(p[3]),
            ]
        }
    };
    let iou = |a: [f64; 4], c: [f64; 4]| -> f64 {
        let ih = (a[2].min(c[2]) - a[0].max(c[0])).max(0.0);
        let iw = (a[3].min(c[3]) - a[1].max(c[1])).max(0.0);
        let inter = ih * iw;
        let area = |r: [f64; 4]| (r[2] - r[0]) * (r[3] - r[1]);
        let union = area(a) + area(c) - inter;
        if union <= 0.0 {
            0.0
        } else {
            inter / union
        }
    };
    for batch in 0..nb {
        for class in 0..nc {
            let sc = &s[(batch * nc + class) * n..(batch * nc + class + 1) * n];
            let order = sorted_indices(n, &|x, y| sc[y].total_cmp(&sc[x]).then(x.cmp(&y)));
            let cand = order
                .into_iter()
                .filter(|&i| score_threshold.is_none_or(|t| sc[i] > t));
            let mut kept: Vec<[f64; 4]> = Vec::new();
            for i in cand {
                if kept.len() as i64 >= max_per_class {
                    break;
                }
                let r = corners(batch, i);
                if kept.iter().all(|&k| iou(k, r) <= iou_threshold) {
                    kept.push(r);
                    out.extend_from_slice(&[batch as i64, class as i64, i as i64]);
                }
            }
        }
    }
    let rows = (out.len() / 3) as i64;
    int64_tensor(&out, &[rows, 3])
}

/// The positions among the first `extent` of `cond` (flattened) whose value is not zero: the
/// slices ONNX `Compress` keeps (a condition shorter than the axis keeps none past its end).
pub fn selected_positions(cond: &Tensor, extent: usize) -> Result<Vec<i64>> {
    Ok(host(cond)?
        .to_f64_vec()?
        .iter()
        .take(extent)
        .enumerate()
        .filter(|(_, &c)| c != 0.0)
        .map(|(i, _)| i as i64)
        .collect())
}

/// ONNX `Compress`: the slices of `x` along `axis` (of the flattened `x` when `None`) at the
/// [`selected_positions`] of `cond`.
pub fn compress(x: &Tensor, cond: &Tensor, axis: Option<i64>) -> Result<Tensor> {
    let x = host(x)?;
    let shape = x.shape().to_vec();
    let (outer, len, inner, out_shape_at) = around_axis(&x, axis, "Compress")?;
    let keep = selected_positions(cond, len)?;
    let es = x.dtype().bytes();
    let bytes = x.to_bytes()?;
    let mut out = Vec::with_capacity(outer * keep.len() * inner * es);
    for o in 0..outer {
        for &k in &keep {
            let start = (o * len + k as usize) * inner * es;
            out.extend_from_slice(&bytes[start..start + inner * es]);
        }
    }
    let out_shape = match out_shape_at {
        None => vec![keep.len() as i64],
        Some(a) => {
            let mut s = shape.clone();
            s[a] = keep.len() as i64;
            s
        }
    };
    let t = Tensor::empty(&out_shape, x.dtype(), Device::cpu(0))?;
    t.copy_from_bytes(&out)?;
    Ok(t)
}

register_global!("vm.builtin.non_zero", |x: Tensor| -> Result<Tensor> {
    non_zero(&x)
});

register_global!("vm.builtin.compress", |x: Tensor,
                                         cond: Tensor,
                                         has_axis: i64,
                                         axis: i64|
 -> Result<Tensor> {
    compress(&x, &cond, (has_axis != 0).then_some(axis))
});

register_global!("vm.builtin.unique", |x: Tensor,
                                       has_axis: i64,
                                       axis: i64,
                                       sorted: i64|
 -> Result<Array> {
    let outs = unique(&x, (has_axis != 0).then_some(axis), sorted != 0)?;
    Ok(outs.into_iter().map(kiln_ffi::Any::from).collect())
});

register_global!(
    "vm.builtin.non_max_suppression",
    |boxes: Tensor,
     scores: Tensor,
     max_per_class: Tensor,
     iou_threshold: Tensor,
     score_threshold: Tensor,
     has_score_threshold: i64,
     center_point_box: i64|
     -> Result<Tensor> {
        let max = super::builtins::scalar(&max_per_class, "max_output_boxes_per_class")?;
        let iou = super::builtins::scalar(&iou_threshold, "iou_threshold")?;
        let score = if has_score_threshold != 0 {
            Some(super::builtins::scalar(
                &score_threshold,
                "score_threshold",
            )?)
        } else {
            None
        };
        non_max_suppression(
            &boxes,
            &scores,
            max as i64,
            iou,
            score,
            center_point_box != 0,
        )
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_sorted_and_in_first_occurrence_order() {
        let x = Tensor::from_slice(&[2.0f32, 1.0, 1.0, 3.0, 4.0, 3.0], &[6]).unwrap();
        let [y, idx, inv, cnt] = unique(&x, None, true).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(idx.to_vec::<i64>().unwrap(), [1, 0, 3, 4]);
        assert_eq!(inv.to_vec::<i64>().unwrap(), [1, 0, 0, 2, 3, 2]);
        assert_eq!(cnt.to_vec::<i64>().unwrap(), [2, 1, 2, 1]);
        let [y, idx, inv, cnt] = unique(&x, None, false).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [2.0, 1.0, 3.0, 4.0]);
        assert_eq!(idx.to_vec::<i64>().unwrap(), [0, 1, 3, 4]);
        assert_eq!(inv.to_vec::<i64>().unwrap(), [0, 1, 1, 2, 3, 2]);
        assert_eq!(cnt.to_vec::<i64>().unwrap(), [1, 2, 2, 1]);
    }

    #[test]
    fn compress_keeps_the_selected_slices() {
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
        let c = Tensor::from_slice(&[0u8, 1, 1], &[3]).unwrap();
        let t = compress(&x, &c, Some(0)).unwrap();
        assert_eq!(t.shape(), [2, 2]);
        assert_eq!(t.to_vec::<f32>().unwrap(), [3.0, 4.0, 5.0, 6.0]);
        let t = compress(&x, &c, None).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [2.0, 3.0]);
        let t = compress(&x, &c, Some(-1)).unwrap();
        assert_eq!(t.shape(), [3, 1]);
        assert_eq!(t.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    }

    #[test]
    fn non_zero_coordinates_row_major() {
        let x = Tensor::from_slice(&[1i32, 0, 0, 5], &[2, 2]).unwrap();
        let t = non_zero(&x).unwrap();
        assert_eq!(t.shape(), [2, 2]);
        assert_eq!(t.to_vec::<i64>().unwrap(), [0, 1, 0, 1]);
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes() {
        // Two overlapping boxes and one apart; one batch, one class.
        let boxes = Tensor::from_slice(
            &[
                0.0f32, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, 10.0, 1.0, 11.0,
            ],
            &[1, 3, 4],
        )
        .unwrap();
        let scores = Tensor::from_slice(&[0.8f32, 0.9, 0.3], &[1, 1, 3]).unwrap();
        let t = non_max_suppression(&boxes, &scores, 3, 0.5, None, false).unwrap();
        assert_eq!(t.to_vec::<i64>().unwrap(), [0, 0, 1, 0, 0, 2]);
        let t = non_max_suppression(&boxes, &scores, 3, 0.5, Some(0.5), false).unwrap();
        assert_eq!(t.to_vec::<i64>().unwrap(), [0, 0, 1]);
    }
}
