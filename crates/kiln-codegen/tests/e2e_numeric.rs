//! End to end through the real pipeline: TE schedules lowered by `driver::lower` (StorageFlatten
//! ... MakePackedAPI, LowerTVMBuiltin), compiled by LLVM for the host CPU, loaded in this
//! process and called with runtime tensors; results against naive Rust loops on fresh random
//! inputs (the seed is printed; `KILN_TEST_SEED` replays it), outputs poisoned with NaN first.
//! Every kernel runs for both `llvm -mcpu=native` and `c` (C source compiled by `cc`).

mod e2e_common;

use e2e_common::*;
use kiln_codegen::driver;

#[test]
fn elementwise_with_broadcasting() {
    let seed = seed("elementwise");
    let m = 37;
    let (a, b, cc, s) = broadcast(m);
    for (target, rows) in targets_by([1i64, 6, 33]) {
        let module =
            driver::build(&s, &[a.clone(), b.clone(), cc.clone()], target, "bcast").unwrap();
        let f = module.function("bcast").unwrap();
        let av = random((rows * m) as usize, seed + rows as u64);
        let bv = random(m as usize, seed + 100);
        let out = poisoned(&[rows, m]);
        f.invoke::<()>((tensor(&av, &[rows, m]), tensor(&bv, &[m]), out.clone()))
            .unwrap();
        let want: Vec<f32> = (0..(rows * m) as usize)
            .map(|k| av[k] * bv[k % m as usize] + 1.0)
            .collect();
        assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-6, target, seed);
    }
}

/// Builds `s` for every target and checks the product on fresh inputs.
fn check_matmul(s: &kiln_te::Schedule, args: &[kiln_te::Tensor], dims: (i64, i64, i64), seed: u64) {
    for target in TARGETS {
        let module = driver::build(s, args, target, "mm").unwrap();
        check_matmul_module(&module, dims, seed, target);
    }
}

#[test]
fn matmul_naive() {
    let seed = seed("matmul_naive");
    let (n, m, l) = (17, 23, 19);
    let (a, b, cc, _) = matmul(n, m, l);
    let s = kiln_te::create_schedule(&[cc.op().clone()]);
    check_matmul(&s, &[a, b, cc], (n, m, l), seed);
}

#[test]
fn matmul_tiled_vectorized_parallel() {
    let seed = seed("matmul_tiled");
    // Ragged edges in every dimension.
    let (n, m, l) = (67, 45, 29);
    let (a, b, cc, k) = matmul(n, m, l);
    let s = schedule_tiled(&cc, &k, 8, 16, 4);
    check_matmul(&s, &[a, b, cc], (n, m, l), seed);
}

#[test]
fn matmul_cache_write_compute_at() {
    let seed = seed("matmul_cache_write");
    let (n, m, l) = (32, 48, 20);
    let (a, b, cc, k) = matmul(n, m, l);
    let s = schedule_cache_write(&cc, &k);
    check_matmul(&s, &[a, b, cc], (n, m, l), seed);
}

#[test]
fn tiled_matmul_is_parallel_and_vectorized_in_llvm() {
    let (a, b, cc, k) = matmul(64, 64, 64);
    let s = schedule_tiled(&cc, &k, 8, 16, 4);
    let module = driver::build(&s, &[a, b, cc], NATIVE, "mm").unwrap();
    let ll = module.inspect_source("ll").unwrap();
    assert!(ll.contains("__tvm_parallel_lambda"), "{ll}");
    assert!(ll.contains("<16 x float>"), "{ll}");
}

#[test]
fn sum_reduction_split_and_reordered() {
    let seed = seed("reduction");
    let (n, m) = (13i64, 50i64);
    let a = kiln_te::placeholder(&[c(n), c(m)], f32t(), "A");
    let k = kiln_te::reduce_axis_n(m, "k");
    let b = kiln_te::compute(
        &[c(n)],
        |i| kiln_te::sum(a.at(&[i[0].to_expr(), k.expr()]), std::slice::from_ref(&k)),
        "B",
    );
    let s = kiln_te::create_schedule(&[b.op().clone()]);
    let (ko, ki) = s.stage(&b).split(&k, 8).unwrap();
    s.stage(&b).reorder(&[ki, ko]).unwrap();
    s.stage(&b).parallel(&b.axis(0)).unwrap();
    for target in TARGETS {
        let module = driver::build(&s, &[a.clone(), b.clone()], target, "rowsum").unwrap();
        let av = random((n * m) as usize, seed);
        let out = poisoned(&[n]);
        module
            .function("rowsum")
            .unwrap()
            .invoke::<()>((tensor(&av, &[n, m]), out.clone()))
            .unwrap();
        let want: Vec<f32> = (0..n as usize)
            .map(|i| av[i * m as usize..(i + 1) * m as usize].iter().sum())
            .collect();
        assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5, target, seed);
    }
}

#[test]
fn conv2d_with_padding() {
    let seed = seed("conv2d");
    let (ci, h, w, co, kh, kw, pad) = (3i64, 10i64, 9i64, 4i64, 3i64, 3i64, 1i64);
    let (data, weight, conv, s) = conv2d(ci, h, w, co, kh, kw, pad);
    for target in TARGETS {
        let module = driver::build(
            &s,
            &[data.clone(), weight.clone(), conv.clone()],
            target,
            "conv",
        )
        .unwrap();
        check_conv2d_module(&module, (ci, h, w, co, kh, kw, pad), seed, target);
    }
}

#[test]
fn softmax_rows() {
    let seed = seed("softmax");
    let (n, m) = (9i64, 37i64);
    let (x, y, s) = softmax(n, m);
    for target in TARGETS {
        let module = driver::build(&s, &[x.clone(), y.clone()], target, "softmax").unwrap();
        let xv: Vec<f32> = random((n * m) as usize, seed)
            .iter()
            .map(|v| v * 8.0)
            .collect();
        let out = poisoned(&[n, m]);
        module
            .function("softmax")
            .unwrap()
            .invoke::<()>((tensor(&xv, &[n, m]), out.clone()))
            .unwrap();
        let want = softmax_ref(&xv, n as usize, m as usize);
        assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5, target, seed);
    }
}
