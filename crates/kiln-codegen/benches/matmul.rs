//! float32 matmul `C[M, N] = A[M, K] x B[K, N]` with Kiln's best CPU schedule (TVM's x86
//! `dense_pack` ideas): B packed into `[N/bn][K][bn]`, a register block of `mr` rows x `bn`
//! columns accumulated in a `local` cache (`cache_write` + `compute_at`), the k loop split with
//! its inner part unrolled, the row block and the 16-lane vectors of the block unrolled, the
//! 16 lanes vectorized.
//!
//! ```sh
//! KILN_NUM_THREADS=1 cargo bench -p kiln-codegen --bench matmul -- [--n 1024] [--dump DIR]
//! ```
//! prints the compile time and the median GFLOP/s of the built kernel (warm-up, median of
//! `--reps` runs). With `--dump DIR` it writes `A.f32`, `B.f32`, `C.f32` (raw little-endian)
//! for `bench/matmul/run.sh`'s comparison against numpy.

use kiln_codegen::driver;
use kiln_te::*;
use kiln_tir::{floordiv, floormod, DataType, PrimExpr};
use std::time::Instant;

/// Parameters of [`matmul_schedule`].
#[derive(Clone, Copy, Debug)]
pub struct MatmulConfig {
    /// Rows of the register block.
    pub mr: i64,
    /// Columns of the register block (a multiple of 16: `bn / 16` zmm vectors per row).
    pub bn: i64,
    /// Unroll factor of the k loop inside the register block.
    pub ku: i64,
    /// Rows of the cache block (a multiple of `mr`; 0: no outer row blocking).
    pub mc: i64,
}

impl Default for MatmulConfig {
    fn default() -> Self {
        MatmulConfig {
            mr: 8,
            bn: 32,
            ku: 4,
            mc: 0,
        }
    }
}

/// The matmul compute with B packed: `(A, B, C)` placeholders/output and the packing stage.
pub fn matmul_packed(m: i64, n: i64, k: i64, bn: i64) -> (Tensor, Tensor, Tensor, Tensor) {
    let f32t = DataType::float(32);
    let c = PrimExpr::i32;
    let a = placeholder(&[c(m), c(k)], f32t, "A");
    let b = placeholder(&[c(k), c(n)], f32t, "B");
    let nb = (n + bn - 1) / bn;
    let packed = compute(
        &[c(nb), c(k), c(bn)],
        |i| {
            let col = i[0].to_expr() * bn + i[2].to_expr();
            if n % bn == 0 {
                b.at(&[i[1].to_expr(), col])
            } else {
                if_then_else(col.clone().lt(n), b.at(&[i[1].to_expr(), col]), 0.0)
            }
        },
        "B.packed",
    );
    let kk = reduce_axis_n(k, "k");
    let cc = compute(
        &[c(m), c(n)],
        |i| {
            let j = i[1].to_expr();
            sum(
                a.at(&[i[0].to_expr(), kk.expr()])
                    * packed.at(&[floordiv(&j, bn), kk.expr(), floormod(&j, bn)]),
                std::slice::from_ref(&kk),
            )
        },
        "C",
    );
    (a, b, cc, packed)
}

/// The schedule: pack B (vectorized copy), C tiled by `mr x bn`, a local accumulator block
/// computed at the tile, inner k unrolled by `ku`, rows and vectors of the block unrolled.
pub fn matmul_schedule(cc: &Tensor, packed: &Tensor, cfg: MatmulConfig) -> Schedule {
    let s = create_schedule(&[cc.op().clone()]);
    // Packing: [N/bn][K][bn], the bn lanes vectorized.
    let ps = s.stage(packed);
    let pax = packed
        .op()
        .as_compute()
        .map(|_| ())
        .map(|_| ps.leaf_iter_vars())
        .unwrap();
    let (_pio, pii) = ps.split(&pax[2], 16).unwrap();
    ps.vectorize(&pii).unwrap();

    let local = s.cache_write(cc, "local").unwrap();
    let st = s.stage(cc);
    let (io, jo, ii, ji) = st.tile(&cc.axis(0), &cc.axis(1), cfg.mr, cfg.bn).unwrap();
    let attach = if cfg.mc > 0 {
        let (ioo, ioi) = st.split(&io, cfg.mc / cfg.mr).unwrap();
        st.reorder(&[ioo, jo.clone(), ioi.clone()]).unwrap();
        ioi
    } else {
        jo
    };
    let (jio, jii) = st.split(&ji, 16).unwrap();
    st.unroll(&ii).unwrap();
    st.unroll(&jio).unwrap();
    st.vectorize(&jii).unwrap();

    let ls = s.stage(&local);
    ls.compute_at(&st, &attach).unwrap();
    let lax = ls.leaf_iter_vars();
    let (li, lj, lk) = (lax[0].clone(), lax[1].clone(), lax[2].clone());
    let (ljo, lji) = ls.split(&lj, 16).unwrap();
    let (ko, ki) = ls.split(&lk, cfg.ku).unwrap();
    ls.reorder(&[ko, ki.clone(), li.clone(), ljo.clone(), lji.clone()])
        .unwrap();
    ls.unroll(&ki).unwrap();
    ls.unroll(&li).unwrap();
    ls.unroll(&ljo).unwrap();
    ls.vectorize(&lji).unwrap();
    s
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|p| args.get(p + 1).cloned())
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32) / ((1u64 << 23) as f32) - 1.0
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |n: &str, d: i64| arg(&args, n).map(|v| v.parse().unwrap()).unwrap_or(d);
    let n = get("--n", 1024);
    let reps = get("--reps", 10) as usize;
    let d = MatmulConfig::default();
    let cfg = MatmulConfig {
        mr: get("--mr", d.mr),
        bn: get("--bn", d.bn),
        ku: get("--ku", d.ku),
        mc: get("--mc", d.mc),
    };
    let (m, nn, k) = (n, n, n);
    let mut compile_ms = Vec::new();
    let mut module = None;
    for _ in 0..3 {
        let (a, b, cc, packed) = matmul_packed(m, nn, k, cfg.bn);
        let t0 = Instant::now();
        let s = matmul_schedule(&cc, &packed, cfg);
        let built = driver::build(&s, &[a, b, cc], "llvm -mcpu=native", "matmul").unwrap();
        let f = built.function("matmul").unwrap();
        compile_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        module = Some((built, f));
    }
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
        let (a, b, cc, packed) = matmul_packed(m, nn, k, cfg.bn);
        let sch = matmul_schedule(&cc, &packed, cfg);
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
