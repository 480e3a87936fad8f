//! The benchmark's matmul schedule (`benches/schedules/matmul.rs`: packed B, `local` register
//! block by `cache_write` + `compute_at`, unrolled and vectorized) computes correctly at small
//! sizes, including sizes that are not multiples of its blocks, and keeps its accumulators in
//! the host's widest vector registers (FMAs with no accumulator loads or stores in the k
//! loop).

mod e2e_common;
#[path = "../benches/schedules/matmul.rs"]
mod schedules;

use e2e_common::*;
use kiln_codegen::driver;
use schedules::{
    matmul_packed, matmul_packed_ab, matmul_schedule, matmul_schedule_ab, MatmulConfig,
};

fn check(dims: (i64, i64, i64), cfg: MatmulConfig, tag: &str) {
    let seed = seed(tag);
    let (m, n, k) = dims;
    let (a, b, cc, packed, ap) = matmul_packed_ab(m, n, k, cfg.bn, cfg.pack_a.then_some(cfg.mr));
    let s = matmul_schedule_ab(&cc, &packed, ap.as_ref(), cfg);
    let module = driver::build(&s, &[a, b, cc], NATIVE, "mm").unwrap();
    let f = module.function("mm").unwrap();
    let av = random((m * k) as usize, seed);
    let bv = random((k * n) as usize, seed + 1);
    let out = poisoned(&[m, n]);
    f.invoke::<()>((tensor(&av, &[m, k]), tensor(&bv, &[k, n]), out.clone()))
        .unwrap();
    let want = matmul_ref(&av, &bv, m as usize, n as usize, k as usize);
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-4, tag, seed);
}

#[test]
fn default_schedule_64() {
    check((64, 64, 64), MatmulConfig::host(), "mm64");
    check(
        (64, 64, 64),
        MatmulConfig {
            mr: 4,
            bn: 64,
            ku: 8,
            mc: 16,
            pack_a: false,
            ..MatmulConfig::host()
        },
        "mm64_4x64",
    );
    check(
        (64, 64, 64),
        MatmulConfig {
            mc: 32,
            pack_a: true,
            ..MatmulConfig::host()
        },
        "mm64_pack_a",
    );
}

#[test]
fn ragged_sizes() {
    // Rows, columns and k all ragged: guarded rows, zero-padded packed columns, guarded k.
    check((67, 45, 29), MatmulConfig::host(), "mm_ragged");
    check(
        (50, 70, 33),
        MatmulConfig {
            mr: 6,
            bn: 64,
            ku: 4,
            mc: 12,
            pack_a: false,
            ..MatmulConfig::host()
        },
        "mm_ragged_6x64",
    );
    check(
        (67, 45, 29),
        MatmulConfig {
            mc: 16,
            pack_a: true,
            ..MatmulConfig::host()
        },
        "mm_ragged_pack_a",
    );
}

#[test]
fn accumulators_stay_in_registers() {
    let cfg = MatmulConfig::host();
    // The register class of the host's widest vectors: zmm (512 bits), ymm (256), xmm.
    let reg = match cfg.lanes * 32 {
        512 => "zmm",
        256 => "ymm",
        _ => "xmm",
    };
    let (a, b, cc, packed) = matmul_packed(256, 256, 256, cfg.bn);
    let s = matmul_schedule(&cc, &packed, cfg);
    let module = driver::build(&s, &[a, b, cc], NATIVE, "mm").unwrap();
    let asm = module.inspect_source("asm").unwrap();
    // The k loop: the labelled block with the most FMAs, up to its backward branch.
    let kloop = asm
        .split("\n.LBB")
        .skip(1)
        .map(|b| {
            let label = b.split(':').next().unwrap_or("");
            let back = format!(".LBB{label}");
            let end = b
                .lines()
                .position(|l| l.trim_start().starts_with('j') && l.ends_with(&back))
                .unwrap_or(b.lines().count());
            b.lines().take(end + 1).collect::<Vec<_>>().join("\n")
        })
        .max_by_key(|b| b.matches("vfmadd231ps").count())
        .unwrap();
    let fmas: Vec<&str> = kloop
        .lines()
        .filter(|l| l.contains("vfmadd231ps"))
        .collect();
    let per_k = (cfg.mr * cfg.bn / cfg.lanes * cfg.ku) as usize;
    assert!(
        fmas.len() >= per_k,
        "{} FMAs in the k loop:\n{kloop}",
        fmas.len()
    );
    assert!(fmas.iter().all(|l| l.contains(reg)), "{kloop}");
    // No vector store in the loop (the accumulators are not spilled each k).
    assert!(
        !kloop.lines().any(|l| {
            l.contains(&format!("vmovaps\t%{reg}")) || l.contains(&format!("vmovups\t%{reg}"))
        }),
        "accumulator stores in the k loop:\n{kloop}"
    );
}
