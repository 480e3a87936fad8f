//! Code follows the CPU description (`kiln_tir::CpuDesc`), never a constant: a small CNN with
//! a dense head compiled for a made-up CPU of 4 float32 lanes and 8 vector registers is packed,
//! vectorized and tiled for that CPU; one library built for two x86-64 levels runs the variant
//! the host can; the assembly for AVX2 and AVX-512 CPUs uses their registers without spilling
//! in the convolution and product kernels. Outputs are checked against naive loops on random
//! inputs, NaN-poisoned first.

mod common;
use common::random;

use kiln_codegen::target::Target;
use kiln_ffi::Device;
use kiln_graph::build::{
    build_for, build_targets, graph_codegen, layout_cpu, lower::lower_primitive, optimize_with,
};
use kiln_graph::ir::{AttrValue, Expr, Function, IRModule, Type, Var};
use kiln_graph::op::mk;
use kiln_graph::transform::PassContext;
use kiln_runtime::module::{export_library, load_module, ExportOptions, Module};
use kiln_runtime::tensor::Tensor;
use kiln_tir::visitor::{post_order_visit, IrRef};
use kiln_tir::{CpuDesc, DataTypeExt, PrimExpr, StmtKind};

// Links the registrations of kiln-graph.
const _: fn() -> *const () = kiln_graph::link_globals;

const C: usize = 8;
const H: usize = 12;
const O: usize = 32;
const UNITS: usize = 40;

/// The weights of the test network.
struct Weights {
    conv: Vec<f32>,
    pw: Vec<f32>,
    dense: Vec<f32>,
}

fn weights() -> Weights {
    Weights {
        conv: random(O * C * 9, 11),
        pw: random(O * O, 12),
        dense: random(UNITS * O, 13),
    }
}

/// data [1, C, H, H] -> conv 3x3 (pad 1) -> relu -> conv 1x1 -> global average pool ->
/// flatten -> dense (UNITS).
fn network(w: &Weights) -> IRModule {
    let ints = |v: &[i64]| AttrValue::Ints(v.to_vec());
    let x = Var::new("data", Type::f32(&[1, C as i64, H as i64, H as i64]));
    let conv = mk(
        "nn.conv2d",
        vec![
            x.expr(),
            Expr::const_f32(&w.conv, &[O as i64, C as i64, 3, 3]),
        ],
        &[("padding", ints(&[1, 1, 1, 1]))],
    );
    let r = mk("nn.relu", vec![conv], &[]);
    let pw = mk(
        "nn.conv2d",
        vec![r, Expr::const_f32(&w.pw, &[O as i64, O as i64, 1, 1])],
        &[],
    );
    let gap = mk("nn.global_avg_pool2d", vec![pw], &[]);
    let fl = mk("flatten", vec![gap], &[]);
    let d = mk(
        "nn.dense",
        vec![fl, Expr::const_f32(&w.dense, &[UNITS as i64, O as i64])],
        &[],
    );
    IRModule::from_main(Function::new(vec![x], d))
}

/// The network on `x`, in f64 loops.
fn reference(w: &Weights, x: &[f32]) -> Vec<f32> {
    let mut a = vec![0.0f64; O * H * H];
    for o in 0..O {
        for y in 0..H {
            for xx in 0..H {
                let mut acc = 0.0f64;
                for c in 0..C {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (iy, ix) = (y as i64 + ky - 1, xx as i64 + kx - 1);
                            if iy < 0 || ix < 0 || iy >= H as i64 || ix >= H as i64 {
                                continue;
                            }
                            acc += x[(c * H + iy as usize) * H + ix as usize] as f64
                                * w.conv[((o * C + c) * 3 + ky as usize) * 3 + kx as usize] as f64;
                        }
                    }
                }
                a[(o * H + y) * H + xx] = acc.max(0.0);
            }
        }
    }
    let mut pooled = vec![0.0f64; O];
    for (o, p) in pooled.iter_mut().enumerate() {
        for i in 0..O {
            let s: f64 = a[i * H * H..(i + 1) * H * H].iter().sum();
            *p += w.pw[o * O + i] as f64 * s;
        }
        *p /= (H * H) as f64;
    }
    (0..UNITS)
        .map(|u| {
            (0..O)
                .map(|o| w.dense[u * O + o] as f64 * pooled[o])
                .sum::<f64>() as f32
        })
        .collect()
}

/// Exports `factory`, loads it, runs it on random data with a poisoned output and checks it.
fn run_and_check(factory: &Module, w: &Weights, tag: &str) -> Module {
    let dir = std::env::temp_dir().join(format!("kiln_target_cpus_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("deploy.so");
    export_library(factory, &so, &ExportOptions::default()).unwrap();
    let loaded = load_module(&so).unwrap();
    let exec: Module = loaded
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap();
    let x = random(C * H * H, 21);
    let xt = Tensor::from_slice(&x, &[1, C as i64, H as i64, H as i64]).unwrap();
    exec.function("set_input")
        .unwrap()
        .invoke::<()>(("data", xt))
        .unwrap();
    let out = Tensor::from_slice(&[f32::NAN; UNITS], &[1, UNITS as i64]).unwrap();
    exec.function("set_output_zero_copy")
        .unwrap()
        .invoke::<()>((0i64, out.clone()))
        .unwrap();
    exec.function("run").unwrap().invoke::<()>(()).unwrap();
    let got = out.to_vec::<f32>().unwrap();
    let want = reference(w, &x);
    for (i, (g, r)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - r).abs() <= 1e-4 * r.abs().max(1.0),
            "{tag}: output {i}: got {g}, want {r}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    loaded
}

/// The widest vector (in lanes) of any expression of `f`'s body, and the largest float32
/// buffer allocated inside a loop (the kernels' accumulators), in elements.
fn widest_vector_and_accumulator(f: &kiln_tir::PrimFunc) -> (u16, i64) {
    let mut lanes = 1u16;
    let mut acc = 0i64;
    post_order_visit(f.body(), |n| match n {
        IrRef::Expr(e) => lanes = lanes.max(e.dtype().lanes()),
        IrRef::Stmt(s) => {
            if let StmtKind::For(l) = s.kind() {
                post_order_visit(&l.body, |m| {
                    if let IrRef::Stmt(t) = m {
                        if let StmtKind::Allocate(a) = t.kind() {
                            let n: i64 = a.extents.iter().filter_map(PrimExpr::as_int).product();
                            if a.dtype.is_floating() {
                                acc = acc.max(n);
                            }
                        }
                    }
                });
            }
        }
    });
    (lanes, acc)
}

#[test]
fn code_follows_a_made_up_cpu_of_4_lanes_and_8_registers() {
    let w = weights();
    let cpu = CpuDesc::custom(128, 8);
    let target = "llvm -mcpu=x86-64-v2";
    let ctx = PassContext::with_opt_level(3).with_cpu(cpu.clone());
    let (optimized, _) = optimize_with(&network(&w), Vec::new(), &ctx).unwrap();
    let text = optimized.to_string();
    // Weights packed in blocks of the CPU's 4 lanes.
    assert!(text.contains("OIHW4o"), "{text}");
    assert!(
        !text.contains("OIHW16o") && !text.contains("OIHW8o"),
        "{text}"
    );
    let cg = graph_codegen(&optimized).unwrap();
    let mut kernels = 0;
    for (name, f) in &cg.functions {
        let pf = lower_primitive(f, name, target, &cpu).unwrap();
        let (lanes, acc) = widest_vector_and_accumulator(&pf);
        // One vector of 4 (two for rows split over a pair) at most.
        assert!(
            lanes <= 8,
            "{name}: a vector of {lanes} lanes on a 4-lane CPU\n{pf}"
        );
        // The accumulators fit the 6 of 8 registers the description allows.
        assert!(
            acc <= cpu.accumulators() * 4,
            "{name}: {acc} accumulator elements on an 8-register CPU\n{pf}"
        );
        if name.contains("conv2d") || name.contains("dense") {
            kernels += 1;
            assert!(acc > 0, "{name}: no accumulator tile\n{pf}");
        }
    }
    let names: Vec<&String> = cg.functions.iter().map(|f| &f.0).collect();
    assert!(kernels >= 3, "{names:?}");
    let factory = build_for(&network(&w), target, &cpu, Vec::new(), &ctx).unwrap();
    run_and_check(&factory, &w, "made_up");
}

#[test]
fn avx512_and_avx2_descriptions_tile_differently() {
    let w = weights();
    let v3 = Target::parse("llvm -mcpu=x86-64-v3").unwrap().cpu_desc();
    let v4 = Target::parse("llvm -mcpu=x86-64-v4").unwrap().cpu_desc();
    assert_eq!((v3.f32_lanes(), v3.vector_registers), (8, 16));
    assert_eq!((v4.f32_lanes(), v4.vector_registers), (16, 32));
    for (cpu, block) in [(&v3, "OIHW8o"), (&v4, "OIHW16o")] {
        let ctx = PassContext::with_opt_level(3).with_cpu(cpu.clone());
        let (m, _) = optimize_with(&network(&w), Vec::new(), &ctx).unwrap();
        assert!(m.to_string().contains(block), "{block}: {m}");
    }
    // Two targets share the graph laid out for the wider one.
    let both = layout_cpu(&["llvm -mcpu=x86-64-v3", "llvm -mcpu=x86-64-v4"]).unwrap();
    assert_eq!(both.f32_lanes(), 16);
}

/// The assembly of the library's code as text (every variant).
fn assembly(factory: &Module) -> String {
    let lib = &factory.imports()[0];
    lib.inspect_source("asm").unwrap()
}

/// The assembly of each function (parallel closures included, which are named after their
/// function) whose name contains `conv2d` or `dense`, by name.
fn kernel_functions(asm: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in asm.lines() {
        let label = line
            .strip_suffix(':')
            .filter(|l| !l.starts_with(['.', ' ', '\t', '#']));
        if let Some(label) = label {
            out.push((label.to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out.into_iter()
        .filter(|(n, _)| n.contains("conv2d") || n.contains("dense"))
        .collect()
}

/// The innermost loops of a function's assembly that multiply-add (a label and the backward
/// branch to it with no other loop inside), and in each the instructions that move a vector
/// register to or from the stack: spilled accumulators, weights or inputs. `%rbp` addresses
/// the stack only in a function that makes it the frame pointer; elsewhere it is one more
/// general register (a pointer into the weights, say).
fn stack_traffic_in_inner_fma_loops(body: &str) -> Vec<Vec<String>> {
    let frame = body.contains("movq\t%rsp, %rbp");
    let lines: Vec<&str> = body.lines().collect();
    let mut labels = std::collections::HashMap::new();
    let mut loops: Vec<(usize, usize)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(label) = l.strip_suffix(':').filter(|l| l.starts_with(".LBB")) {
            labels.insert(label.to_string(), i);
        }
        let mut words = l.split_whitespace();
        if let (Some(op), Some(dest)) = (words.next(), words.next()) {
            if op.starts_with('j') {
                if let Some(&start) = labels.get(dest) {
                    loops.push((start, i));
                }
            }
        }
    }
    let inner = |&(a, b): &(usize, usize)| {
        !loops
            .iter()
            .any(|&(c, d)| (c, d) != (a, b) && a <= c && d <= b)
    };
    loops
        .iter()
        .filter(|l| inner(l))
        .map(|&(a, b)| &lines[a..=b])
        .filter(|body| body.iter().any(|l| l.contains("vfmadd")))
        .map(|body| {
            body.iter()
                .filter(|l| {
                    (l.contains("(%rsp)") || frame && l.contains("(%rbp)"))
                        && (l.contains("%xmm") || l.contains("%ymm") || l.contains("%zmm"))
                })
                .map(|l| l.trim().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn assembly_uses_each_cpus_registers_without_spills_in_kernels() {
    let w = weights();
    for (cpu, wide, narrow_only) in [
        ("haswell", "%ymm", true),
        ("znver3", "%ymm", true),
        ("skylake-avx512", "%zmm", false),
        ("znver5", "%zmm", false),
    ] {
        let target = format!("llvm -mcpu={cpu}");
        let ctx = PassContext::with_opt_level(3);
        let factory = build_targets(&network(&w), &[&target], Vec::new(), &ctx).unwrap();
        let asm = assembly(&factory);
        let kernels = kernel_functions(&asm);
        assert!(kernels.len() >= 3, "{cpu}: kernels {:?}", kernels.len());
        let mut inner_loops = 0;
        for (name, body) in &kernels {
            for traffic in stack_traffic_in_inner_fma_loops(body) {
                inner_loops += 1;
                assert!(
                    traffic.is_empty(),
                    "{cpu}: the inner loop of {name} moves vectors through the stack: \
                     {traffic:?}\n{body}"
                );
            }
        }
        assert!(
            inner_loops >= 2,
            "{cpu}: {inner_loops} multiply-add loops found"
        );
        assert!(asm.contains(wide), "{cpu}: no {wide} register in\n{asm}");
        if narrow_only {
            assert!(!asm.contains("%zmm"), "{cpu}: AVX-512 code for an AVX2 CPU");
        }
        // Run what this machine can run.
        let host = Target::host();
        let runs =
            Target::parse(&target).unwrap().features().iter().all(|f| {
                !kiln_runtime::cpu::DETECTABLE.contains(&f.as_str()) || host.has_feature(f)
            });
        if runs {
            run_and_check(&factory, &w, cpu);
        } else {
            eprintln!("{cpu}: not run (this machine lacks some of its features); assembly checked");
        }
    }
}

#[test]
fn one_library_for_two_levels_runs_the_best_variant() {
    let w = weights();
    let targets = ["llvm -mcpu=x86-64-v4", "llvm -mcpu=x86-64-v3"];
    let factory = build_targets(
        &network(&w),
        &targets,
        Vec::new(),
        &PassContext::with_opt_level(3),
    )
    .unwrap();
    let asm = assembly(&factory);
    assert!(
        asm.contains("code variant `default`: llvm -mcpu=x86-64-v3"),
        "{asm}"
    );
    assert!(asm.contains("code variant `x86_64_v4`: llvm -mcpu=x86-64-v4"));
    let loaded = run_and_check(&factory, &w, "two_levels");
    let records = kiln_runtime::module::library_target_records(&loaded);
    assert_eq!(records.len(), 2, "{records:?}");
    let chosen: Vec<_> = records.iter().filter(|r| r.1).collect();
    assert_eq!(chosen.len(), 1, "{records:?}");
    let expect = if Target::host().has_avx512() {
        "x86-64-v4"
    } else {
        "x86-64-v3"
    };
    assert_eq!(chosen[0].0.cpu, expect, "{records:?}");
}
