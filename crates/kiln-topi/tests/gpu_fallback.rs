//! The general GPU schedule (`kiln_topi::schedule::gpu::schedule_outputs` /
//! `schedule_fallback`) built for `opencl`: the kernels it makes (one per stage left at root,
//! epilogues computing their reduction in a private block of channels), and, where an OpenCL
//! device is present, their results on fresh random inputs with poisoned outputs against naive
//! loops. Without an OpenCL device the running parts print why and are skipped.

mod nn_common;

use kiln_codegen::driver;
use kiln_ffi::device::device_type::OPENCL;
use kiln_ffi::{Any, Device};
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor as RtTensor;
use kiln_te::{create_schedule, Tensor};
use kiln_testing::shape::numel;
use kiln_topi::nn::{self, Conv2dAttrs, Padding2d};
use kiln_topi::schedule::gpu;
use nn_common::{assert_close, input, random, seed, shape_of};

fn cl0() -> Option<Device> {
    let dev = Device::new(OPENCL, 0);
    if kiln_runtime::device::device_exists(dev) {
        Some(dev)
    } else {
        eprintln!("skipped running: no OpenCL device (scripts/setup.sh installs PoCL)");
        None
    }
}

/// Schedules `outs` with [`gpu::schedule_outputs`] and builds them for `opencl` as `name`.
fn build(inputs: &[Tensor], outs: &[Tensor], threads: i64, name: &str) -> Module {
    let ops: Vec<_> = outs.iter().map(|t| t.op().clone()).collect();
    let s = create_schedule(&ops);
    gpu::schedule_outputs(&s, outs, threads).unwrap();
    let mut args = inputs.to_vec();
    args.extend(outs.iter().cloned());
    driver::build(&s, &args, "opencl", name).unwrap()
}

/// The kernel names and source of a built module.
fn kernels(m: &Module) -> (Vec<String>, String) {
    let dev = &m.imports()[0];
    let mut names = dev.function_names();
    names.sort();
    (names, dev.inspect_source("cl").unwrap())
}

/// Runs `m`'s function `name` on the device with `data` for the inputs and NaN-poisoned
/// outputs; the outputs.
fn run(
    m: &Module,
    name: &str,
    dev: Device,
    inputs: &[(Vec<f32>, Vec<i64>)],
    outs: &[Vec<i64>],
) -> Vec<Vec<f32>> {
    let on_dev = |d: &[f32], s: &[i64]| {
        let t = RtTensor::empty(s, kiln_ffi::DataType::float(32), dev).unwrap();
        t.copy_from_slice(d).unwrap();
        t
    };
    let mut vals: Vec<Any> = inputs.iter().map(|(d, s)| on_dev(d, s).into()).collect();
    let out_ts: Vec<RtTensor> = outs
        .iter()
        .map(|s| on_dev(&kiln_testing::nan_vec(numel(s)), s))
        .collect();
    vals.extend(out_ts.iter().map(|t| Any::from(t.clone())));
    m.function(name).unwrap().call_any(&vals).unwrap();
    out_ts
        .iter()
        .map(|t| {
            t.to_device(Device::cpu(0))
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        })
        .collect()
}

/// `relu(conv2d(x, w) + b)` (NCHW, OIHW, square stride and padding) scheduled for opencl: one
/// kernel whose threads hold `accumulators` private values; on the device it matches loops.
fn check_conv_bias_relu(ds: [i64; 4], ws: [i64; 4], stride: i64, pad: i64, accumulators: usize) {
    let ([_, c, h, wd], [o, _, k, _]) = (ds, ws);
    let x = input(&ds, "x");
    let w = input(&ws, "w");
    let b = input(&[o, 1, 1], "b");
    let a = Conv2dAttrs {
        strides: (stride, stride),
        padding: Padding2d::same(pad),
        ..Conv2dAttrs::default()
    };
    let conv = nn::conv2d(&x, &w, &a).unwrap();
    let out = kiln_topi::elemwise::relu(&kiln_topi::broadcast::add(&conv, &b).unwrap()).unwrap();
    let m = build(
        &[x.clone(), w.clone(), b.clone()],
        std::slice::from_ref(&out),
        64,
        "cbr",
    );
    let (names, src) = kernels(&m);
    assert_eq!(names, ["cbr_kernel0"], "{src}");
    assert!(
        src.contains(&format!("float conv2d[{accumulators}];")),
        "{src}"
    );
    let Some(dev) = cl0() else { return };
    let s = seed("conv2d+bias+relu on opencl");
    let xd = random(numel(&ds), s);
    let wdata = random(numel(&ws), s + 1);
    let bd = random(o as usize, s + 2);
    let oshape = shape_of(&out);
    let got = run(
        &m,
        "cbr",
        dev,
        &[
            (xd.clone(), ds.to_vec()),
            (wdata.clone(), ws.to_vec()),
            (bd.clone(), vec![o, 1, 1]),
        ],
        std::slice::from_ref(&oshape),
    );
    let (oh, ow) = (oshape[2], oshape[3]);
    let mut want = Vec::new();
    for f in 0..o {
        for y in 0..oh {
            for xx in 0..ow {
                let mut acc = bd[f as usize];
                for ch in 0..c {
                    for ky in 0..k {
                        for kx in 0..k {
                            let (iy, ix) = (y * stride - pad + ky, xx * stride - pad + kx);
                            if (0..h).contains(&iy) && (0..wd).contains(&ix) {
                                acc += xd[((ch * h + iy) * wd + ix) as usize]
                                    * wdata[(((f * c + ch) * k + ky) * k + kx) as usize];
                            }
                        }
                    }
                }
                want.push(acc.max(0.0));
            }
        }
    }
    assert_close(&got[0], &want, 1e-4, "conv2d+bias+relu", s);
}

#[test]
fn conv2d_bias_relu_is_one_kernel_with_a_channel_block() {
    // 12 channels, 5 columns: blocks of 4 channels, one column.
    check_conv_bias_relu([1, 5, 9, 9], [12, 5, 3, 3], 2, 1, 4);
    // 16 channels, 8 columns: blocks of 8 channels by 4 columns.
    check_conv_bias_relu([1, 3, 6, 8], [16, 3, 3, 3], 1, 1, 32);
    // 1x1, 7 channels: no block.
    check_conv_bias_relu([1, 4, 5, 5], [7, 4, 1, 1], 1, 0, 1);
}

#[test]
fn dense_odd_units_softmax_and_two_outputs() {
    // 7 units: no channel block divides, one unit per thread.
    let x = input(&[3, 20], "x");
    let w = input(&[7, 20], "w");
    let d = nn::dense(&x, &w, None).unwrap();
    let t = kiln_topi::elemwise::tanh(&d).unwrap();
    let sm = nn::softmax(&x, 1).unwrap();
    let m = build(&[x.clone(), w.clone()], &[t.clone(), sm.clone()], 32, "two");
    let (names, src) = kernels(&m);
    assert!(
        names.len() >= 3,
        "dense and softmax's reductions: {names:?}\n{src}"
    );
    assert!(!src.contains("float dense[2]"), "{src}");
    let Some(dev) = cl0() else { return };
    let s = seed("dense and softmax on opencl");
    let (xd, wd) = (random(60, s), random(140, s + 1));
    let got = run(
        &m,
        "two",
        dev,
        &[(xd.clone(), vec![3, 20]), (wd.clone(), vec![7, 20])],
        &[vec![3, 7], vec![3, 20]],
    );
    let mut want_t = Vec::new();
    let mut want_sm = Vec::new();
    for row in xd.chunks(20) {
        for u in 0..7 {
            let v: f32 = row
                .iter()
                .zip(&wd[u * 20..(u + 1) * 20])
                .map(|(a, b)| a * b)
                .sum();
            want_t.push(v.tanh());
        }
        let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = row.iter().map(|v| (v - mx).exp()).collect();
        let sum: f32 = e.iter().sum();
        want_sm.extend(e.iter().map(|v| v / sum));
    }
    assert_close(&got[0], &want_t, 1e-5, "tanh(dense)", s);
    assert_close(&got[1], &want_sm, 1e-5, "softmax", s);
}

#[test]
fn the_simple_cases_keep_their_schedules_and_bad_input_is_named() {
    // Injective only: one kernel of `num_threads` threads, as schedule_injective makes.
    let x = input(&[4, 100], "x");
    let y = kiln_topi::elemwise::exp(&x).unwrap();
    let (_, src) = kernels(&build(
        std::slice::from_ref(&x),
        std::slice::from_ref(&y),
        64,
        "e",
    ));
    assert!(src.contains("* 64) + ((int)get_local_id(0))"), "{src}");
    // An extern operation has no device schedule.
    let m = input(&[2, 3, 3], "m");
    let det = kiln_topi::linalg::det(&m).unwrap();
    let s = create_schedule(&[det.op().clone()]);
    let e = gpu::schedule_outputs(&s, std::slice::from_ref(&det), 64)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("extern operation") && e.contains("no device schedule"),
        "{e}"
    );
    // Threads must be positive.
    let s = create_schedule(&[y.op().clone()]);
    let e = gpu::schedule_fallback(&s, std::slice::from_ref(&y), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("num_threads must be positive"), "{e}");
}
