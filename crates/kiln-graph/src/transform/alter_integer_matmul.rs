//! AlterOpLayout's rule for integer matrix products (what ONNX MatMulInteger and QLinearMatMul
//! lower to): on a CPU whose description has a four-byte dot product
//! ([`CpuDesc::dot4_u8s8_lanes`], VNNI), `nn.matmul(int32(a) - za, B)` with `a` an 8-bit tensor
//! and `B` an int32 constant whose values fit `int8` (the weight minus its zero point, folded)
//! becomes `nn.dense_dot4` on `a` as `uint8` and `B` packed four bytes per int32, minus the
//! zero-point term:
//!
//! `sum_k (a - za) B = sum_k a' B - (za + s) colsum(B)`, with `a' = a + s` (`s` = 128 for
//! `int8` data, which makes it `uint8`; 0 for `uint8`) and `colsum(B)` folded here. `za` may
//! be a run-time value (DynamicQuantizeLinear's zero point), one per tensor or per row. Data
//! with batch axes is flattened to rows and the result reshaped back; a `K` that is not a
//! multiple of 4 is padded with zeros (zero rows of the packed weight).

use crate::ir::{AttrValue, Expr, Type};
use crate::op::{attr, eval, mk};
use kiln_ffi::{DataType, Result};
use kiln_tir::CpuDesc;
use kiln_topi::schedule::x86::dense::column_block;

/// `(a, za)` when `e` (typed `orig`) is `int32(a)` or `int32(a) - za` with `a` 8-bit.
fn centered_8_bit(orig: &Expr, e: &Expr) -> Option<(Expr, DataType, Option<Expr>)> {
    let (cast_o, cast_e, za) = match e.op_name()? {
        "subtract" => (&orig.args()[0], &e.args()[0], Some(e.args()[1].clone())),
        _ => (orig, e, None),
    };
    if cast_e.op_name()? != "cast" {
        return None;
    }
    let from = cast_o.args()[0].ty().ok()?.dtype();
    let to = cast_o.ty().ok()?.dtype();
    let eight = from == DataType::int(8) || from == DataType::uint(8);
    (eight && to == DataType::int(32)).then(|| (cast_e.args()[0].clone(), from, za))
}

/// The rewrite of `nn.matmul` call `e` (typed `orig`), when it applies.
pub(super) fn alter_integer_matmul(orig: &Expr, e: &Expr, cpu: &CpuDesc) -> Result<Option<Expr>> {
    let Some(lanes) = cpu.dot4_u8s8_lanes() else {
        return Ok(None);
    };
    let attrs = e.attrs();
    let i32t = DataType::int(32);
    if attrs.bool("transpose_a")? || orig.ty()?.dtype() != i32t {
        return Ok(None);
    }
    let Some(bc) = e.args()[1].as_constant() else {
        return Ok(None);
    };
    let Some((a, a_dtype, za)) = centered_8_bit(&orig.args()[0], &e.args()[0]) else {
        return Ok(None);
    };
    let tb = attrs.bool("transpose_b")?;
    let s = bc.shape().to_vec();
    let d = orig.args()[0].ty()?.shape().to_vec();
    if s.len() != 2 || d.len() < 2 {
        return Ok(None);
    }
    let (k, n) = if tb { (s[1], s[0]) } else { (s[0], s[1]) };
    let vals = eval::values(bc)?;
    if d[d.len() - 1] != k || k < 1 {
        return Ok(None);
    }
    let Some(b) = column_block(n, lanes) else {
        return Ok(None);
    };
    let at = |row: i64, kk: i64| -> f64 {
        if tb {
            vals[(row * k + kk) as usize]
        } else {
            vals[(kk * n + row) as usize]
        }
    };
    // One offset per column bringing it into int8 (0 when it already is).
    let mut offset = vec![0f64; n as usize];
    for (row, c) in offset.iter_mut().enumerate() {
        let col = (0..k).map(|kk| at(row as i64, kk));
        let (lo, hi) = col.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
        if hi - lo > 255.0 || lo.fract() != 0.0 {
            return Ok(None);
        }
        if lo < -128.0 || hi > 127.0 {
            *c = lo + 128.0;
        }
    }
    let packed = kiln_topi::nn::pack_dot4_weight(n, k, b, |row, kk| {
        (at(row, kk) - offset[row as usize]) as i8
    });
    let kq = (k + 3) / 4;
    let packed: Vec<f64> = packed.into_iter().map(f64::from).collect();
    let packed = eval::make(&packed, &Type::tensor(&[(n + b - 1) / b, kq, b], i32t))?;
    let colsum: Vec<f64> = (0..n)
        .map(|row| (0..k).map(|kk| at(row, kk)).sum())
        .collect();

    // a' = a + s as uint8, flattened to rows, K padded to whole groups of four.
    let shift = if a_dtype == DataType::int(8) { 128 } else { 0 };
    let mut data = a;
    if shift != 0 {
        let wide = mk("cast", vec![data], &[("dtype", attr("int32"))]);
        let c = Expr::constant(eval::make(&[shift as f64], &Type::tensor(&[], i32t))?);
        data = mk("add", vec![wide, c], &[]);
        data = mk("cast", vec![data], &[("dtype", attr("uint8"))]);
    }
    // c rowsum(a'), when some column has an offset.
    let row_term = if offset.iter().any(|&c| c != 0.0) {
        let wide = mk("cast", vec![data.clone()], &[("dtype", attr("int32"))]);
        let rows = mk(
            "sum",
            vec![wide],
            &[
                ("axis", attr(vec![-1i64])),
                ("keepdims", AttrValue::Bool(true)),
            ],
        );
        let c = Expr::constant(eval::make(&offset, &Type::tensor(&[n], i32t))?);
        Some(mk("multiply", vec![rows, c], &[]))
    } else {
        None
    };
    if d.len() > 2 {
        data = mk("reshape", vec![data], &[("newshape", attr(vec![-1, k]))]);
    }
    if k % 4 != 0 {
        let pad = vec![0, 0, 0, 4 * kq - k];
        data = mk("nn.pad", vec![data], &[("pad_width", attr(pad))]);
    }
    let mut out = mk(
        "nn.dense_dot4",
        vec![data, Expr::constant(packed)],
        &[("units", attr(n))],
    );
    if d.len() > 2 {
        let mut shape = d[..d.len() - 1].to_vec();
        shape.push(n);
        out = mk("reshape", vec![out], &[("newshape", attr(shape))]);
    }
    // The zero-point term (za + s) * colsum(B).
    let colsum = Expr::constant(eval::make(&colsum, &Type::tensor(&[n], i32t))?);
    let zs = match za {
        Some(z) if shift != 0 => {
            let c = Expr::constant(eval::make(&[shift as f64], &Type::tensor(&[], i32t))?);
            Some(mk("add", vec![z, c], &[]))
        }
        Some(z) => Some(z),
        None if shift != 0 => Some(Expr::constant(eval::make(
            &[shift as f64],
            &Type::tensor(&[], i32t),
        )?)),
        None => None,
    };
    if let Some(t) = row_term {
        out = mk("add", vec![out, t], &[]);
    }
    Ok(Some(match zs {
        Some(z) => {
            let term = mk("multiply", vec![z, colsum], &[]);
            mk("subtract", vec![out, term], &[])
        }
        None => out,
    }))
}
