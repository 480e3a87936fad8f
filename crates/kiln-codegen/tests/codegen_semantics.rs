//! Scalar semantics of generated code against Rust: integer division and modulo (truncating
//! and floor) on negative operands, min/max, shifts and bit operations, casts (float16,
//! bfloat16, int8, uint8, float64, bool), math intrinsics, select and if_then_else.

mod codegen_common;

use codegen_common::*;
use half::{bf16, f16};
use kiln_ffi::DataType;
use kiln_tir::{floordiv, floormod, max, min, op, select, truncdiv, truncmod};
use kiln_tir::{Buffer, ForKind, PrimExpr, Stmt, Var};

fn i32_inputs() -> (Vec<i32>, Vec<i32>) {
    let mut a = vec![7, -7, 7, -7, 0, 1, -1, 13, -13, i32::MAX, i32::MIN + 1, 5];
    let mut b = vec![2, 2, -2, -2, 3, -3, 3, 4, -4, 7, 7, -5];
    for k in 0..64 {
        a.push(k * 37 % 201 - 100);
        b.push(if k % 7 == 0 { -3 } else { k % 13 - 6 }.max(1) * if k % 2 == 0 { 1 } else { -1 });
    }
    (a, b)
}

#[test]
fn integer_division_modulo_and_bits() {
    let n = Var::int32("n");
    let i32t = DataType::int(32);
    let (a, b) = (buf("A", i32t, &n), buf("B", i32t, &n));
    let outs: Vec<Buffer> = (0..9).map(|k| buf(&format!("O{k}"), i32t, &n)).collect();
    let i = Var::int32("i");
    let (x, y) = (a.load(vec![i.to_expr()]), b.load(vec![i.to_expr()]));
    let vals = [
        floordiv(&x, &y),
        floormod(&x, &y),
        truncdiv(&x, &y),
        truncmod(&x, &y),
        min(&x, &y),
        max(&x, &y),
        op::shift_right(&x, 2),
        op::bitwise_xor(op::shift_left(&x, 1), &y),
        select(x.lt(&y), &x * 3, &y - 1),
    ];
    let stores = outs
        .iter()
        .zip(vals)
        .map(|(o, v)| o.store(v, vec![i.to_expr()]))
        .collect();
    let body = Stmt::for_loop(&i, 0, &n, ForKind::Serial, Stmt::seq(stores));
    let mut params = vec![Param::Tensor(a), Param::Tensor(b)];
    params.extend(outs.into_iter().map(Param::Tensor));
    let f = packed_func("intops", &params, body);
    let m = kiln_codegen::build(&module(vec![f]), &native()).unwrap();
    let (av, bv) = i32_inputs();
    let len = av.len();
    let outs: Vec<_> = (0..9).map(|_| tensor(&vec![i32::MIN; len])).collect();
    let mut args: Vec<kiln_ffi::Any> = vec![tensor(&av).into(), tensor(&bv).into()];
    args.extend(outs.iter().map(|t| t.clone().into()));
    m.function("intops").unwrap().call_any(&args).unwrap();
    let got: Vec<Vec<i32>> = outs.iter().map(|t| t.to_vec::<i32>().unwrap()).collect();
    for k in 0..len {
        let (x, y) = (av[k], bv[k]);
        let fix = x % y != 0 && ((x % y < 0) != (y < 0));
        let want = [
            x / y - fix as i32,
            x % y + if fix { y } else { 0 },
            x / y,
            x % y,
            x.min(y),
            x.max(y),
            x >> 2,
            (x.wrapping_shl(1)) ^ y,
            if x < y { x.wrapping_mul(3) } else { y - 1 },
        ];
        // floor semantics, independently: floor(x / y) as f64.
        assert_eq!(want[0] as f64, (x as f64 / y as f64).floor(), "{x} // {y}");
        for (j, w) in want.iter().enumerate() {
            assert_eq!(got[j][k], *w, "op {j} on ({x}, {y})");
        }
    }
}

#[test]
fn casts_and_math() {
    let n = Var::int32("n");
    let f32t = DataType::float(32);
    let a = buf("A", f32t, &n);
    let h = buf("H", DataType::float(16), &n);
    let bh = buf("BF", DataType::bfloat16(), &n);
    let names = [
        "f16rt", "bf16rt", "i8", "u8f", "f64", "bool", "exp", "log", "sqrt", "tanh", "erf", "pow",
        "floor", "round", "sigmoid", "ite", "fabs", "h_exp",
    ];
    let outs: Vec<Buffer> = names.iter().map(|s| buf(s, f32t, &n)).collect();
    let i = Var::int32("i");
    let x = a.load(vec![i.to_expr()]);
    let absx = op::fabs(&x);
    let f16 = DataType::float(16);
    let vals = vec![
        x.cast(f16).cast(f32t),
        x.cast(DataType::bfloat16()).cast(f32t),
        (&x * 20.0).cast(DataType::int(8)).cast(f32t),
        (&absx * 50.0).cast(DataType::uint(8)).cast(f32t),
        (x.cast(DataType::float(64)) * PrimExpr::f64(1.5)).cast(f32t),
        x.gt(0.25).cast(f32t),
        op::exp(&x),
        op::log(&absx + 0.5),
        op::sqrt(&absx),
        op::tanh(&x),
        op::erf(&x),
        op::pow(&absx + 0.1, 1.7),
        op::floor(&x * 3.0),
        op::round(&x * 3.0),
        op::sigmoid(&x),
        op::if_then_else(x.lt(0.0), -&x, &x * 2.0),
        absx.clone(),
        op::exp(x.cast(f16)).cast(f32t),
    ];
    let mut stores: Vec<Stmt> = outs
        .iter()
        .zip(vals)
        .map(|(o, v)| o.store(v, vec![i.to_expr()]))
        .collect();
    stores.push(h.store(x.cast(f16), vec![i.to_expr()]));
    stores.push(bh.store(x.cast(DataType::bfloat16()), vec![i.to_expr()]));
    let body = Stmt::for_loop(&i, 0, &n, ForKind::Serial, Stmt::seq(stores));
    let mut params = vec![Param::Tensor(a), Param::Tensor(h), Param::Tensor(bh)];
    params.extend(outs.into_iter().map(Param::Tensor));
    let f = packed_func("casts", &params, body);
    let m = kiln_codegen::build(&module(vec![f]), &native()).unwrap();
    let mut xs = rand_f32(200, 9, -2.5, 2.5);
    xs.extend([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -1.5, 1.0 / 3.0]);
    let len = xs.len();
    let ht = tensor(&vec![f16::NAN; len]);
    let bt = tensor(&vec![bf16::NAN; len]);
    let outs: Vec<_> = names.iter().map(|_| nan_f32(len)).collect();
    let mut args: Vec<kiln_ffi::Any> =
        vec![tensor(&xs).into(), ht.clone().into(), bt.clone().into()];
    args.extend(outs.iter().map(|t| t.clone().into()));
    m.function("casts").unwrap().call_any(&args).unwrap();
    let got = |k: usize| outs[k].to_vec::<f32>().unwrap();
    let map = |f: &dyn Fn(f32) -> f32| xs.iter().map(|v| f(*v)).collect::<Vec<f32>>();
    assert_eq!(
        got(0),
        map(&|v| f16::from_f32(v).to_f32()),
        "f16 round trip"
    );
    assert_eq!(
        got(1),
        map(&|v| bf16::from_f32(v).to_f32()),
        "bf16 round trip"
    );
    assert_eq!(got(2), map(&|v| ((v * 20.0) as i8) as f32), "int8");
    assert_eq!(got(3), map(&|v| ((v.abs() * 50.0) as u8) as f32), "uint8");
    assert_eq!(got(4), map(&|v| (v as f64 * 1.5) as f32), "float64");
    assert_eq!(got(5), map(&|v| (v > 0.25) as i32 as f32), "bool");
    assert_close(&got(6), &map(&f32::exp), 1e-6, "exp");
    assert_close(&got(7), &map(&|v| (v.abs() + 0.5).ln()), 1e-6, "log");
    assert_close(&got(8), &map(&|v| v.abs().sqrt()), 1e-6, "sqrt");
    assert_close(&got(9), &map(&f32::tanh), 1e-6, "tanh");
    assert_close(&got(10), &map(&|v| erf64(v as f64) as f32), 1e-6, "erf");
    assert_close(&got(11), &map(&|v| (v.abs() + 0.1).powf(1.7)), 1e-6, "pow");
    assert_eq!(got(12), map(&|v| (v * 3.0).floor()), "floor");
    assert_eq!(
        got(13),
        map(&|v| (v * 3.0).round_ties_even()),
        "round (ties to even)"
    );
    assert_close(
        &got(14),
        &map(&|v| 1.0 / (1.0 + (-v).exp())),
        1e-6,
        "sigmoid",
    );
    assert_eq!(
        got(15),
        map(&|v| if v < 0.0 { -v } else { v * 2.0 }),
        "if_then_else"
    );
    assert_eq!(got(16), map(&f32::abs), "fabs");
    assert_close(
        &got(17),
        &map(&|v| f16::from_f32(f16::from_f32(v).to_f32().exp()).to_f32()),
        2e-3,
        "exp of float16",
    );
    assert_eq!(
        ht.to_vec::<f16>().unwrap(),
        xs.iter().map(|v| f16::from_f32(*v)).collect::<Vec<_>>()
    );
    assert_eq!(
        bt.to_vec::<bf16>().unwrap(),
        xs.iter().map(|v| bf16::from_f32(*v)).collect::<Vec<_>>()
    );
}

/// erf by its Maclaurin series (|x| <= 3 here).
fn erf64(x: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = x; // (-1)^n x^(2n+1) / n!
    for n in 0..200 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn fast_math_only_when_asked() {
    let n = Var::int32("n");
    let f32t = DataType::float(32);
    let (a, c) = (buf("A", f32t, &n), buf("C", f32t, &n));
    let i = Var::int32("i");
    let body = Stmt::for_loop(
        &i,
        0,
        &n,
        ForKind::Serial,
        c.store(a.load(vec![i.to_expr()]) * 2.0 + 1.0, vec![i.to_expr()]),
    );
    let f = packed_func("fm", &[Param::Tensor(a), Param::Tensor(c)], body);
    let md = module(vec![f]);
    let plain = kiln_codegen::build_compiled(&md, &native()).unwrap();
    assert!(!plain.ir.contains("fmul fast"), "{}", plain.ir);
    let t: kiln_codegen::Target = "llvm -mcpu=native -fast-math".parse().unwrap();
    let fast = kiln_codegen::build_compiled(&md, &t).unwrap();
    assert!(fast.ir.contains("fast"), "{}", fast.ir);
}
