//! The generated OpenCL C compiles and computes the right numbers: each program is built by
//! the OpenCL driver on the first device (through Kiln's runtime, whose build errors quote the
//! compiler's log), and the vector add, row sum and the three matmuls run through the runtime
//! against references on fresh random inputs with poisoned outputs. Skipped, with the reason
//! printed, where no OpenCL device is present.

mod device_common;

use device_common::run::{build_on_device, run_opencl};
use device_common::{matmul, matmul_shared, matmul_shared_local, rowsum, vadd};
use kiln_runtime::opencl::OpenClModule;
use kiln_te::{compute, create_schedule, placeholder, thread_axis, Schedule, Tensor};
use kiln_testing::assert_close;
use kiln_testing::rng::{random, seed};
use kiln_tir::{DataType, PrimExpr};

fn matmul_ref(a: &[f32], b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; n * n];
    for i in 0..n {
        for j in 0..n {
            c[i * n + j] = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
        }
    }
    c
}

#[test]
fn generated_kernels_compute_on_the_device() {
    let sd = seed("opencl_compile");
    // Vector add: n is symbolic; the static shapes here give n = 1000 (the last block guarded).
    let (s, args) = vadd();
    let (a, b) = (random(1000, sd), random(1000, sd + 1));
    let Some(got) = run_opencl(&s, &args, "vadd", &[(&a, &[1000]), (&b, &[1000])], &[1000]) else {
        return;
    };
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_close(&got, &want, 0.0, "vadd", sd);

    // Row sums of a [96, 128] matrix.
    let (s, args) = rowsum();
    let a = random(96 * 128, sd + 2);
    let got = run_opencl(&s, &args, "rowsum", &[(&a, &[96, 128])], &[96]).unwrap();
    let want: Vec<f32> = (0..96)
        .map(|r| a[r * 128..(r + 1) * 128].iter().sum())
        .collect();
    assert_close(&got, &want, 1e-5, "rowsum", sd);

    // The three 64 x 64 matmuls.
    let (a, b) = (random(64 * 64, sd + 3), random(64 * 64, sd + 4));
    let want = matmul_ref(&a, &b, 64);
    let variants = [
        ("naive", matmul()),
        ("shared", matmul_shared(64)),
        ("shared_local", matmul_shared_local(64)),
    ];
    for (name, (s, args)) in variants {
        let got = run_opencl(
            &s,
            &args,
            name,
            &[(&a, &[64, 64]), (&b, &[64, 64])],
            &[64, 64],
        )
        .unwrap();
        assert_close(&got, &want, 1e-4, name, sd);
    }
}

fn source(s: &Schedule, args: &[Tensor], name: &str) -> String {
    let m = kiln_codegen::driver::build(s, args, "opencl", name).unwrap();
    m.imports()[0].inspect_source("cl").unwrap()
}

/// Everything the generated code does besides plain indexing: floor division and modulo,
/// min/max of ints and floats, math builtins, casts, int64 and double values, selects.
fn mixed() -> (Schedule, Vec<Tensor>) {
    let n = PrimExpr::i32(300);
    let a = placeholder(std::slice::from_ref(&n), DataType::float(32), "A");
    let d = placeholder(std::slice::from_ref(&n), DataType::float(64), "D");
    let ix = placeholder(std::slice::from_ref(&n), DataType::int(64), "I");
    let b = compute(
        std::slice::from_ref(&n),
        |i| {
            let x = a.at_vars(i);
            let k = ix.at_vars(i);
            let q = kiln_tir::floordiv(k.clone(), PrimExpr::i64(7))
                + kiln_tir::floormod(k.clone(), PrimExpr::i64(-3))
                + kiln_tir::min(k, PrimExpr::i64(5));
            let f = kiln_tir::op::sqrt(kiln_tir::op::exp(x.clone()))
                + kiln_tir::max(x.clone(), PrimExpr::f32(0.5))
                + kiln_tir::floormod(x.clone(), PrimExpr::f32(2.0))
                + kiln_tir::op::sigmoid(x.clone())
                + kiln_tir::cast(DataType::float(32), d.at_vars(i) * 2.0)
                + kiln_tir::cast(DataType::float(32), q);
            kiln_tir::select(x.lt(PrimExpr::f32(0.0)), -f.clone(), f)
        },
        "B",
    );
    let s = create_schedule(&[b.op().clone()]);
    let (o, i) = s.stage(&b).split(&b.axis(0), 64).unwrap();
    s.stage(&b)
        .bind(&o, &thread_axis("blockIdx.x").unwrap())
        .unwrap();
    s.stage(&b)
        .bind(&i, &thread_axis("threadIdx.x").unwrap())
        .unwrap();
    (s, vec![a, d, ix, b])
}

#[test]
fn generated_opencl_builds_on_the_device() {
    let programs = [
        ("vadd", vadd()),
        ("rowsum", rowsum()),
        ("matmul", matmul()),
        ("matmul_shared", matmul_shared(64)),
        ("mixed", mixed()),
    ];
    for (name, (s, args)) in programs {
        let Some(built) = build_on_device(&s, &args, name) else {
            return;
        };
        if let Err(log) = built {
            let src = source(&s, &args, name);
            panic!("{name}: the generated OpenCL C does not build:\n{log}\n--- source ---\n{src}");
        }
    }
    // The check is not vacuous: a broken program fails to build, quoting the line.
    let broken = OpenClModule::create(
        "__kernel void f(int n) {\n  undeclared_variable = n;\n}\n".into(),
        Vec::new(),
    )
    .unwrap();
    let e = broken
        .downcast_node::<OpenClModule>()
        .unwrap()
        .build_program(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("source line 2"), "{e}");
}
