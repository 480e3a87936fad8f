//! `KeepQuantizedWeights`: a matrix product by a dequantized 8-bit constant (weight-only
//! quantization, as exporters write it: `Cast` and `Mul`, or `DequantizeLinear`) becomes a
//! product by the 8-bit constant itself, scaled after, so the weight stays 8-bit in the library
//! and the product's kernel converts it on each read (`nn.dense` and `nn.matmul` take float data
//! and an integer weight, [`kiln_topi::nn::product_dtype`]).
//!
//! `matmul(A, (float(Q) - Z) * S)` with `Q` an `int8`/`uint8` constant and the zero point `Z` and
//! scale `S` constants that are one value or one per output column becomes
//! `matmul(A, Q - Z) * S`, `Q - Z` computed here (kept when every value fits 8 bits, signed or
//! not). The column scale moves past the sum over `K` exactly (up to float rounding): each
//! output column has one scale. Without this pass `FoldConstant` would store the dequantized
//! weight as float32, four times the bytes.

use super::fold_constant::try_fold;
use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::visit::rewrite_function_orig;
use crate::ir::{Expr, Type};
use crate::op::{eval, mk};
use kiln_ffi::{DataType, Result};
use kiln_runtime::tensor::Tensor;
use kiln_tir::DataTypeExt;

/// The pass (opt level 2, with `FoldConstant`, which it must run before).
pub fn keep_quantized_weights() -> Pass {
    function_pass("KeepQuantizedWeights", 2, |f, _| {
        let f = infer_function(&f)?;
        let out = rewrite_function_orig(&f, |orig, e| {
            Ok(rewrite(orig, e)?.unwrap_or_else(|| e.clone()))
        })?;
        infer_function(&out)
    })
}

/// A weight `(float(q) - zero) * scale` found under a product.
struct Dequantized {
    q: Tensor,
    zero: Option<Tensor>,
    scale: Option<Tensor>,
}

/// Whether a cast to `to` keeps every value of an 8-bit integer minus an 8-bit zero point
/// exactly (32/64-bit integers, or floats of at least `float32`'s precision).
fn exact_target(to: DataType) -> bool {
    (to.is_integer() && to.bits() >= 16) || (to.is_float() && to.bits() >= 32)
}

/// The most elements of a zero point or scale computed here from constants.
const SMALL: usize = 1 << 16;

/// The value of `e` when it is a constant or a small computation over constants (a scale
/// reshaped or cast by the importer), folded with the operators' evaluators.
fn small_constant(e: &Expr) -> Option<Tensor> {
    if let Some(t) = e.as_constant() {
        return Some(t.clone());
    }
    let call = e.as_call()?;
    let args: Option<Vec<Expr>> = call
        .args
        .iter()
        .map(|a| {
            small_constant(a)
                .filter(|t| t.numel() <= SMALL)
                .map(Expr::constant)
        })
        .collect();
    let rebuilt = Expr::call_raw(call.op.clone(), args?, call.attrs.clone());
    let folded = try_fold(&rebuilt).ok()??;
    folded.as_constant().filter(|t| t.numel() <= SMALL).cloned()
}

/// The dequantization behind `e`: casts that keep values exact, at most one subtraction of a
/// constant and one multiplication by a constant (scale outermost) over an 8-bit constant.
fn dequantized(e: &Expr) -> Option<Dequantized> {
    if let Some(t) = e.as_constant() {
        let d = t.dtype();
        return (d == DataType::int(8) || d == DataType::uint(8)).then(|| Dequantized {
            q: t.clone(),
            zero: None,
            scale: None,
        });
    }
    let args = e.args();
    match e.op_name()? {
        "cast" => exact_target(e.ty().ok()?.as_tensor()?.1).then(|| dequantized(&args[0]))?,
        "subtract" => {
            let z = small_constant(&args[1])?;
            let inner = dequantized(&args[0])?;
            (inner.zero.is_none() && inner.scale.is_none()).then(|| Dequantized {
                zero: Some(z),
                ..inner
            })
        }
        "multiply" => [(0, 1), (1, 0)].into_iter().find_map(|(x, c)| {
            let inner = dequantized(&args[x])?;
            let s = small_constant(&args[c])?;
            (inner.scale.is_none() && s.dtype().is_float()).then(|| Dequantized {
                scale: Some(s),
                ..inner
            })
        }),
        _ => None,
    }
}

/// The values of `p` (one, or one per column of a `[rows, cols]` weight whose columns lie along
/// `n_axis`) as one value per column; `None` when `p` varies along the other axis.
fn per_column(p: &Tensor, rows_cols: [i64; 2], n_axis: usize) -> Option<Vec<f64>> {
    let s = p.shape();
    if s.len() > 2 {
        return None;
    }
    let mut dims = vec![1; 2 - s.len()];
    dims.extend_from_slice(s);
    let n = rows_cols[n_axis];
    if dims[1 - n_axis] != 1 || (dims[n_axis] != 1 && dims[n_axis] != n) {
        return None;
    }
    let v = eval::values(p).ok()?;
    Some((0..n as usize).map(|j| v[j % v.len()]).collect())
}

/// `q - zero` (zero one value per column along `n_axis`) as an 8-bit constant: `int8` when every
/// value fits it, else `uint8`; `None` when the values do not fit 8 bits or a zero point is
/// not an integer.
fn centered(q: &Tensor, zero: &[f64], n_axis: usize) -> Option<Tensor> {
    let s = q.shape().to_vec();
    let vals = eval::values(q).ok()?;
    if zero.iter().any(|z| z.fract() != 0.0) {
        return None;
    }
    let cols = s[1] as usize;
    let out: Vec<f64> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let j = if n_axis == 1 { i % cols } else { i / cols };
            v - zero[j]
        })
        .collect();
    let (lo, hi) = out
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    let dtype = if lo >= -128.0 && hi <= 127.0 {
        DataType::int(8)
    } else if lo >= 0.0 && hi <= 255.0 {
        DataType::uint(8)
    } else {
        return None;
    };
    eval::make(&out, &Type::tensor(&s, dtype)).ok()
}

/// `nn.matmul` / `nn.dense` (typed `orig`, rebuilt `e`) by a dequantized 8-bit constant, as
/// the product by the 8-bit constant times the column scales.
fn rewrite(orig: &Expr, e: &Expr) -> Result<Option<Expr>> {
    let n_axis = match e.op_name() {
        Some("nn.dense") => 0,
        Some("nn.matmul") if !e.attrs().bool("transpose_a")? => {
            if e.attrs().bool("transpose_b")? {
                0
            } else {
                1
            }
        }
        _ => return Ok(None),
    };
    let data = orig.args()[0].ty()?;
    let wty = orig.args()[1].ty()?;
    let Some((shape, wdt)) = wty.as_tensor() else {
        return Ok(None);
    };
    let Some(dq) = dequantized(&e.args()[1]) else {
        return Ok(None);
    };
    let fdt = data.dtype();
    if shape.len() != 2 || !fdt.is_float() || wdt != fdt {
        return Ok(None);
    }
    let rc = [shape[0], shape[1]];
    let weight = match &dq.zero {
        None => Some(dq.q.clone()),
        Some(z) => per_column(z, rc, n_axis).and_then(|z| centered(&dq.q, &z, n_axis)),
    };
    let Some(weight) = weight else {
        return Ok(None);
    };
    let scale = match &dq.scale {
        None => None,
        Some(s) if s.dtype() == fdt => match per_column(s, rc, n_axis) {
            Some(v) => Some(eval::make(&v, &Type::tensor(&[rc[n_axis]], fdt))?),
            None => return Ok(None),
        },
        Some(_) => return Ok(None),
    };
    let call = e.as_call().expect("a call");
    let product = Expr::call_raw(
        call.op.clone(),
        vec![e.args()[0].clone(), Expr::constant(weight)],
        call.attrs.clone(),
    );
    Ok(Some(match scale {
        Some(s) => mk("multiply", vec![product, Expr::constant(s)], &[]),
        None => product,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Function, IRModule, Var};
    use crate::transform::PassContext;
    use kiln_testing::rng::{fresh_seed, Lcg};

    /// `matmul(x, (float(q) - z) * s)` built as the ONNX importer writes DequantizeLinear.
    fn model(q: &[i64], z: Option<f64>, s: &[f32], k: i64, n: i64, dtype: DataType) -> IRModule {
        let x = Var::new("x", Type::f32(&[3, k]));
        let qv: Vec<f64> = q.iter().map(|&v| v as f64).collect();
        let qc = Expr::constant(eval::make(&qv, &Type::tensor(&[k, n], dtype)).unwrap());
        let mut w = mk("cast", vec![qc], &[("dtype", "int32".into())]);
        if let Some(z) = z {
            let zc = eval::make(&[z], &Type::tensor(&[], DataType::int(32))).unwrap();
            w = mk("subtract", vec![w, Expr::constant(zc)], &[]);
        }
        w = mk("cast", vec![w], &[("dtype", "float32".into())]);
        let sv: Vec<f64> = s.iter().map(|&v| v as f64).collect();
        let sc = eval::make(&sv, &Type::f32(&[n])).unwrap();
        w = mk("multiply", vec![w, Expr::constant(sc)], &[]);
        let body = mk("nn.matmul", vec![x.expr(), w], &[]);
        IRModule::from_main(Function::new(vec![x], body))
    }

    fn run(m: IRModule) -> Expr {
        let ctx = PassContext::with_opt_level(3);
        let m = super::super::infer_type().run(m, &ctx).unwrap();
        keep_quantized_weights()
            .run(m, &ctx)
            .unwrap()
            .main()
            .unwrap()
            .body()
            .clone()
    }

    #[test]
    fn dequantized_weight_becomes_an_8_bit_operand_scaled_after() {
        let mut rng = Lcg::new(fresh_seed());
        let (k, n) = (5, 4);
        let q: Vec<i64> = (0..k * n).map(|_| rng.below(256) as i64).collect();
        let s: Vec<f32> = (0..n).map(|_| rng.uniform(0.01, 0.1)).collect();
        let out = run(model(&q, Some(128.0), &s, k, n, DataType::uint(8)));
        assert_eq!(out.op_name(), Some("multiply"));
        let prod = &out.args()[0];
        assert_eq!(prod.op_name(), Some("nn.matmul"));
        let w = prod.args()[1].as_constant().expect("an 8-bit constant");
        assert_eq!(w.dtype(), DataType::int(8));
        let got = eval::values(w).unwrap();
        let want: Vec<f64> = q.iter().map(|&v| v as f64 - 128.0).collect();
        assert_eq!(got, want);
        let scale = eval::values(out.args()[1].as_constant().unwrap()).unwrap();
        let want: Vec<f64> = s.iter().map(|&v| v as f64).collect();
        assert_eq!(scale, want);
        assert_eq!(out.ty().unwrap(), Type::f32(&[3, n]));
    }

    #[test]
    fn weights_that_do_not_fit_8_bits_stay_as_they_are() {
        // uint8 values minus a zero point of 200 span [-200, 55]: neither int8 nor uint8.
        let q: Vec<i64> = (0..20).map(|i| i * 13 % 256).collect();
        let out = run(model(&q, Some(200.0), &[0.5; 4], 5, 4, DataType::uint(8)));
        assert_eq!(out.op_name(), Some("nn.matmul"));
        assert_eq!(out.args()[1].op_name(), Some("multiply"));
    }
}
