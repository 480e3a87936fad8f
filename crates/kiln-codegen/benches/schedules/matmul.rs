//! Kiln's float32 matmul schedule for x86 CPUs (TVM's x86 `dense_pack` ideas), sized from the
//! CPU description ([`MatmulConfig::for_cpu`]), shared by `benches/matmul.rs` and
//! `tests/matmul_schedule.rs` (include it with `#[path = "../benches/schedules/matmul.rs"] mod`).
//!
//! `C[M, N] = A[M, K] x B[K, N]`: B packed into `[N/bn][K][bn]` (a compute stage, zero-padded
//! when `bn` does not divide N); C tiled by `mr x bn`; a `local` accumulator block
//! (`cache_write`) computed at the tile (`compute_at`), its k loop split by `ku` with the inner
//! part, the `mr` rows and the `bn / lanes` vectors unrolled and the lanes vectorized, so LLVM
//! keeps the `mr * bn / lanes` accumulators in vector registers; optional row blocking by `mc`
//! (the `mc x K` panel of A stays in L2 while the B panels stream past it).
#![allow(dead_code)]

use kiln_te::*;
use kiln_tir::{floordiv, floormod, DataType, PrimExpr};

/// Parameters of [`matmul_schedule`].
#[derive(Clone, Copy, Debug)]
pub struct MatmulConfig {
    /// Rows of the register block.
    pub mr: i64,
    /// Columns of the register block (a multiple of `lanes`: `bn / lanes` vectors per row).
    pub bn: i64,
    /// float32 lanes of one vector register of the CPU.
    pub lanes: i64,
    /// Unroll factor of the k loop inside the register block.
    pub ku: i64,
    /// Rows of the cache block (a multiple of `mr`; 0: no outer row blocking).
    pub mc: i64,
    /// Pack A's `mc` rows into `[mc/mr][K][mr]` at each row block (needs `mc > 0`).
    pub pack_a: bool,
}

impl MatmulConfig {
    /// The configuration for `cpu`: two vectors of columns, and as many rows (at most 8, the
    /// best measured on AVX-512) as keep `2 * mr` accumulators, the two B vectors and a
    /// broadcast row in the registers (8 x 32 on AVX-512, 6 x 16 on AVX2).
    pub fn for_cpu(cpu: &kiln_tir::CpuDesc) -> MatmulConfig {
        let lanes = cpu.f32_lanes();
        let regs = cpu.vector_registers as i64;
        let mr = (1..=8)
            .rev()
            .find(|&r| 2 * r <= cpu.accumulators() && 2 * r + 3 <= regs)
            .unwrap_or(1);
        MatmulConfig {
            mr,
            bn: 2 * lanes,
            lanes,
            ku: 4,
            mc: 64,
            pack_a: false,
        }
    }

    /// The configuration for the machine this runs on.
    pub fn host() -> MatmulConfig {
        MatmulConfig::for_cpu(&kiln_codegen::target::Target::host().cpu_desc())
    }
}

/// The matmul compute with B packed: `(A, B, C)` placeholders/output and the packing stage.
pub fn matmul_packed(m: i64, n: i64, k: i64, bn: i64) -> (Tensor, Tensor, Tensor, Tensor) {
    let (a, b, cc, packed, _) = matmul_packed_ab(m, n, k, bn, None);
    (a, b, cc, packed)
}

/// [`matmul_packed`], with A also packed into `[M/mr][K][mr]` when `mr` is given (the A
/// packing stage is returned last).
pub fn matmul_packed_ab(
    m: i64,
    n: i64,
    k: i64,
    bn: i64,
    mr: Option<i64>,
) -> (Tensor, Tensor, Tensor, Tensor, Option<Tensor>) {
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
    let apacked = mr.map(|mr| {
        compute(
            &[c((m + mr - 1) / mr), c(k), c(mr)],
            |i| {
                let row = i[0].to_expr() * mr + i[2].to_expr();
                if m % mr == 0 {
                    a.at(&[row, i[1].to_expr()])
                } else {
                    if_then_else(row.clone().lt(m), a.at(&[row, i[1].to_expr()]), 0.0)
                }
            },
            "A.packed",
        )
    });
    let kk = reduce_axis_n(k, "k");
    let cc = compute(
        &[c(m), c(n)],
        |i| {
            let j = i[1].to_expr();
            let ai = i[0].to_expr();
            let aval = match (&apacked, mr) {
                (Some(ap), Some(mr)) => ap.at(&[floordiv(&ai, mr), kk.expr(), floormod(&ai, mr)]),
                _ => a.at(&[ai, kk.expr()]),
            };
            sum(
                aval * packed.at(&[floordiv(&j, bn), kk.expr(), floormod(&j, bn)]),
                std::slice::from_ref(&kk),
            )
        },
        "C",
    );
    (a, b, cc, packed, apacked)
}

/// The matmul with B given already packed (`B.packed[N/bn][K][bn]` is the second argument, as
/// constant weights packed ahead of time would be): `(A, B.packed, C)`.
pub fn matmul_prepacked(m: i64, n: i64, k: i64, bn: i64) -> (Tensor, Tensor, Tensor) {
    let f32t = DataType::float(32);
    let c = PrimExpr::i32;
    let a = placeholder(&[c(m), c(k)], f32t, "A");
    let packed = placeholder(&[c((n + bn - 1) / bn), c(k), c(bn)], f32t, "B.packed");
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
    (a, packed, cc)
}

/// The schedule: pack B (vectorized copy), C tiled by `mr x bn`, a local accumulator block
/// computed at the tile, inner k unrolled by `ku`, rows and vectors of the block unrolled.
pub fn matmul_schedule(cc: &Tensor, packed: &Tensor, cfg: MatmulConfig) -> Schedule {
    matmul_schedule_ab(cc, packed, None, cfg)
}

/// [`matmul_schedule`] with the A packing stage of [`matmul_packed_ab`] (computed at each
/// `mc`-row block).
pub fn matmul_schedule_ab(
    cc: &Tensor,
    packed: &Tensor,
    apacked: Option<&Tensor>,
    cfg: MatmulConfig,
) -> Schedule {
    let s = create_schedule(&[cc.op().clone()]);
    // Packing: [N/bn][K][bn], the bn lanes vectorized.
    if packed.op().as_compute().is_some() {
        let ps = s.stage(packed);
        let pax = ps.leaf_iter_vars();
        let (_pio, pii) = ps.split(&pax[2], cfg.lanes).unwrap();
        ps.vectorize(&pii).unwrap();
    }

    let local = s.cache_write(cc, "local").unwrap();
    let st = s.stage(cc);
    let (io, jo, ii, ji) = st.tile(&cc.axis(0), &cc.axis(1), cfg.mr, cfg.bn).unwrap();
    let attach = if cfg.mc > 0 {
        let (ioo, ioi) = st.split(&io, cfg.mc / cfg.mr).unwrap();
        st.reorder(&[ioo.clone(), jo.clone(), ioi.clone()]).unwrap();
        if let Some(ap) = apacked {
            let aps = s.stage(ap);
            aps.compute_at(&st, &ioo).unwrap();
            let ax = aps.leaf_iter_vars();
            aps.reorder(&[ax[0].clone(), ax[2].clone(), ax[1].clone()])
                .unwrap();
        }
        ioi
    } else {
        jo
    };
    let (jio, jii) = st.split(&ji, cfg.lanes).unwrap();
    st.unroll(&ii).unwrap();
    st.unroll(&jio).unwrap();
    st.vectorize(&jii).unwrap();

    let ls = s.stage(&local);
    ls.compute_at(&st, &attach).unwrap();
    let lax = ls.leaf_iter_vars();
    let (li, lj, lk) = (lax[0].clone(), lax[1].clone(), lax[2].clone());
    let (ljo, lji) = ls.split(&lj, cfg.lanes).unwrap();
    let (ko, ki) = ls.split(&lk, cfg.ku).unwrap();
    ls.reorder(&[ko, ki.clone(), li.clone(), ljo.clone(), lji.clone()])
        .unwrap();
    ls.unroll(&ki).unwrap();
    ls.unroll(&li).unwrap();
    ls.unroll(&ljo).unwrap();
    ls.vectorize(&lji).unwrap();
    s
}
