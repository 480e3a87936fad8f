//! 2-D max and average pooling, NCHW: kernel, strides, dilation, 4-sided padding, ceil mode
//! and `count_include_pad`.

use super::pad::{pad_nchw, Padding2d};
use super::{
    compute_tagged, consts, invalid, is_static, nchw_or_blocks_dims, nchw_or_blocks_shape, plus,
    window_out,
};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{max, min_value, reduce_axis_n, sum, Tensor};
use kiln_tir::DataTypeExt;
use kiln_tir::{floordiv, PrimExpr};

/// Attributes of [`max_pool2d`] and [`avg_pool2d`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dAttrs {
    /// `(kernel_h, kernel_w)`.
    pub pool_size: (i64, i64),
    /// `(stride_h, stride_w)`.
    pub strides: (i64, i64),
    /// `(dilation_h, dilation_w)`.
    pub dilation: (i64, i64),
    /// Padding of H and W (never part of a max; see `count_include_pad` for averages).
    pub padding: Padding2d,
    /// Output extents rounded up (a last window may start in the input or the top/left
    /// padding and hang over the end).
    pub ceil_mode: bool,
    /// Averages divide by the window size clipped to the padded input (true) or by the
    /// number of input elements in the window (false).
    pub count_include_pad: bool,
}

impl Pool2dAttrs {
    /// A `k` x `k` window moving by `stride`, no padding.
    pub fn new(k: i64, stride: i64) -> Pool2dAttrs {
        Pool2dAttrs {
            pool_size: (k, k),
            strides: (stride, stride),
            dilation: (1, 1),
            padding: Padding2d::default(),
            ceil_mode: false,
            count_include_pad: false,
        }
    }
}

/// One output extent (ONNX / PyTorch rule: in ceil mode the last window must start inside
/// the input or its leading padding).
fn pool_out(
    input: i64,
    pad_lo: i64,
    pad_hi: i64,
    k: i64,
    s: i64,
    d: i64,
    ceil: bool,
) -> Result<i64> {
    let floor = window_out(input, pad_lo + pad_hi, k, s, d, "pool2d")?;
    if !ceil {
        return Ok(floor);
    }
    let span = d * (k - 1) + 1;
    let mut out = (input + pad_lo + pad_hi - span + s - 1).div_euclid(s) + 1;
    if (out - 1) * s >= input + pad_lo {
        out -= 1;
    }
    Ok(out.max(floor))
}

/// [`pool_out`] over an input extent that may be known only at run time (an expression then).
fn pool_out_expr(
    input: &PrimExpr,
    pad_lo: i64,
    pad_hi: i64,
    k: i64,
    s: i64,
    d: i64,
    ceil: bool,
) -> Result<PrimExpr> {
    if let Some(n) = input.as_int() {
        return pool_out(n, pad_lo, pad_hi, k, s, d, ceil).map(PrimExpr::i32);
    }
    let floor = super::window_out_expr(input, pad_lo + pad_hi, k, s, d, "pool2d")?;
    if !ceil {
        return Ok(floor);
    }
    let span = d * (k - 1) + 1;
    let up = floordiv(input.clone() + (pad_lo + pad_hi - span + s - 1), s) + 1;
    // The last window must start inside the input or its leading padding.
    let starts_inside = ((up.clone() - 1) * s).lt(input.clone() + pad_lo);
    let up = kiln_tir::select(starts_inside, up.clone(), up - 1);
    Ok(kiln_tir::max(up, floor))
}

/// The output shape `[N, C, OH, OW]` of a pooling of `data` `[N, C, H, W]`.
pub fn pool2d_out_shape(data: &[i64], a: &Pool2dAttrs) -> Result<[i64; 4]> {
    if a.padding.is_negative() {
        return Err(invalid(
            "pool2d",
            format!("negative padding {:?}", a.padding),
        ));
    }
    let p = a.padding;
    let oh = pool_out(
        data[2],
        p.top,
        p.bottom,
        a.pool_size.0,
        a.strides.0,
        a.dilation.0,
        a.ceil_mode,
    )?;
    let ow = pool_out(
        data[3],
        p.left,
        p.right,
        a.pool_size.1,
        a.strides.1,
        a.dilation.1,
        a.ceil_mode,
    )?;
    Ok([data[0], data[1], oh, ow])
}

/// `ceil(a / d)` for positive `d`.
fn ceildiv(a: PrimExpr, d: i64) -> PrimExpr {
    floordiv(a + (d - 1), d)
}

/// How many of `start + r*d` (`r < k`) lie in `[lo, hi)`.
fn count_in(start: &PrimExpr, k: i64, d: i64, lo: i64, hi: PrimExpr) -> PrimExpr {
    let first = kiln_tir::max(ceildiv(lo - start.clone(), d), 0);
    let last = kiln_tir::min(ceildiv(hi - start.clone(), d), k);
    kiln_tir::max(last - first, 0)
}

struct Window {
    n: PrimExpr,
    ch: PrimExpr,
    y: PrimExpr,
    x: PrimExpr,
    valid: PrimExpr,
    /// The channel-in-block index of blocked data (`NCHW{b}c`), if any.
    tail: Option<PrimExpr>,
}

impl Window {
    /// The index of the window's input element.
    fn index(&self) -> Vec<PrimExpr> {
        let mut idx = vec![
            self.n.clone(),
            self.ch.clone(),
            self.y.clone(),
            self.x.clone(),
        ];
        idx.extend(self.tail.clone());
        idx
    }
}

/// The output shape of a pooling of data of dimensions `ds` (4-D or blocked 5-D; the
/// spatial ones and the batch may be known only at run time).
fn pool_out_full(ds: &[PrimExpr], a: &Pool2dAttrs) -> Result<Vec<PrimExpr>> {
    if a.padding.is_negative() {
        return Err(invalid(
            "pool2d",
            format!("negative padding {:?}", a.padding),
        ));
    }
    let p = a.padding;
    let (k, s, d) = (a.pool_size, a.strides, a.dilation);
    let mut out = ds.to_vec();
    out[2] = pool_out_expr(&ds[2], p.top, p.bottom, k.0, s.0, d.0, a.ceil_mode)?;
    out[3] = pool_out_expr(&ds[3], p.left, p.right, k.1, s.1, d.1, a.ceil_mode)?;
    Ok(out)
}

fn window(
    i: &[kiln_tir::Var],
    a: &Pool2dAttrs,
    ry: &PrimExpr,
    rx: &PrimExpr,
    h: &PrimExpr,
    w: &PrimExpr,
) -> Window {
    let y = i[2].to_expr() * a.strides.0 - a.padding.top + ry.clone() * a.dilation.0;
    let x = i[3].to_expr() * a.strides.1 - a.padding.left + rx.clone() * a.dilation.1;
    let valid = y
        .ge(0)
        .logical_and(y.lt(h.clone()))
        .logical_and(x.ge(0))
        .logical_and(x.lt(w.clone()));
    Window {
        n: i[0].to_expr(),
        ch: i[1].to_expr(),
        y,
        x,
        valid,
        tail: i.get(4).map(|v| v.to_expr()),
    }
}

/// Max pooling: the largest input element under each window (padding never wins). Tagged
/// [`tag::POOL2D`]. For floats the input is first padded with `-inf` (a stage named
/// `pad_data`, also covering windows that hang over the end in ceil mode), so the window reads
/// need no bounds test and rows vectorize.
pub fn max_pool2d(data: &Tensor, attrs: &Pool2dAttrs) -> Result<Tensor> {
    let dims = nchw_or_blocks_dims(data, "max_pool2d")?;
    let out = pool_out_full(&dims, attrs)?;
    let ry = reduce_axis_n(attrs.pool_size.0, "ry");
    let rx = reduce_axis_n(attrs.pool_size.1, "rx");
    let dt = data.dtype();
    if dt.is_floating() && is_static(data) {
        let ds = nchw_or_blocks_shape(data, "max_pool2d")?;
        let out: Vec<i64> = out.iter().filter_map(|d| d.as_int()).collect();
        let (s, d, k, p) = (
            attrs.strides,
            attrs.dilation,
            attrs.pool_size,
            attrs.padding,
        );
        let span_h = (out[2] - 1) * s.0 + (k.0 - 1) * d.0 + 1;
        let span_w = (out[3] - 1) * s.1 + (k.1 - 1) * d.1 + 1;
        let pad = Padding2d {
            bottom: (span_h - ds[2] - p.top).max(0),
            right: (span_w - ds[3] - p.left).max(0),
            ..p
        };
        let padded = pad_nchw(data, pad, f64::NEG_INFINITY, super::pad::PAD_STAGE)?;
        return compute_tagged(
            &consts(&out),
            |i| {
                let y = i[2].to_expr() * s.0 + ry.expr() * d.0;
                let x = i[3].to_expr() * s.1 + rx.expr() * d.1;
                let mut idx = vec![i[0].to_expr(), i[1].to_expr(), y, x];
                idx.extend(i.get(4).map(|v| v.to_expr()));
                max(padded.at(&idx), &[ry.clone(), rx.clone()])
            },
            "max_pool2d",
            tag::POOL2D,
        );
    }
    // Bounds tested per read (integers, or extents known only at run time).
    let d = data.clone();
    compute_tagged(
        &out,
        |i| {
            let wd = window(i, attrs, &ry.expr(), &rx.expr(), &dims[2], &dims[3]);
            let v = kiln_te::if_then_else(wd.valid.clone(), d.at(&wd.index()), min_value(dt));
            max(v, &[ry.clone(), rx.clone()])
        },
        "max_pool2d",
        tag::POOL2D,
    )
}

/// Average pooling: the sum under each window over the count `count_include_pad` selects.
/// The sum is a stage named `avg_pool2d_sum` (tagged [`tag::POOL2D`]); the output divides
/// it (tagged [`tag::ELEMWISE`]).
pub fn avg_pool2d(data: &Tensor, attrs: &Pool2dAttrs) -> Result<Tensor> {
    let ds = nchw_or_blocks_dims(data, "avg_pool2d")?;
    let out = pool_out_full(&ds, attrs)?;
    let (kh, kw) = attrs.pool_size;
    let ry = reduce_axis_n(kh, "ry");
    let rx = reduce_axis_n(kw, "rx");
    let dt = data.dtype();
    let d = data.clone();
    let total = compute_tagged(
        &out,
        |i| {
            let wd = window(i, attrs, &ry.expr(), &rx.expr(), &ds[2], &ds[3]);
            let v = kiln_te::if_then_else(
                wd.valid.clone(),
                d.at(&wd.index()),
                PrimExpr::const_float(dt, 0.0),
            );
            sum(v, &[ry.clone(), rx.clone()])
        },
        "avg_pool2d_sum",
        tag::POOL2D,
    )?;
    let a = *attrs;
    let p = a.padding;
    compute_tagged(
        &out,
        |i| {
            let y0 = i[2].to_expr() * a.strides.0 - p.top;
            let x0 = i[3].to_expr() * a.strides.1 - p.left;
            let (lo_h, hi_h, lo_w, hi_w) = if a.count_include_pad {
                (
                    -p.top,
                    plus(&ds[2], p.bottom),
                    -p.left,
                    plus(&ds[3], p.right),
                )
            } else {
                (0, ds[2].clone(), 0, ds[3].clone())
            };
            let count = count_in(&y0, kh, a.dilation.0, lo_h, hi_h)
                * count_in(&x0, kw, a.dilation.1, lo_w, hi_w);
            let count = kiln_tir::max(count, 1).cast(dt);
            total.at_vars(i) / count
        },
        "avg_pool2d",
        tag::ELEMWISE,
    )
}
