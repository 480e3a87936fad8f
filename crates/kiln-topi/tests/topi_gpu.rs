//! GPU schedules of `kiln_topi::schedule::gpu` built for `opencl`: the kernels bind the fused
//! output loop to blocks of threads, and (where an OpenCL device is present) compute the right
//! numbers when run through Kiln's runtime, against loops on fresh random inputs.

#[path = "../../kiln-codegen/tests/device_common/run.rs"]
mod run;

use kiln_codegen::driver;
use kiln_te::{create_schedule, placeholder, Tensor};
use kiln_testing::assert_close;
use kiln_testing::rng::{random, seed};
use kiln_tir::{DataType, PrimExpr};
use kiln_topi::schedule::gpu;
use run::run_opencl;

fn shape(dims: &[i64]) -> Vec<PrimExpr> {
    dims.iter().map(|&d| PrimExpr::i32(d)).collect()
}

/// `relu(x + bias)` over `[4, 33, 65]` with a `[65]` bias, scheduled with 256 threads.
fn bias_relu() -> (kiln_te::Schedule, Vec<Tensor>) {
    let f32t = DataType::float(32);
    let x = placeholder(&shape(&[4, 33, 65]), f32t, "x");
    let b = placeholder(&shape(&[65]), f32t, "bias");
    let zero = placeholder(&shape(&[1]), f32t, "zero");
    let y = kiln_topi::broadcast::add(&x, &b).unwrap();
    let out = kiln_topi::broadcast::maximum(&y, &zero).unwrap();
    let s = create_schedule(&[out.op().clone()]);
    gpu::schedule_injective(&s, &out, gpu::DEFAULT_NUM_THREADS).unwrap();
    (s, vec![x, b, zero, out])
}

fn opencl(s: &kiln_te::Schedule, args: &[Tensor], name: &str) -> String {
    let m = driver::build(s, args, "opencl", name).unwrap();
    m.imports()[0].inspect_source("cl").unwrap()
}

#[test]
fn injective_schedule_binds_the_fused_loop() {
    let (s, args) = bias_relu();
    let src = opencl(&s, &args, "bias_relu");
    assert!(src.contains("__kernel void bias_relu_kernel0("), "{src}");
    assert!(
        src.contains(
            "if ((kiln_floordiv_i32(((((int)get_group_id(0)) * 256) + ((int)get_local_id(0))), \
             2145) < 4))"
        ),
        "the last block is guarded:\n{src}"
    );
    assert!(src.contains("fmax("), "{src}");
    let sd = seed("topi_gpu_bias_relu");
    let n = 4 * 33 * 65;
    let (x, b) = (random(n, sd), random(65, sd + 1));
    let inputs: [(&[f32], &[i64]); 3] = [(&x, &[4, 33, 65]), (&b, &[65]), (&[0.0], &[1])];
    let Some(got) = run_opencl(&s, &args, "bias_relu", &inputs, &[4, 33, 65]) else {
        return;
    };
    let want: Vec<f32> = (0..n).map(|i| (x[i] + b[i % 65]).max(0.0)).collect();
    assert_close(&got, &want, 0.0, "bias_relu", sd);
}

#[test]
fn reduce_schedule_one_thread_per_output() {
    let x = placeholder(&shape(&[37, 50]), DataType::float(32), "x");
    let out = kiln_topi::reduce::sum(&x, Some(&[1]), false).unwrap();
    let s = create_schedule(&[out.op().clone()]);
    gpu::schedule_reduce(&s, &out, 32).unwrap();
    let src = opencl(&s, &[x.clone(), out.clone()], "rsum");
    assert!(src.contains("for (int "), "a serial reduction loop:\n{src}");
    let sd = seed("topi_gpu_rsum");
    let xv = random(37 * 50, sd);
    if let Some(got) = run_opencl(
        &s,
        &[x.clone(), out.clone()],
        "rsum",
        &[(&xv, &[37, 50])],
        &[37],
    ) {
        let want: Vec<f32> = (0..37)
            .map(|r| xv[r * 50..(r + 1) * 50].iter().sum())
            .collect();
        assert_close(&got, &want, 1e-5, "rsum", sd);
    }
    // Not a reduction.
    let y = kiln_topi::broadcast::add(&x, &x).unwrap();
    let s = create_schedule(&[y.op().clone()]);
    let e = gpu::schedule_reduce(&s, &y, 32).unwrap_err().to_string();
    assert!(e.contains("is not a reduction"), "{e}");
}
