//! Per-call time of a small TVM-compiled kernel from Rust, through Kiln's Rust API: Apache TVM's
//! `vadd` (C = A + B, float32, n = 1 and 1024) loaded with `load_module`, called with
//! `Function::call` on Kiln tensors (`ffi.Tensor` objects, type 70) and on `DLTensor*` values
//! (type 7, what `bench/kernel_call/kernel_call.c` passes). Warm-up, then the median of RUNS runs
//! of N calls; prints `rust <case> <ns>`.
//!
//! The library comes from `KILN_KERNEL_CALL_LIB` (`tests/tvm/build_libs.py`'s `vadd.so`); without
//! it the bench says so and exits. The code imports `TVMFFIErrorSetRaisedFromCStrParts` from the
//! global scope, so this binary must be linked with `-rdynamic`: `bench/kernel_call/run.sh` does.

use kiln_ffi::{Any, AnyView};
use kiln_runtime::module::load_module;
use kiln_runtime::tensor::Tensor;
use std::hint::black_box;

const N: usize = 1_000_000;
const RUNS: usize = 9;

/// Nanoseconds per call of `body` (warm-up, then the median of RUNS runs of N calls).
fn median_ns(body: impl FnMut()) -> f64 {
    kiln_testing::bench::median_ns(N, RUNS, N / 4, body)
}

/// Times `vadd` on n elements with the arguments as tensor objects and as `DLTensor*`.
fn bench_vadd(vadd: &kiln_ffi::Function, n: usize) {
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let shape = [n as i64];
    let ta = Tensor::from_slice(&a, &shape).unwrap();
    let tb = Tensor::from_slice(&b, &shape).unwrap();
    let tc = Tensor::from_slice(&vec![-1.0f32; n], &shape).unwrap();
    assert!([&ta, &tb, &tc].iter().all(|t| t.is_aligned(64)));

    let objects: Vec<Any> = [&ta, &tb, &tc].map(|t| Any::from((*t).clone())).into();
    let pointers: Vec<Any> = [&ta, &tb, &tc]
        .map(|t| Any::from(t.as_dltensor_ptr()))
        .into();
    for args in [&objects, &pointers] {
        tc.copy_from_slice(&vec![-1.0f32; n]).unwrap();
        let views: Vec<AnyView<'_>> = args.iter().map(Any::view).collect();
        vadd.call(&views).unwrap();
        let c = tc.to_vec::<f32>().unwrap();
        assert!((0..n).all(|i| c[i] == a[i] + b[i]), "vadd n={n} is wrong");
    }

    for (label, args) in [("tensor", &objects), ("dltensor", &pointers)] {
        let views: Vec<AnyView<'_>> = args.iter().map(Any::view).collect();
        let t = median_ns(|| {
            black_box(vadd.call(black_box(&views)).unwrap());
        });
        println!("rust {label}_{n} {t:.2}");
    }
}

fn main() {
    let Some(path) = std::env::var_os("KILN_KERNEL_CALL_LIB") else {
        eprintln!("kernel_call: KILN_KERNEL_CALL_LIB is not set; run bench/kernel_call/run.sh");
        return;
    };
    let module = load_module(&path).unwrap_or_else(|e| panic!("loading {path:?}: {e}"));
    let vadd = module.function("vadd").expect("vadd");
    bench_vadd(&vadd, 1);
    bench_vadd(&vadd, 1024);
}
