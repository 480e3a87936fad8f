//! Spectral computes whose extents are known only at run time: the short-time Fourier
//! transform of ONNX STFT (frames, step and length given per run).

use crate::tag;
use crate::transform::run_time::run_time_dims;
use crate::transform::util::compute_tagged;
use kiln_ffi::{DataType, Error, Result};
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{cast, select, PrimExpr};

/// The short-time Fourier transform of `signal` (`[B, L, 1]` real or `[B, L, 2]` complex):
/// frame `f` starts at `f * step` (`step` a one-element int tensor read per run) and is
/// weighted by `window` (`[W]`, W the frame length); bin `k` of frame `f` is
/// `sum_n window[n] x[f * step + n] e^(-2 pi i k n / W)`, as `[re, im]` on the last axis:
/// `[B, frames, bins, 2]`, frames and bins (`W / 2 + 1` one-sided, else `W`) bound from the
/// result. The angle is reduced modulo the period in integers; terms and sums in float64.
///
/// # Errors
/// A `ValueError` for a signal of another shape, or a window not 1-D.
pub fn stft_run_time(signal: &Tensor, step: &Tensor, window: &Tensor) -> Result<Tensor> {
    let c = signal.shape().get(2).and_then(|d| d.as_int());
    if signal.ndim() != 3 || !matches!(c, Some(1 | 2)) || window.ndim() != 1 {
        return Err(Error::value_error(
            "stft: the signal must be [batch, length, 1 or 2] and the window 1-D",
        ));
    }
    let complex = c == Some(2);
    let dtype = signal.dtype();
    let (i32t, f64t) = (DataType::int(32), DataType::float(64));
    let w = window.shape()[0].clone();
    let dims = run_time_dims(2);
    let shape = vec![
        signal.shape()[0].clone(),
        dims[0].clone(),
        dims[1].clone(),
        PrimExpr::i32(2),
    ];
    let step = cast(i32t, step.at(&vec![PrimExpr::i32(0); step.ndim()]));
    let rn = reduce_axis_n(w.clone(), "n");
    let acc = compute_tagged(
        &shape,
        |i| {
            let (b, f, k, part) = (
                i[0].to_expr(),
                i[1].to_expr(),
                i[2].to_expr(),
                i[3].to_expr(),
            );
            let n = rn.expr();
            let t = f * step.clone() + n.clone();
            let at = |c: i64| cast(f64t, signal.at(&[b.clone(), t.clone(), PrimExpr::i32(c)]));
            let (re, im) = (at(0), if complex { at(1) } else { PrimExpr::f64(0.0) });
            // The angle 2 pi (k n mod W) / W.
            let kn = kiln_tir::floormod(k * n.clone(), w.clone());
            let theta = cast(f64t, kn) * (2.0 * std::f64::consts::PI) / cast(f64t, w.clone());
            let (cos, sin) = (kiln_tir::op::cos(theta.clone()), kiln_tir::op::sin(theta));
            let value = select(
                part.equal(0),
                re.clone() * cos.clone() + im.clone() * sin.clone(),
                im * cos - re * sin,
            );
            sum(
                value * cast(f64t, window.at(&[n])),
                std::slice::from_ref(&rn),
            )
        },
        "stft_sum",
        tag::COMM_REDUCE,
    )?;
    // Accumulated in float64 (as the reference computes it), returned as the signal's type.
    compute_tagged(
        &shape,
        |i| {
            let idx: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            cast(dtype, acc.at(&idx))
        },
        "stft",
        tag::INJECTIVE,
    )
}

/// ONNX MelWeightMatrix of run-time parameters: `[dft_length / 2 + 1, num_mel_bins]` (both
/// bound from the result) of triangular filters between mel points spaced evenly from
/// `lower` to `upper` hertz, `dft_length`, `sample_rate` (one-element integer tensors) and
/// `lower`, `upper` (one-element float tensors) read per run; computed in float64 as ONNX's
/// reference does, returned as `dtype`. Frequency bins a filter reaches past the spectrum are
/// not part of the result.
///
/// # Errors
/// As `compute`.
pub fn mel_weight_matrix_run_time(
    dft_length: &Tensor,
    rate: &Tensor,
    lower: &Tensor,
    upper: &Tensor,
    dtype: DataType,
) -> Result<Tensor> {
    let f64t = DataType::float(64);
    let scalar = |t: &Tensor| cast(f64t, t.at(&vec![PrimExpr::i32(0); t.ndim()]));
    let (n, rate) = (scalar(dft_length), scalar(rate));
    let dims = run_time_dims(2);
    let bins = cast(f64t, dims[1].clone());
    let ln10 = std::f64::consts::LN_10;
    let mel = |hz: PrimExpr| kiln_tir::op::log1p(hz / 700.0) * 2595.0 / ln10;
    let (lo, hi) = (mel(scalar(lower)), mel(scalar(upper)));
    let step = (hi - lo.clone()) / (bins + 2.0);
    // Mel point `i` as a frequency bin: floor((dft_length + 1) * hz / sample_rate).
    let point = |i: PrimExpr| {
        let m = cast(f64t, i) * step.clone() + lo.clone();
        let hz = kiln_tir::op::expm1(m / 2595.0 * ln10) * 700.0;
        kiln_tir::op::floor((n.clone() + 1.0) * hz / rate.clone())
    };
    compute_tagged(
        &dims,
        |i| {
            let (j, band) = (cast(f64t, i[0].to_expr()), i[1].to_expr());
            let (l, c, h) = (
                point(band.clone()),
                point(band.clone() + 1),
                point(band + 2),
            );
            let zero = PrimExpr::f64(0.0);
            let up = select(
                c.clone().equal(l.clone()),
                select(j.clone().equal(c.clone()), PrimExpr::f64(1.0), zero.clone()),
                select(
                    j.clone().ge(l.clone()).logical_and(j.clone().le(c.clone())),
                    (j.clone() - l.clone()) / (c.clone() - l),
                    zero,
                ),
            );
            let falling = h
                .clone()
                .gt(c.clone())
                .logical_and(j.clone().ge(c.clone()))
                .logical_and(j.clone().lt(h.clone()));
            let down = (h.clone() - j) / (h - c);
            cast(dtype, select(falling, down, up))
        },
        "mel_weight_matrix",
        tag::INJECTIVE,
    )
}
