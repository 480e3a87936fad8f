//! AlterOpLayout's rules for integer matrix products and convolutions (what ONNX
//! MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv lower to) on a CPU whose
//! description has a four-byte dot product ([`CpuDesc::dot4_u8s8_lanes`], VNNI):
//!
//! - `nn.matmul(int32(a) - za, B)` with `a` an 8-bit tensor and `B` an int32 constant (the
//!   weight minus its zero point, folded) becomes `nn.dense_dot4` on `a` as `uint8`;
//! - `nn.conv2d(int32(x) - zx, W)` (one group, NCHW/OIHW) becomes `nn.dense_dot4` on the
//!   patches of `x` as `uint8` (`nn.im2col`, padded with the zero point) by `W` flattened to
//!   `[O, C*KH*KW]`, transposed back to NCHW.
//!
//! In both, each output column's weights must span at most 256 values: `B - c` (`c` one offset
//! per column that brings it into `int8`) is packed four bytes per int32, and
//!
//! `sum_k (a - za) B = sum_k a' (B - c) + c rowsum(a') - (za + s) colsum(B)`, with `a' = a + s`
//! (`s` = 128 for `int8` data, which makes it `uint8`; 0 for `uint8`), `rowsum(a')` summed at
//! run time (only when some `c` is not 0) and `colsum(B)` folded here. `za` may be a run-time
//! value (DynamicQuantizeLinear's zero point), one per tensor (or per row of a product). Data
//! with batch axes is flattened to rows and the result reshaped back; a reduction that is not a
//! multiple of 4 is padded with zeros (zero rows of the packed weight).

use crate::ir::{AttrValue, Expr, Type};
use crate::op::{attr, eval, mk};
use kiln_ffi::{DataType, Result};
use kiln_tir::CpuDesc;
use kiln_topi::schedule::x86::dense::column_block;

fn i32t() -> DataType {
    DataType::int(32)
}

/// An int32 constant of `shape`.
fn int_constant(values: &[f64], shape: &[i64]) -> Result<Expr> {
    Ok(Expr::constant(eval::make(
        values,
        &Type::tensor(shape, i32t()),
    )?))
}

/// An integer product's operand `int32(data) - zero` with `data` 8-bit.
struct Centered {
    data: Expr,
    dtype: DataType,
    /// The zero point (none: 0) and how many values it holds.
    zero: Option<(Expr, i64)>,
}

/// `e` (typed `orig`) as [`Centered`] when it is `int32(a)` or `int32(a) - za` with `a` 8-bit.
fn centered_8_bit(orig: &Expr, e: &Expr) -> Option<Centered> {
    let (cast_o, cast_e, zero) = match e.op_name()? {
        "subtract" => {
            let n = orig.args()[1].ty().ok()?.shape().iter().product();
            (
                &orig.args()[0],
                &e.args()[0],
                Some((e.args()[1].clone(), n)),
            )
        }
        _ => (orig, e, None),
    };
    if cast_e.op_name()? != "cast" {
        return None;
    }
    let from = cast_o.args()[0].ty().ok()?.dtype();
    let to = cast_o.ty().ok()?.dtype();
    let eight = from == DataType::int(8) || from == DataType::uint(8);
    (eight && to == i32t()).then(|| Centered {
        data: cast_e.args()[0].clone(),
        dtype: from,
        zero,
    })
}

/// `a + s` as `uint8` and `s` (128 for `int8` data, 0 for `uint8`).
fn as_uint8(a: Expr, dtype: DataType) -> Result<(Expr, i64)> {
    if dtype == DataType::uint(8) {
        return Ok((a, 0));
    }
    let wide = mk("cast", vec![a], &[("dtype", attr("int32"))]);
    let shifted = mk("add", vec![wide, int_constant(&[128.0], &[])?], &[]);
    Ok((mk("cast", vec![shifted], &[("dtype", attr("uint8"))]), 128))
}

/// A constant weight of `n` outputs over a reduction of `k`, packed for `nn.dense_dot4`.
struct PackedWeight {
    /// The int32 packing of `B - c`.
    weight: Expr,
    /// `colsum(B)`, one per output.
    colsum: Vec<f64>,
    /// `c`, one per output (all 0 when every column fits `int8`).
    offset: Vec<f64>,
}

impl PackedWeight {
    /// Packs the weight whose value for output `row` and reduction index `kk` is `at(row, kk)`,
    /// or `None` when a column spans more than 256 values or there is no column block.
    fn new(n: i64, k: i64, lanes: i64, at: impl Fn(i64, i64) -> f64) -> Result<Option<Self>> {
        let Some(block) = column_block(n, lanes) else {
            return Ok(None);
        };
        let mut offset = vec![0f64; n as usize];
        let mut colsum = vec![0f64; n as usize];
        for row in 0..n {
            let col = (0..k).map(|kk| at(row, kk));
            let (lo, hi) = col
                .clone()
                .fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
            if hi - lo > 255.0 || col.clone().any(|v| v.fract() != 0.0) {
                return Ok(None);
            }
            if lo < -128.0 || hi > 127.0 {
                offset[row as usize] = lo + 128.0;
            }
            colsum[row as usize] = col.sum();
        }
        let packed = kiln_topi::nn::pack_dot4_weight(n, k, block, |row, kk| {
            (at(row, kk) - offset[row as usize]) as i8
        });
        let packed: Vec<f64> = packed.into_iter().map(f64::from).collect();
        let shape = [(n + block - 1) / block, (k + 3) / 4, block];
        Ok(Some(PackedWeight {
            weight: int_constant(&packed, &shape)?,
            colsum,
            offset,
        }))
    }

    /// `nn.dense_dot4(rows, weight)` plus `c rowsum(rows)` when some offset is not 0; `rows`
    /// is `[M, K4]` `uint8`.
    fn product(&self, rows: Expr, n: i64) -> Result<Expr> {
        let out = mk(
            "nn.dense_dot4",
            vec![rows.clone(), self.weight.clone()],
            &[("units", attr(n))],
        );
        if self.offset.iter().all(|&c| c == 0.0) {
            return Ok(out);
        }
        let wide = mk("cast", vec![rows], &[("dtype", attr("int32"))]);
        let sums = mk(
            "sum",
            vec![wide],
            &[
                ("axis", attr(vec![-1i64])),
                ("keepdims", AttrValue::Bool(true)),
            ],
        );
        let term = mk(
            "multiply",
            vec![sums, int_constant(&self.offset, &[n])?],
            &[],
        );
        Ok(mk("add", vec![out, term], &[]))
    }

    /// `out - (za + s) colsum`, `colsum` of `shape` (broadcasting against `out`).
    fn centered(&self, out: Expr, za: Option<Expr>, s: i64, shape: &[i64]) -> Result<Expr> {
        let zs = match (za, s) {
            (Some(z), 0) => z,
            (Some(z), s) => mk("add", vec![z, int_constant(&[s as f64], &[])?], &[]),
            (None, 0) => return Ok(out),
            (None, s) => int_constant(&[s as f64], &[])?,
        };
        let term = mk(
            "multiply",
            vec![zs, int_constant(&self.colsum, shape)?],
            &[],
        );
        Ok(mk("subtract", vec![out, term], &[]))
    }
}

/// The rewrite of `nn.matmul` call `e` (typed `orig`), when it applies.
pub(super) fn alter_integer_matmul(orig: &Expr, e: &Expr, cpu: &CpuDesc) -> Result<Option<Expr>> {
    let Some(lanes) = cpu.dot4_u8s8_lanes() else {
        return Ok(None);
    };
    let attrs = e.attrs();
    if attrs.bool("transpose_a")? || orig.ty()?.dtype() != i32t() {
        return Ok(None);
    }
    let Some(bc) = e.args()[1].as_constant() else {
        return Ok(None);
    };
    let Some(c) = centered_8_bit(&orig.args()[0], &e.args()[0]) else {
        return Ok(None);
    };
    let (a, a_dtype, za) = (c.data, c.dtype, c.zero.map(|z| z.0));
    let tb = attrs.bool("transpose_b")?;
    let s = bc.shape().to_vec();
    let d = orig.args()[0].ty()?.shape().to_vec();
    if s.len() != 2 || d.len() < 2 {
        return Ok(None);
    }
    let (k, n) = if tb { (s[1], s[0]) } else { (s[0], s[1]) };
    if d[d.len() - 1] != k || k < 1 {
        return Ok(None);
    }
    let vals = eval::values(bc)?;
    let at = |row: i64, kk: i64| -> f64 {
        if tb {
            vals[(row * k + kk) as usize]
        } else {
            vals[(kk * n + row) as usize]
        }
    };
    let Some(w) = PackedWeight::new(n, k, lanes, at)? else {
        return Ok(None);
    };
    let (mut data, shift) = as_uint8(a, a_dtype)?;
    if d.len() > 2 {
        data = mk("reshape", vec![data], &[("newshape", attr(vec![-1, k]))]);
    }
    if k % 4 != 0 {
        let pad = vec![0, 0, 0, 4 * ((k + 3) / 4) - k];
        data = mk("nn.pad", vec![data], &[("pad_width", attr(pad))]);
    }
    let mut out = w.product(data, n)?;
    if d.len() > 2 {
        let mut shape = d[..d.len() - 1].to_vec();
        shape.push(n);
        out = mk("reshape", vec![out], &[("newshape", attr(shape))]);
    }
    w.centered(out, za, shift, &[n]).map(Some)
}

/// The one value of zero point `za` (int32) plus `s`, as a `uint8` scalar tensor: what the
/// patches of `a + s` are padded with.
fn pad_value(za: Option<&Expr>, s: i64) -> Result<Expr> {
    let Some(z) = za else {
        return Ok(Expr::constant(eval::make(
            &[s as f64],
            &Type::tensor(&[], DataType::uint(8)),
        )?));
    };
    let mut v = mk(
        "reshape",
        vec![z.clone()],
        &[("newshape", attr(Vec::<i64>::new()))],
    );
    if s != 0 {
        v = mk("add", vec![v, int_constant(&[s as f64], &[])?], &[]);
    }
    Ok(mk("cast", vec![v], &[("dtype", attr("uint8"))]))
}

/// The rewrite of `nn.conv2d` call `e` (typed `orig`), when it applies.
pub(super) fn alter_integer_conv(orig: &Expr, e: &Expr, cpu: &CpuDesc) -> Result<Option<Expr>> {
    let Some(lanes) = cpu.dot4_u8s8_lanes() else {
        return Ok(None);
    };
    let attrs = e.attrs();
    if orig.ty()?.dtype() != i32t()
        || attrs.int("groups")? != 1
        || attrs.str("kernel_layout")? != "OIHW"
        || attrs.str("data_layout")? != "NCHW"
    {
        return Ok(None);
    }
    let Some(wc) = e.args()[1].as_constant() else {
        return Ok(None);
    };
    let Some(c) = centered_8_bit(&orig.args()[0], &e.args()[0]) else {
        return Ok(None);
    };
    let ws = wc.shape().to_vec();
    let out = orig.ty()?.shape().to_vec();
    if ws.len() != 4 || out.len() != 4 {
        return Ok(None);
    }
    // A zero point other than one per tensor cannot pad the patches.
    if c.zero.as_ref().is_some_and(|z| z.1 != 1) {
        return Ok(None);
    }
    let (x, x_dtype, zx) = (c.data, c.dtype, c.zero.map(|z| z.0));
    let (o, k) = (ws[0], ws[1] * ws[2] * ws[3]);
    let vals = eval::values(wc)?;
    // Patch columns run over taps, then channels ([`kiln_topi::nn::im2col`]).
    let (c, taps) = (ws[1], ws[2] * ws[3]);
    let at = |row: i64, q: i64| vals[(row * k + (q % c) * taps + q / c) as usize];
    let Some(w) = PackedWeight::new(o, k, lanes, at)? else {
        return Ok(None);
    };
    let (data, shift) = as_uint8(x, x_dtype)?;
    let pad = pad_value(zx.as_ref(), shift)?;
    let call = e.as_call().expect("a call");
    let mut cols_attrs = call.attrs.clone();
    for (key, value) in [
        ("kernel_size", AttrValue::Ints(vec![ws[2], ws[3]])),
        ("columns", AttrValue::Int(4 * ((k + 3) / 4))),
    ] {
        cols_attrs = crate::ir::attrs::with_attr(&cols_attrs, key, value);
    }
    let cols = Expr::call_raw(Expr::op("nn.im2col"), vec![data, pad], cols_attrs);
    let prod = w.product(cols, o)?;
    let (n, oh, ow) = (out[0], out[2], out[3]);
    let nhwc = mk(
        "reshape",
        vec![prod],
        &[("newshape", attr(vec![n, oh, ow, o]))],
    );
    let nchw = mk(
        "transpose",
        vec![nhwc],
        &[("axes", attr(vec![0i64, 3, 1, 2]))],
    );
    // Padding with the zero point makes every tap count: the term is colsum per filter.
    w.centered(nchw, zx, shift, &[o, 1, 1]).map(Some)
}
