//! More pipeline shapes end to end: a symbolic-size tiled matmul, `cache_read` into a local
//! buffer with a general reducer, a large intermediate stage (workspace memory), and integer
//! and float64 element types; same method as `e2e_numeric`.

mod e2e_common;

use e2e_common::*;
use kiln_codegen::driver;
use kiln_ffi::DataType;
use kiln_te::*;
use kiln_tir::Var;

#[test]
fn symbolic_tiled_matmul() {
    let seed = seed("symbolic_mm");
    let n = Var::size_var("n", DataType::int(32));
    let l = 24;
    let a = placeholder(&[n.to_expr(), c(l)], f32t(), "A");
    let b = placeholder(&[c(l), n.to_expr()], f32t(), "B");
    let k = reduce_axis_n(l, "k");
    let cc = compute(
        &[n.to_expr(), n.to_expr()],
        |i| {
            sum(
                a.at(&[i[0].to_expr(), k.expr()]) * b.at(&[k.expr(), i[1].to_expr()]),
                std::slice::from_ref(&k),
            )
        },
        "C",
    );
    let s = schedule_tiled(&cc, &k, 4, 8, 8);
    let module = driver::build(&s, &[a, b, cc], NATIVE, "mm").unwrap();
    let f = module.function("mm").unwrap();
    for n in [1i64, 7, 33] {
        let av = random((n * l) as usize, seed + n as u64);
        let bv = random((l * n) as usize, seed + 2 * n as u64);
        let out = poisoned(&[n, n]);
        f.invoke::<()>((tensor(&av, &[n, l]), tensor(&bv, &[l, n]), out.clone()))
            .unwrap();
        let want = matmul_ref(&av, &bv, n as usize, n as usize, l as usize);
        assert_close(
            &out.to_vec::<f32>().unwrap(),
            &want,
            1e-4,
            "symbolic mm",
            seed,
        );
    }
    // A mismatched shape is refused with TVM's message.
    let e = f
        .invoke::<()>((poisoned(&[3, l]), poisoned(&[l, 4]), poisoned(&[3, 3])))
        .unwrap_err();
    assert!(e.message().contains("expected to match"), "{e}");
}

#[test]
fn cache_read_local_with_general_reducer() {
    let seed = seed("cache_read");
    let (n, m) = (6i64, 40i64);
    let (a, b, s) = sum_of_squares_cache_read(n, m);
    let module = driver::build(&s, &[a, b], NATIVE, "sumsq").unwrap();
    let av = random((n * m) as usize, seed);
    let out = poisoned(&[n]);
    module
        .function("sumsq")
        .unwrap()
        .invoke::<()>((tensor(&av, &[n, m]), out.clone()))
        .unwrap();
    let want = kiln_testing::reference::row_sum_squares(&av, n as usize, m as usize);
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5, "sumsq", seed);
}

#[test]
fn large_intermediate_stage_in_workspace() {
    let seed = seed("workspace");
    let (n, m) = (300i64, 200i64);
    let a = placeholder(&[c(n), c(m)], f32t(), "A");
    let t = compute(&[c(n), c(m)], |i| a.at_vars(i) * 2.0, "T");
    let o = compute(
        &[c(n), c(m)],
        |i| t.at(&[c(n - 1) - i[0].to_expr(), i[1].to_expr()]) + 1.0,
        "O",
    );
    let s = create_schedule(&[o.op().clone()]);
    s.stage(&t).parallel(&t.axis(0)).unwrap();
    let lowered = driver::lower(&s, &[a, o], "flip", false).unwrap();
    assert!(
        lowered.to_string().contains("TVMBackendAllocWorkspace"),
        "{lowered}"
    );
    let module = driver::codegen_build(&lowered, NATIVE).unwrap();
    let av = random((n * m) as usize, seed);
    let out = poisoned(&[n, m]);
    module
        .function("flip")
        .unwrap()
        .invoke::<()>((tensor(&av, &[n, m]), out.clone()))
        .unwrap();
    let want: Vec<f32> = (0..(n * m) as usize)
        .map(|j| {
            let (r, col) = (j / m as usize, j % m as usize);
            av[(n as usize - 1 - r) * m as usize + col] * 2.0 + 1.0
        })
        .collect();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 0.0, "flip", seed);
}

#[test]
fn int32_and_float64_elementwise() {
    let seed = seed("dtypes");
    let n = 103i64;
    let i32t = DataType::int(32);
    let a = placeholder(&[c(n)], i32t, "A");
    let b = compute(&[c(n)], |i| a.at_vars(i) * 3 + 1, "B");
    let s = create_schedule(&[b.op().clone()]);
    let (_o, inner) = s.stage(&b).split(&b.axis(0), 8).unwrap();
    s.stage(&b).vectorize(&inner).unwrap();
    let module = driver::build(&s, &[a, b], NATIVE, "affine").unwrap();
    let av: Vec<i32> = random(n as usize, seed)
        .iter()
        .map(|v| (v * 1000.0) as i32)
        .collect();
    let out = kiln_runtime::tensor::Tensor::from_slice(&vec![-7i32; n as usize], &[n]).unwrap();
    module
        .function("affine")
        .unwrap()
        .invoke::<()>((
            kiln_runtime::tensor::Tensor::from_slice(&av, &[n]).unwrap(),
            out.clone(),
        ))
        .unwrap();
    let want: Vec<i32> = av.iter().map(|v| v * 3 + 1).collect();
    assert_eq!(out.to_vec::<i32>().unwrap(), want, "KILN_TEST_SEED={seed}");

    let f64t = DataType::float(64);
    let x = placeholder(&[c(n)], f64t, "X");
    let y = compute(
        &[c(n)],
        |i| kiln_tir::op::sqrt(x.at_vars(i) * x.at_vars(i) + 1.0),
        "Y",
    );
    let s = create_schedule(&[y.op().clone()]);
    let module = driver::build(&s, &[x, y], NATIVE, "hyp").unwrap();
    let xv: Vec<f64> = random(n as usize, seed + 1)
        .iter()
        .map(|v| *v as f64)
        .collect();
    let out = kiln_runtime::tensor::Tensor::from_slice(&vec![f64::NAN; n as usize], &[n]).unwrap();
    module
        .function("hyp")
        .unwrap()
        .invoke::<()>((
            kiln_runtime::tensor::Tensor::from_slice(&xv, &[n]).unwrap(),
            out.clone(),
        ))
        .unwrap();
    for (g, v) in out.to_vec::<f64>().unwrap().iter().zip(&xv) {
        assert!(
            (g - (v * v + 1.0).sqrt()).abs() < 1e-12,
            "KILN_TEST_SEED={seed}"
        );
    }
}
