//! Elementwise, broadcast and cast operators of `kiln_topi` through `driver::build` on
//! `llvm -mcpu=native`, against naive Rust references (seeded inputs, poisoned outputs).

#[path = "topi_injective_common.rs"]
mod common;

use common::*;
use kiln_ffi::DataType;
use kiln_te::Tensor;
use kiln_topi::broadcast as bc;
use kiln_topi::elemwise as ew;
use kiln_topi::transform::{create_injective_schedule, schedule_injective};

/// A reference of a unary operator.
type UnaryRef = fn(f64) -> f64;
/// A reference of a binary operator.
type BinRef = fn(f64, f64) -> f64;

type UnaryOp = fn(&Tensor) -> kiln_ffi::Result<Tensor>;

fn erf_ref(x: f64) -> f64 {
    // Abramowitz-Stegun 7.1.26 is too coarse; integrate the series instead (|x| <= 4 here).
    let mut sum = 0.0;
    let mut term = x;
    let mut n = 0.0;
    while term.abs() > 1e-17 || n < 3.0 {
        sum += term / (2.0 * n + 1.0);
        n += 1.0;
        term *= -x * x / n;
        if n > 200.0 {
            break;
        }
    }
    2.0 / std::f64::consts::PI.sqrt() * sum
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn hsig(x: f64, a: f64, b: f64) -> f64 {
    (a * x + b).clamp(0.0, 1.0)
}

#[test]
fn unary_operators() {
    let seed = seed("unary");
    let mut rng = Rng::new(seed);
    let table: Vec<(&str, UnaryOp, UnaryRef, bool)> = vec![
        ("relu", ew::relu, |x| x.max(0.0), false),
        ("sigmoid", ew::sigmoid, sigmoid, false),
        ("tanh", ew::tanh, f64::tanh, false),
        ("erf", ew::erf, erf_ref, false),
        (
            "gelu",
            ew::gelu,
            |x| 0.5 * x * (1.0 + erf_ref(x / 2f64.sqrt())),
            false,
        ),
        ("silu", ew::silu, |x| x * sigmoid(x), false),
        (
            "hard_swish",
            ew::hard_swish,
            |x| x * hsig(x, 1.0 / 6.0, 0.5),
            false,
        ),
        ("exp", ew::exp, f64::exp, false),
        ("log", ew::log, f64::ln, true),
        ("sqrt", ew::sqrt, f64::sqrt, true),
        ("rsqrt", ew::rsqrt, |x| 1.0 / x.sqrt(), true),
        ("abs", ew::abs, f64::abs, false),
        ("neg", ew::neg, |x| -x, false),
        ("floor", ew::floor, f64::floor, false),
        ("ceil", ew::ceil, f64::ceil, false),
        ("round", ew::round, f64::round_ties_even, false),
        ("reciprocal", ew::reciprocal, |x| 1.0 / x, true),
    ];
    // 105 elements (no vector factor divides it) and 32 (vectorized by 16).
    for shape in [vec![3i64, 5, 7], vec![4, 8]] {
        let n = numel(&shape);
        for (name, op, reference, positive) in &table {
            let mut xv: Vec<f32> = rng.f32s(n).iter().map(|v| v * 4.0).collect();
            if *positive {
                xv.iter_mut().for_each(|v| *v = v.abs() + 0.05);
            }
            if *name == "round" {
                xv[0] = 2.5;
                xv[1] = -0.5;
                xv[2] = 1.5;
            }
            let x = ph(&shape, f32t(), "X");
            let y = op(&x).unwrap();
            let s = create_injective_schedule(std::slice::from_ref(&y), &cpu()).unwrap();
            let got = run_with(&s, &[x], &[y], vec![rt_f32(&xv, &shape)], name);
            let want: Vec<f64> = xv.iter().map(|&v| reference(v as f64)).collect();
            assert_close(&got[0], &want, 2e-5, name, seed);
        }
    }
}

#[test]
fn parameterized_unary_and_cast() {
    let seed = seed("param_unary");
    let mut rng = Rng::new(seed);
    let shape = [2i64, 3, 5];
    let xv: Vec<f32> = rng.f32s(30).iter().map(|v| v * 3.0).collect();
    let x = ph(&shape, f32t(), "X");
    let xs = || vec![rt_f32(&xv, &shape)];

    let y = ew::clip(&x, -0.5, 1.25).unwrap();
    let got = run_default(std::slice::from_ref(&x), &[y], xs(), "clip");
    let want: Vec<f64> = xv.iter().map(|&v| (v as f64).clamp(-0.5, 1.25)).collect();
    assert_close(&got[0], &want, 1e-6, "clip", seed);
    assert!(ew::clip(&x, 1.0, 0.0).is_err());

    let y = ew::hard_sigmoid(&x, 0.2, 0.5).unwrap();
    let got = run_default(std::slice::from_ref(&x), &[y], xs(), "hard_sigmoid");
    let want: Vec<f64> = xv.iter().map(|&v| hsig(v as f64, 0.2, 0.5)).collect();
    assert_close(&got[0], &want, 1e-6, "hard_sigmoid", seed);

    // Casts: to int32 truncates, to bool is != 0, back from int to float.
    let mut xv2 = xv.clone();
    xv2[0] = 0.0;
    let y = ew::cast(&x, DataType::int(32)).unwrap();
    let got = run_default(
        std::slice::from_ref(&x),
        std::slice::from_ref(&y),
        vec![rt_f32(&xv2, &shape)],
        "cast_i32",
    );
    let want: Vec<f64> = xv2.iter().map(|&v| v.trunc() as f64).collect();
    assert_close(&got[0], &want, 0.0, "cast_i32", seed);
    let yb = ew::cast(&x, DataType::bool()).unwrap();
    let got = run_default(
        std::slice::from_ref(&x),
        std::slice::from_ref(&yb),
        vec![rt_f32(&xv2, &shape)],
        "cast_bool",
    );
    let want: Vec<f64> = xv2.iter().map(|&v| (v != 0.0) as u8 as f64).collect();
    assert_close(&got[0], &want, 0.0, "cast_bool", seed);
    let nb = ew::logical_not(&yb).unwrap();
    let got = run_default(
        std::slice::from_ref(&x),
        &[nb],
        vec![rt_f32(&xv2, &shape)],
        "not",
    );
    let want: Vec<f64> = xv2.iter().map(|&v| (v == 0.0) as u8 as f64).collect();
    assert_close(&got[0], &want, 0.0, "not", seed);
    let i = ph(&shape, DataType::int(32), "I");
    let f = ew::cast(&i, f32t()).unwrap();
    let iv: Vec<i32> = rng.ints(30, -50, 50).iter().map(|&v| v as i32).collect();
    let got = run_default(
        std::slice::from_ref(&i),
        &[f],
        vec![kiln_runtime::tensor::Tensor::from_slice(&iv, &shape).unwrap()],
        "cast_f32",
    );
    let want: Vec<f64> = iv.iter().map(|&v| v as f64).collect();
    assert_close(&got[0], &want, 0.0, "cast_f32", seed);
    // Integer relu/abs/neg work; float-only operators refuse integers.
    assert!(ew::relu(&i).is_ok() && ew::abs(&i).is_ok());
    let e = ew::exp(&i).unwrap_err();
    assert!(e.message().contains("float"), "{e}");
}

type BinOp = fn(&Tensor, &Tensor) -> kiln_ffi::Result<Tensor>;

#[test]
fn binary_broadcasting() {
    let seed = seed("binary");
    let mut rng = Rng::new(seed);
    let arith: Vec<(&str, BinOp, BinRef)> = vec![
        ("add", bc::add, |a, b| a + b),
        ("subtract", bc::subtract, |a, b| a - b),
        ("multiply", bc::multiply, |a, b| a * b),
        ("divide", bc::divide, |a, b| a / b),
        ("power", bc::power, |a, b| a.powf(b)),
        ("maximum", bc::maximum, f64::max),
        ("minimum", bc::minimum, f64::min),
        ("equal", bc::equal, |a, b| (a == b) as u8 as f64),
        ("not_equal", bc::not_equal, |a, b| (a != b) as u8 as f64),
        ("less", bc::less, |a, b| (a < b) as u8 as f64),
        ("less_equal", bc::less_equal, |a, b| (a <= b) as u8 as f64),
        ("greater", bc::greater, |a, b| (a > b) as u8 as f64),
        ("greater_equal", bc::greater_equal, |a, b| {
            (a >= b) as u8 as f64
        }),
        ("logical_and", bc::logical_and, |a, b| {
            (a != 0.0 && b != 0.0) as u8 as f64
        }),
        ("logical_or", bc::logical_or, |a, b| {
            (a != 0.0 || b != 0.0) as u8 as f64
        }),
    ];
    // Rank-0 vs higher, rank-1 vs higher, size-1 axes on both sides, equal shapes.
    let cases: Vec<(Vec<i64>, Vec<i64>)> = vec![
        (vec![2, 3, 4], vec![]),
        (vec![], vec![3, 5]),
        (vec![4], vec![3, 1, 4]),
        (vec![3, 1, 5], vec![1, 4, 1]),
        (vec![2, 1], vec![2, 7]),
        (vec![3, 6], vec![3, 6]),
    ];
    for (sa, sb) in &cases {
        let out = {
            let n = sa.len().max(sb.len());
            (0..n)
                .map(|k| {
                    let da = (k + sa.len()).checked_sub(n).map_or(1, |i| sa[i]);
                    let db = (k + sb.len()).checked_sub(n).map_or(1, |i| sb[i]);
                    da.max(db)
                })
                .collect::<Vec<i64>>()
        };
        for (name, op, reference) in &arith {
            let mut av = rng.coarse(numel(sa));
            let mut bv = rng.coarse(numel(sb));
            if *name == "power" {
                av.iter_mut().for_each(|v| *v = v.abs() + 0.5);
            }
            if *name == "divide" {
                bv.iter_mut()
                    .for_each(|v| *v = if *v == 0.0 { 0.75 } else { *v });
            }
            let a = ph(sa, f32t(), "A");
            let b = ph(sb, f32t(), "B");
            let y = op(&a, &b).unwrap();
            assert_eq!(shape_of(&y), out, "{name} {sa:?} {sb:?}");
            let s = create_injective_schedule(std::slice::from_ref(&y), &cpu()).unwrap();
            let got = run_with(
                &s,
                &[a, b],
                &[y],
                vec![rt_f32(&av, sa), rt_f32(&bv, sb)],
                name,
            );
            let want: Vec<f64> = (0..numel(&out) as i64)
                .map(|l| {
                    let idx = unravel(l, &out);
                    let x = av[bcast_index(&idx, sa) as usize] as f64;
                    let z = bv[bcast_index(&idx, sb) as usize] as f64;
                    reference(x as f32 as f64, z as f32 as f64)
                })
                .collect();
            let what = format!("{name} {sa:?} {sb:?}");
            assert_close(&got[0], &want, 1e-5, &what, seed);
        }
    }
    // Clear errors: shapes that do not broadcast, mixed dtypes.
    let e = bc::add(&ph(&[2, 3], f32t(), "A"), &ph(&[4, 3], f32t(), "B")).unwrap_err();
    let msg = e.message().to_string();
    assert!(
        msg.contains("cannot broadcast") && msg.contains("[2, 3]") && msg.contains("[4, 3]"),
        "{msg}"
    );
    let e = bc::add(&ph(&[2], f32t(), "A"), &ph(&[2], DataType::int(32), "B")).unwrap_err();
    assert!(e.message().contains("dtype"), "{e}");
}

#[test]
fn integer_division_truncates() {
    let seed = seed("int_div");
    let a = ph(&[6], DataType::int(32), "A");
    let b = ph(&[1], DataType::int(32), "B");
    let y = bc::divide(&a, &b).unwrap();
    let av = [7i32, -7, 6, -6, 0, 5];
    let rt = |v: &[i32], s: &[i64]| kiln_runtime::tensor::Tensor::from_slice(v, s).unwrap();
    let got = run_default(&[a, b], &[y], vec![rt(&av, &[6]), rt(&[2], &[1])], "idiv");
    assert_close(
        &got[0],
        &[3.0, -3.0, 3.0, -3.0, 0.0, 2.0],
        0.0,
        "idiv",
        seed,
    );
}

#[test]
fn where_three_way_broadcast() {
    let seed = seed("where");
    let mut rng = Rng::new(seed);
    let (sc, sx, sy) = (vec![3i64, 1, 4], vec![5, 1], vec![] as Vec<i64>);
    let out = vec![3i64, 5, 4];
    let c = ph(&sc, DataType::bool(), "C");
    let x = ph(&sx, f32t(), "X");
    let y = ph(&sy, f32t(), "Y");
    let w = bc::where_(&c, &x, &y).unwrap();
    assert_eq!(shape_of(&w), out);
    let cv: Vec<bool> = rng.ints(12, 0, 2).iter().map(|&v| v == 1).collect();
    let xv = rng.f32s(5);
    let yv = rng.f32s(1);
    let s = create_injective_schedule(std::slice::from_ref(&w), &cpu()).unwrap();
    let got = run_with(
        &s,
        &[c, x, y],
        &[w],
        vec![
            kiln_runtime::tensor::Tensor::from_slice(&cv, &sc).unwrap(),
            rt_f32(&xv, &sx),
            rt_f32(&yv, &sy),
        ],
        "where",
    );
    let want: Vec<f64> = (0..60)
        .map(|l| {
            let idx = unravel(l, &out);
            if cv[bcast_index(&idx, &sc) as usize] {
                xv[bcast_index(&idx, &sx) as usize] as f64
            } else {
                yv[0] as f64
            }
        })
        .collect();
    assert_close(&got[0], &want, 0.0, "where", seed);
    assert!(bc::where_(
        &ph(&[2], DataType::bool(), "C"),
        &ph(&[3], f32t(), "X"),
        &ph(&[3], f32t(), "Y")
    )
    .is_err());
}

#[test]
fn broadcast_to_and_expand() {
    let seed = seed("expand");
    let mut rng = Rng::new(seed);
    let x = ph(&[3, 1], f32t(), "X");
    let xv = rng.f32s(3);
    let y = bc::broadcast_to(&x, &[2, 3, 4]).unwrap();
    let mut s = create_injective_schedule(std::slice::from_ref(&y), &cpu()).unwrap();
    let got = run_with(
        &s,
        std::slice::from_ref(&x),
        &[y],
        vec![rt_f32(&xv, &[3, 1])],
        "broadcast_to",
    );
    let want: Vec<f64> = (0..24).map(|l| xv[(l / 4 % 3) as usize] as f64).collect();
    assert_close(&got[0], &want, 0.0, "broadcast_to", seed);
    // ONNX Expand is bidirectional: a 1 in the target keeps the input's size.
    let y = bc::expand(&x, &[2, 1, 5]).unwrap();
    assert_eq!(shape_of(&y), vec![2, 3, 5]);
    s = create_injective_schedule(std::slice::from_ref(&y), &cpu()).unwrap();
    let got = run_with(
        &s,
        std::slice::from_ref(&x),
        &[y],
        vec![rt_f32(&xv, &[3, 1])],
        "expand",
    );
    let want: Vec<f64> = (0..30).map(|l| xv[(l / 5 % 3) as usize] as f64).collect();
    assert_close(&got[0], &want, 0.0, "expand", seed);
    assert!(bc::broadcast_to(&x, &[1, 3, 1]).is_ok());
    assert!(
        bc::broadcast_to(&x, &[2, 1, 4]).is_err(),
        "broadcast_to may not shrink"
    );
    assert!(bc::broadcast_to(&x, &[4, 4]).is_err());
}

#[test]
fn schedule_injective_shapes() {
    // The schedule works for rank 0, tiny, odd and vector-sized outputs.
    let seed = seed("sched");
    let mut rng = Rng::new(seed);
    for shape in [vec![], vec![1i64], vec![7], vec![2, 8, 3], vec![64]] {
        let x = ph(&shape, f32t(), "X");
        let y = ew::neg(&x).unwrap();
        let s = kiln_te::create_schedule(&[y.op().clone()]);
        schedule_injective(&s, &y, &cpu()).unwrap();
        let xv = rng.f32s(numel(&shape));
        let got = run_with(&s, &[x], &[y], vec![rt_f32(&xv, &shape)], "neg");
        let want: Vec<f64> = xv.iter().map(|&v| -v as f64).collect();
        assert_close(&got[0], &want, 0.0, &format!("neg {shape:?}"), seed);
    }
}

/// Regression test: the simplifier once folded `max(A[i], B[i])` to `A[i]` because structural
/// equality paired distinct free buffers.
#[test]
fn same_index_loads_of_two_tensors() {
    let seed = seed("same_index");
    let shape = [2i64, 5];
    for (name, op) in [("maximum", bc::maximum as BinOp), ("minimum", bc::minimum)] {
        let a = ph(&shape, f32t(), "A");
        let b = ph(&shape, f32t(), "B");
        let y = op(&a, &b).unwrap();
        let av: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let bv: Vec<f32> = (0..10).map(|i| 9.0 - i as f32).collect();
        let got = run_default(
            &[a, b],
            &[y],
            vec![rt_f32(&av, &shape), rt_f32(&bv, &shape)],
            name,
        );
        let want: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &z)| if name == "maximum" { x.max(z) } else { x.min(z) } as f64)
            .collect();
        assert_close(&got[0], &want, 0.0, name, seed);
    }
}
