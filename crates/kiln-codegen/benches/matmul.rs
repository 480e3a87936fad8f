//! float32 matmul `C[M, N] = A[M, K] x B[K, N]` with Kiln's best CPU schedule (TVM's x86
//! `dense_pack` ideas): B packed into `[N/bn][K][bn]`, a register block of `mr` rows x `bn`
//! columns accumulated in a `local` cache (`cache_write` + `compute_at`), the k loop split with
//! its inner part unrolled, the row block and the vectors of the block unrolled, the lanes
//! vectorized; tile sizes from the host's CPU description (8 x 32 on AVX-512, 6 x 16 on AVX2).
//!
//! ```sh
//! KILN_NUM_THREADS=1 cargo bench -p kiln-codegen --bench matmul -- [--n 1024] [--dump DIR]
//! ```
//! prints the compile time and the median GFLOP/s of the built kernel (warm-up, median of
//! `--reps` runs). With `--dump DIR` it writes `A.f32`, `B.f32`, `C.f32` (raw little-endian)
//! for `bench/matmul/run.sh`'s comparison against numpy.

#[path = "schedules/matmul.rs"]
mod schedules;

use kiln_codegen::driver;
use kiln_testing::random;
use schedules::{matmul_packed_ab, matmul_prepacked, matmul_schedule_ab, MatmulConfig};
use std::time::Instant;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|p| args.get(p + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |n: &str, d: i64| arg(&args, n).map(|v| v.parse().unwrap()).unwrap_or(d);
    let n = get("--n", 1024);
    let reps = get("--reps", 10) as usize;
    let d = MatmulConfig::host();
    let cfg = MatmulConfig {
        mr: get("--mr", d.mr),
        bn: get("--bn", d.bn),
        lanes: d.lanes,
        ku: get("--ku", d.ku),
        mc: get("--mc", d.mc),
        pack_a: get("--pack-a", d.pack_a as i64) != 0,
    };
    let (m, nn, k) = (n, n, n);
    if args.iter().any(|a| a == "--prepacked") {
        prepacked(m, nn, k, cfg, reps);
        return;
    }
    let mut compile_ms = Vec::new();
    let mut module = None;
    let mut phases = [0f64; 3];
    for _ in 0..3 {
        let (a, b, cc, packed, ap) =
            matmul_packed_ab(m, nn, k, cfg.bn, cfg.pack_a.then_some(cfg.mr));
        let t0 = Instant::now();
        let s = matmul_schedule_ab(&cc, &packed, ap.as_ref(), cfg);
        let lowered = driver::lower(&s, &[a, b, cc], "matmul", false).unwrap();
        let t1 = Instant::now();
        let built = driver::codegen_build(&lowered, "llvm -mcpu=native").unwrap();
        let t2 = Instant::now();
        let f = built.function("matmul").unwrap(); // links and loads the shared library
        let t3 = Instant::now();
        compile_ms.push((t3 - t0).as_secs_f64() * 1e3);
        phases = [t1 - t0, t2 - t1, t3 - t2].map(|d| d.as_secs_f64() * 1e3);
        module = Some((built, f));
    }
    eprintln!(
        "compile phases (last build): schedule+lower {:.1} ms, LLVM codegen+O3 {:.1} ms, link+load {:.1} ms",
        phases[0], phases[1], phases[2]
    );
    let (built, f) = module.unwrap();
    if let Some(dir) = arg(&args, "--asm") {
        std::fs::write(
            format!("{dir}/matmul.s"),
            built.inspect_source("asm").unwrap(),
        )
        .unwrap();
        std::fs::write(
            format!("{dir}/matmul.ll"),
            built.inspect_source("ll").unwrap(),
        )
        .unwrap();
        let (a, b, cc, packed, ap) =
            matmul_packed_ab(m, nn, k, cfg.bn, cfg.pack_a.then_some(cfg.mr));
        let sch = matmul_schedule_ab(&cc, &packed, ap.as_ref(), cfg);
        let lowered = driver::lower(&sch, &[a, b, cc], "matmul", true);
        match lowered {
            Ok(l) => std::fs::write(format!("{dir}/matmul.tir"), l.to_string()).unwrap(),
            Err(e) => eprintln!("lower: {e}"),
        }
    }
    use kiln_runtime::tensor::Tensor as T;
    let av = random((m * k) as usize, 1);
    let bv = random((k * nn) as usize, 2);
    let ta = T::from_slice(&av, &[m, k]).unwrap();
    let tb = T::from_slice(&bv, &[k, nn]).unwrap();
    let tc = T::from_slice(&vec![f32::NAN; (m * nn) as usize], &[m, nn]).unwrap();
    let call = || {
        f.invoke::<()>((ta.clone(), tb.clone(), tc.clone()))
            .unwrap()
    };
    call();
    call();
    let mut times = Vec::new();
    for _ in 0..reps.max(5) {
        let t = Instant::now();
        call();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = times[times.len() / 2];
    let gflops = 2.0 * (m * nn * k) as f64 / med / 1e9;
    compile_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "kiln matmul {m}x{nn}x{k} cfg {cfg:?}: median {:.3} ms, {:.1} GFLOP/s (best {:.1}); compile cold {:.1} ms, warm median {:.1} ms",
        med * 1e3,
        gflops,
        2.0 * (m * nn * k) as f64 / times[0] / 1e9,
        compile_ms[compile_ms.len() - 1],
        compile_ms[compile_ms.len() / 2]
    );
    println!(
        "KILN_GFLOPS={gflops:.2} KILN_COMPILE_MS={:.2}",
        compile_ms[compile_ms.len() / 2]
    );
    if let Some(dir) = arg(&args, "--dump") {
        let raw = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        std::fs::write(format!("{dir}/A.f32"), raw(&av)).unwrap();
        std::fs::write(format!("{dir}/B.f32"), raw(&bv)).unwrap();
        std::fs::write(format!("{dir}/C.f32"), raw(&tc.to_vec::<f32>().unwrap())).unwrap();
    }
}

/// `--prepacked`: the kernel alone, B passed already packed (timing only; no packing stage).
fn prepacked(m: i64, n: i64, k: i64, cfg: MatmulConfig, reps: usize) {
    use kiln_runtime::tensor::Tensor as T;
    let (a, bp, cc) = matmul_prepacked(m, n, k, cfg.bn);
    let s = matmul_schedule_ab(&cc, &bp, None, cfg);
    let built = driver::build(&s, &[a, bp, cc], "llvm -mcpu=native", "matmul").unwrap();
    let f = built.function("matmul").unwrap();
    let nb = (n + cfg.bn - 1) / cfg.bn;
    let ta = T::from_slice(&random((m * k) as usize, 1), &[m, k]).unwrap();
    let tb = T::from_slice(&random((nb * k * cfg.bn) as usize, 2), &[nb, k, cfg.bn]).unwrap();
    let tc = T::from_slice(&vec![0f32; (m * n) as usize], &[m, n]).unwrap();
    let call = || {
        f.invoke::<()>((ta.clone(), tb.clone(), tc.clone()))
            .unwrap()
    };
    call();
    call();
    let mut times: Vec<f64> = (0..reps.max(5))
        .map(|_| {
            let t = Instant::now();
            call();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let fl = 2.0 * (m * n * k) as f64;
    println!(
        "kiln matmul {m}x{n}x{k} B prepacked cfg {cfg:?}: median {:.3} ms, {:.1} GFLOP/s (best {:.1})",
        times[times.len() / 2] * 1e3,
        fl / times[times.len() / 2] / 1e9,
        fl / times[0] / 1e9
    );
}
