//! Kernels through the `c` target (issue 4's acceptance list), built with `build_c` directly:
//! matmul under three schedules (naive; tiled + vectorized + parallel with ragged edges;
//! cache_write + compute_at), a 2-D convolution with inlined padding (`if_then_else`), and
//! softmax (max and sum reductions, `exp`, compute_at, parallel rows), against naive Rust loops,
//! outputs poisoned with NaN. The kernels and references are the end-to-end tests' own.

mod e2e_common;

use e2e_common::*;
use kiln_codegen::{build_c, Target};
use kiln_runtime::module::Module;
use kiln_te::*;
use kiln_tir::transform::lower_pipeline;
use kiln_tir::IRModule;

fn build(s: &Schedule, args: &[Tensor], name: &str) -> Module {
    let f = lower(s, args, name).unwrap();
    let m = lower_pipeline()
        .apply(IRModule::from_func(name, f))
        .unwrap();
    build_c(&m, &Target::parse("c").unwrap()).unwrap_or_else(|e| panic!("{e}\n{m}"))
}

/// Builds and runs the matmul scheduled by `s`; returns the C source.
fn check_matmul(
    (a, b, cc): (&Tensor, &Tensor, &Tensor),
    s: &Schedule,
    (n, m, l): (i64, i64, i64),
    seed: u64,
) -> String {
    let module = build(s, &[a.clone(), b.clone(), cc.clone()], "mm");
    check_matmul_module(&module, (n, m, l), seed, "mm");
    module.inspect_source("c").unwrap()
}

#[test]
fn matmul_naive() {
    let dims = (6, 5, 7);
    let (a, b, cc, _k) = matmul(dims.0, dims.1, dims.2);
    let s = create_schedule(&[cc.op().clone()]);
    check_matmul((&a, &b, &cc), &s, dims, seed("c_matmul_naive"));
}

#[test]
fn matmul_tiled_vectorized_parallel_with_ragged_edges() {
    let dims = (19, 21, 13);
    let (a, b, cc, k) = matmul(dims.0, dims.1, dims.2);
    let s = create_schedule(&[cc.op().clone()]);
    let st = s.stage(&cc);
    let (xo, yo, xi, yi) = st.tile(&cc.axis(0), &cc.axis(1), 8, 8).unwrap();
    let (ko, ki) = st.split(&k, 4).unwrap();
    st.reorder(&[xo.clone(), yo.clone(), ko, xi, ki, yi.clone()])
        .unwrap();
    let fused = st.fuse(&xo, &yo).unwrap();
    st.parallel(&fused).unwrap();
    st.vectorize(&yi).unwrap();
    let src = check_matmul((&a, &b, &cc), &s, dims, seed("c_matmul_tiled"));
    assert!(src.contains("__TVMBackendParallelLaunch"), "{src}");
}

#[test]
fn matmul_cache_write_compute_at() {
    let dims = (16, 24, 10);
    let (a, b, cc, k) = matmul(dims.0, dims.1, dims.2);
    let s = schedule_cache_write(&cc, &k);
    let src = check_matmul((&a, &b, &cc), &s, dims, seed("c_matmul_cache_write"));
    assert!(src.contains("__attribute__((aligned(64)))"), "{src}");
}

#[test]
fn conv2d_with_inlined_padding() {
    let dims = (2i64, 6i64, 5i64, 3i64, 3i64, 3i64, 1i64);
    let (ci, h, w, co, kh, kw, pad) = dims;
    let (data, weight, conv, s) = conv2d(ci, h, w, co, kh, kw, pad);
    let module = build(&s, &[data, weight, conv], "conv");
    check_conv2d_module(&module, dims, seed("c_conv2d"), "conv");
}

#[test]
fn softmax_in_four_stages() {
    let (n, m) = (4i64, 11i64);
    let (x, y, s) = softmax(n, m);
    let module = build(&s, &[x, y], "softmax");
    let seed = seed("c_softmax");
    let xv = random((n * m) as usize, seed);
    let want = softmax_ref(&xv, n as usize, m as usize);
    let out = poisoned(&[n, m]);
    module
        .function("softmax")
        .unwrap()
        .invoke::<()>((tensor(&xv, &[n, m]), out.clone()))
        .unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5, "softmax", seed);
}

#[test]
fn both_back_ends_record_the_cpu_their_code_needs() {
    let (a, b, c, s) = broadcast(16);
    let f = lower(&s, &[a.clone(), b.clone(), c.clone()], "bcast").unwrap();
    let m = lower_pipeline()
        .apply(IRModule::from_func("bcast", f))
        .unwrap();
    let dir = std::env::temp_dir().join(format!("kiln_c_records_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lacks_amx = !kiln_runtime::cpu::host_features().contains("amx-tile");
    for (backend, target) in [
        ("c", "c -mcpu=x86-64-v2"),
        ("llvm", "llvm -mcpu=x86-64-v2"),
        ("c", "c -mcpu=sapphirerapids"),
        ("llvm", "llvm -mcpu=sapphirerapids"),
    ] {
        let t = Target::parse(target).unwrap();
        let module = if backend == "c" {
            build_c(&m, &t).unwrap()
        } else {
            kiln_codegen::build(&m, &t).unwrap()
        };
        let so = dir.join(format!("{}.so", target.replace([' ', '='], "_")));
        kiln_runtime::module::export_library(&module, &so, &Default::default()).unwrap();
        let bytes = kiln_runtime::module::elf::section_of_file(&so, ".kiln_target")
            .unwrap()
            .unwrap_or_else(|| panic!("{target}: no target record"));
        let records = kiln_runtime::module::target_record::parse_section(&bytes).unwrap();
        assert_eq!(records.len(), 1, "{target}: {records:?}");
        let cpu = t.cpu_name();
        assert_eq!(records[0].cpu, cpu, "{target}");
        assert!(
            records[0].features.iter().any(|f| f == "sse4.2"),
            "{target}"
        );
        let loaded = kiln_runtime::module::load_module(&so);
        if cpu == "sapphirerapids" {
            assert!(
                records[0].features.iter().any(|f| f == "amx-tile"),
                "{target}"
            );
            if lacks_amx {
                let e = loaded.map(|_| ()).expect_err("refused");
                assert!(
                    e.message().contains("amx-tile"),
                    "{target}: {}",
                    e.message()
                );
            }
        } else {
            let m = loaded.unwrap();
            let out = poisoned(&[16, 16]);
            let av = random(256, 1);
            let bv = random(16, 2);
            m.function("bcast")
                .unwrap()
                .invoke::<()>((tensor(&av, &[16, 16]), tensor(&bv, &[16]), out.clone()))
                .unwrap();
            let want: Vec<f32> = (0..256).map(|i| av[i] * bv[i % 16] + 1.0).collect();
            assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-6, target, 1);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
