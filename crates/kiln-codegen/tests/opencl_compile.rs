//! The generated OpenCL C compiles and computes the right numbers: each program is built with
//! the system's OpenCL driver (`libOpenCL.so.1`, loaded at run time; `clBuildProgram` on the
//! first device of the first platform), and the kernels of the vector add, row sum and both
//! matmuls are launched by hand (the launch convention: local size = the `threadIdx` extents,
//! global size = `blockIdx` extents x local size) and checked against a reference. Skipped,
//! with the reason printed, where no OpenCL platform is present.

mod device_common;

use device_common::ocl::{assert_close, buf, data, Arg, Cl};
use device_common::{matmul, matmul_shared, matmul_shared_local, rowsum, vadd};
use kiln_codegen::driver;
use kiln_te::{compute, create_schedule, placeholder, thread_axis, Schedule, Tensor};
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
    let cl = match Cl::open() {
        Ok(cl) => cl,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    // Vector add over n = 1000: 16 groups of 64, the last one partly guarded off.
    let (s, args) = vadd();
    let n = 1000;
    let (a, b) = (data(n, 1), data(n, 2));
    let mut kargs = [
        Arg::Buf(a.clone()),
        Arg::Buf(b.clone()),
        Arg::Buf(vec![f32::NAN; n]),
        Arg::Int(n as i32),
    ];
    let src = source(&s, &args, "vadd");
    cl.run(&src, "vadd_kernel0", &mut kargs, [16, 1, 1], [64, 1, 1])
        .unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_close(buf(&kargs[2]), &want, "vadd C");

    // Row sums of a [96, 128] matrix: 3 groups of 32 work-items.
    let (s, args) = rowsum();
    let rows = 96;
    let a = data(rows * 128, 3);
    let mut kargs = [
        Arg::Buf(a.clone()),
        Arg::Buf(vec![f32::NAN; rows]),
        Arg::Int(rows as i32),
    ];
    let src = source(&s, &args, "rowsum");
    cl.run(&src, "rowsum_kernel0", &mut kargs, [3, 1, 1], [32, 1, 1])
        .unwrap();
    let want: Vec<f32> = (0..rows)
        .map(|r| a[r * 128..(r + 1) * 128].iter().sum())
        .collect();
    assert_close(buf(&kargs[1]), &want, "rowsum R");

    // Both 64 x 64 matmuls: 8 x 8 groups of 8 x 8 work-items.
    let (a, b) = (data(64 * 64, 4), data(64 * 64, 5));
    let want = matmul_ref(&a, &b, 64);
    let variants = [
        ("naive", matmul()),
        ("shared", matmul_shared(64)),
        ("shared_local", matmul_shared_local(64)),
    ];
    for (name, (s, args)) in variants {
        let src = source(&s, &args, name);
        if std::env::var_os("KILN_PRINT_OPENCL").is_some() {
            println!("{src}");
        }
        let mut kargs = [
            Arg::Buf(a.clone()),
            Arg::Buf(b.clone()),
            Arg::Buf(vec![f32::NAN; 64 * 64]),
        ];
        cl.run(
            &src,
            &format!("{name}_kernel0"),
            &mut kargs,
            [8, 8, 1],
            [8, 8, 1],
        )
        .unwrap_or_else(|e| panic!("{name}: {e}\n{src}"));
        assert_close(buf(&kargs[2]), &want, name);
    }
}

fn source(s: &Schedule, args: &[Tensor], name: &str) -> String {
    let m = driver::build(s, args, "opencl", name).unwrap();
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
    let cl = match Cl::open() {
        Ok(cl) => cl,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    // The check is not vacuous: a broken program fails to build.
    assert!(cl
        .build("__kernel void f(int n) { undeclared_variable = n; }")
        .is_err());
    let programs = [
        ("vadd", vadd()),
        ("rowsum", rowsum()),
        ("matmul", matmul()),
        ("matmul_shared", matmul_shared(64)),
        ("mixed", mixed()),
    ];
    for (name, (s, args)) in programs {
        let src = source(&s, &args, name);
        if std::env::var_os("KILN_PRINT_OPENCL").is_some() {
            println!("{src}");
        }
        if let Err(log) = cl.build(&src) {
            panic!("{name}: the generated OpenCL C does not build:\n{log}\n--- source ---\n{src}");
        }
    }
}
