//! x86 schedule of dense, matmul and batch matmul.

use super::main_and_compute;
use crate::nn::tag;
use crate::schedule::{
    extent, find_tagged, fuse_all, generic, inline_injective, same_shape, unroll_factor,
    vector_factor,
};
use kiln_ffi::Result;
use kiln_te::{Schedule, Tensor};
use kiln_tir::CpuDesc;

/// Schedules the product `out` depends on (tags [`tag::DENSE`], [`tag::MATMUL`],
/// [`tag::BATCH_MATMUL`]), `out` being it or an injective epilogue of its shape (a bias
/// add): output tiles of `mb` rows x `nb` columns (a packed weight's block, else two vectors
/// when they divide N, else [`crate::schedule::vector_factor`]; `mb` a power of two dividing M
/// within [`CpuDesc::accumulators_wide`] accumulators, at most half that), batch, column
/// tiles and row tiles fused and parallel in that order (a panel of B is reused by every row
/// tile), the product accumulated per tile in a local cache with `k` outermost, rows unrolled
/// and columns vectorized. Any number of batch dimensions.
pub fn schedule_dense(s: &Schedule, out: &Tensor, cpu: &CpuDesc) -> Result<()> {
    let Some(op) = find_tagged(out, &[tag::DENSE, tag::MATMUL, tag::BATCH_MATMUL]) else {
        return generic::schedule_generic(s, out, cpu);
    };
    let t = op.output(0);
    if !same_shape(out, &t) || out.ndim() < 2 {
        return generic::schedule_generic(s, out, cpu);
    }
    inline_injective(s, out, &[])?;
    let (main, mt, cs) = main_and_compute(s, out, &op)?;
    let nd = mt.ndim();
    let (ax_m, ax_n) = (mt.axis(nd - 2), mt.axis(nd - 1));
    let lanes = cpu.lanes(mt.dtype());
    // A packed weight `[N/b, K, b]` sets the column tile to its block.
    let packed = op
        .input_tensors()
        .into_iter()
        .find(|t| t.ndim() == 3 && nd == 2);
    let n = extent(&mt, nd - 1);
    let nb = match &packed {
        Some(w) => extent(w, 2),
        // Two vectors of columns when they divide N.
        None if n % (2 * lanes) == 0 => 2 * lanes,
        None => vector_factor(n, lanes),
    };
    let vectors = (nb + lanes - 1) / lanes;
    let budget = cpu.accumulators_wide();
    let mb = unroll_factor(extent(&mt, nd - 2), (budget / 2).min(budget / vectors));
    // Few rows (a classifier's one): a tile of several weight blocks, so that independent
    // accumulators keep the multiply-adds in flight (within the registers: the accumulators,
    // one loaded vector per block and the broadcast rows).
    let block = nb;
    let nb = match packed {
        Some(_) if mb < budget / 2 && n % nb == 0 => {
            let regs = cpu.vector_registers as i64;
            let fits = |t: i64| {
                let acc = mb * t * vectors;
                acc <= cpu.accumulators() && acc + t * vectors + mb <= regs
            };
            let t = (1..=n / nb)
                .rev()
                .find(|&t| (n / nb) % t == 0 && fits(t))
                .unwrap_or(1);
            nb * t
        }
        _ => nb,
    };
    let (mo, no, mi, ni) = main.tile(&ax_m, &ax_n, mb, nb)?;
    let mut outer: Vec<_> = (0..nd - 2).map(|i| mt.axis(i)).collect();
    // Column tiles outside row tiles: one panel of B stays in cache across all rows.
    outer.extend([no.clone(), mo]);
    let mut order = outer.clone();
    order.extend([mi, ni.clone()]);
    main.reorder(&order)?;
    let fused = fuse_all(&main, &outer)?.expect("tile loops");
    main.parallel(&fused)?;
    // A tile of several blocks: blocks unrolled, one block a vector (a vector spanning blocks
    // would gather from the packed weight).
    if nb > block {
        let (bo, bi) = main.split(&ni, block)?;
        main.unroll(&bo)?;
        main.vectorize(&bi)?;
    } else if nb > 1 {
        main.vectorize(&ni)?;
    }
    cs.compute_at(&main, &fused)?;
    let leaf = cs.leaf_iter_vars();
    let (data, red): (Vec<_>, Vec<_>) = leaf.into_iter().partition(|iv| !iv.is_reduce());
    let mut order: Vec<_> = data[..data.len() - 2].to_vec();
    order.extend(red);
    order.extend(data[data.len() - 2..].iter().cloned());
    cs.reorder(&order)?;
    if mb > 1 {
        cs.unroll(&data[data.len() - 2])?;
    }
    if nb > block {
        let (bo, bi) = cs.split(&data[data.len() - 1], block)?;
        cs.unroll(&bo)?;
        cs.vectorize(&bi)?;
    } else if nb > 1 {
        cs.vectorize(&data[data.len() - 1])?;
    }
    Ok(())
}
