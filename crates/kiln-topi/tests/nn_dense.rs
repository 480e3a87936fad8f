//! dense (with and without bias), matmul (transposes) and batch_matmul (broadcast batch),
//! built for the host CPU against naive loops.

mod nn_common;

use kiln_topi::nn::{self, MatmulAttrs};
use kiln_topi::schedule::x86;
use nn_common::*;

/// Logical element `(r, c)` of a row-major operand stored as `[_, cols]`, transposed or not.
fn at(v: &[f32], cols: usize, r: usize, c: usize, transposed: bool) -> f32 {
    if transposed {
        v[c * cols + r]
    } else {
        v[r * cols + c]
    }
}

#[test]
fn dense_shapes() {
    let seed = seed("dense");
    for (case, (m, n, k, with_bias)) in [
        (1, 10, 7, true),
        (4, 16, 32, false),
        (13, 37, 19, true),
        (8, 64, 5, true),
    ]
    .into_iter()
    .enumerate()
    {
        let data = input(&[m, k], "data");
        let weight = input(&[n, k], "weight");
        let bias = input(&[n], "bias");
        let out = nn::dense(&data, &weight, with_bias.then_some(&bias)).unwrap();
        let mut inputs = vec![data, weight];
        if with_bias {
            inputs.push(bias);
        }
        let vals = random_inputs(&inputs, seed + case as u64);
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let mut want = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = if with_bias { vals[2][j] } else { 0.0 };
                for r in 0..k {
                    acc += vals[0][i * k + r] * vals[1][j * k + r];
                }
                want[i * n + j] = acc;
            }
        }
        let what = format!("dense {m}x{n}x{k} bias={with_bias}");
        check(
            &what,
            &out,
            &inputs,
            &vals,
            x86::schedule_dense,
            &want,
            1e-4,
            seed,
        );
    }
}

#[test]
fn matmul_transposes() {
    let seed = seed("matmul");
    let (m, n, k) = (9usize, 20usize, 11usize);
    for (case, (ta, tb)) in [(false, false), (true, false), (false, true), (true, true)]
        .into_iter()
        .enumerate()
    {
        let sa = if ta { [k, m] } else { [m, k] };
        let sb = if tb { [n, k] } else { [k, n] };
        let a = input(&[sa[0] as i64, sa[1] as i64], "A");
        let b = input(&[sb[0] as i64, sb[1] as i64], "B");
        let out = nn::matmul(
            &a,
            &b,
            &MatmulAttrs {
                transpose_a: ta,
                transpose_b: tb,
            },
        )
        .unwrap();
        let inputs = [a, b];
        let vals = random_inputs(&inputs, seed + case as u64);
        let mut want = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k)
                    .map(|r| at(&vals[0], sa[1], i, r, ta) * at(&vals[1], sb[1], r, j, tb))
                    .sum();
            }
        }
        check(
            &format!("matmul ta={ta} tb={tb}"),
            &out,
            &inputs,
            &vals,
            x86::schedule_dense,
            &want,
            1e-4,
            seed,
        );
    }
}

#[test]
fn batch_matmul_shapes() {
    let seed = seed("batch_matmul");
    // (batch_a, batch_b, m, n, k, transpose_b)
    let cases = [
        (3, 3, 4, 16, 8, false),
        (2, 1, 5, 7, 3, true),
        (1, 4, 8, 32, 6, false),
        // Columns no vector divides: whole vectors and a shorter last tile (a vision
        // transformer's 197 tokens).
        (2, 2, 9, 37, 12, false),
        (1, 1, 5, 21, 8, true),
        (2, 2, 7, 197, 16, false),
    ];
    for (case, (ba, bb, m, n, k, tb)) in cases.into_iter().enumerate() {
        let a = input(&[ba, m, k], "A");
        let b = if tb {
            input(&[bb, n, k], "B")
        } else {
            input(&[bb, k, n], "B")
        };
        let attrs = MatmulAttrs {
            transpose_a: false,
            transpose_b: tb,
        };
        let out = nn::batch_matmul(&a, &b, &attrs).unwrap();
        let inputs = [a, b];
        let vals = random_inputs(&inputs, seed + case as u64);
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let batch = ba.max(bb) as usize;
        let mut want = vec![0f32; batch * m * n];
        for bi in 0..batch {
            let ia = if ba == 1 { 0 } else { bi };
            let ib = if bb == 1 { 0 } else { bi };
            for i in 0..m {
                for j in 0..n {
                    want[(bi * m + i) * n + j] = (0..k)
                        .map(|r| {
                            let bv = if tb {
                                vals[1][(ib * n + j) * k + r]
                            } else {
                                vals[1][(ib * k + r) * n + j]
                            };
                            vals[0][(ia * m + i) * k + r] * bv
                        })
                        .sum();
                }
            }
        }
        check(
            &format!("batch_matmul case {case}"),
            &out,
            &inputs,
            &vals,
            x86::schedule_dense,
            &want,
            1e-4,
            seed,
        );
    }
}

/// Row tiles are split into blocks only past half as many again as a block holds: a last
/// block of a tile or two would stream all of B for next to nothing.
#[test]
fn dense_row_blocks_leave_no_stub() {
    use x86::dense::split_rows;
    assert!(!split_rows(21, 21));
    assert!(!split_rows(22, 21));
    assert!(!split_rows(31, 21));
    assert!(split_rows(32, 21));
    assert!(split_rows(171, 21));
    assert!(!split_rows(1, 1) && split_rows(2, 1));
}

/// A block of rows fills an eighth of the last-level cache with its rows of A, or half the L2
/// cache on a CPU without L3.
#[test]
fn row_blocks_fill_an_eighth_of_the_last_level_cache() {
    use x86::dense::row_block;
    let mut cpu = kiln_tir::CpuDesc::custom(256, 16);
    cpu.caches.l3 = 32 << 20;
    cpu.caches.l2 = 1 << 20;
    // 6 rows of 1024 floats: 170 tiles in 4 MiB, so a 1024^3 product is one block.
    assert_eq!(row_block(6 * 1024 * 4, &cpu), 170);
    assert!(!x86::dense::split_rows(171, 170));
    cpu.caches.l3 = 0;
    assert_eq!(row_block(6 * 1024 * 4, &cpu), 21);
    assert_eq!(row_block(1 << 30, &cpu), 1);
}

/// A product split into several blocks of rows (a CPU description with a small last-level
/// cache), its last block and last row tile short, against naive loops.
#[test]
fn dense_in_several_row_blocks() {
    let seed = seed("dense_row_blocks");
    let (m, n, k) = (61i64, 48i64, 40i64);
    let b = 16;
    let data = input(&[m, k], "data");
    let packed = input(&[n / b, k, b], "weight_packed");
    let bias = input(&[n], "bias");
    let out = nn::dense_packed(&data, &packed, Some(n), Some(&bias)).unwrap();
    let vals = random_inputs(&[data.clone(), packed.clone(), bias.clone()], seed);
    let (mu, nu, ku, bu) = (m as usize, n as usize, k as usize, b as usize);
    let mut want = vec![0f32; mu * nu];
    for i in 0..mu {
        for j in 0..nu {
            let mut acc = vals[2][j];
            for r in 0..ku {
                acc += vals[0][i * ku + r] * vals[1][((j / bu) * ku + r) * bu + j % bu];
            }
            want[i * nu + j] = acc;
        }
    }
    for (target, mut cpu) in targets() {
        // Two row tiles' rows of A in an eighth of the cache.
        let (mr, _) = x86::dense::matrix_tile(m, n / b, b / cpu.f32_lanes(), &cpu);
        cpu.caches.l3 = (8 * 2 * mr * k * 4) as u64;
        assert_eq!(x86::dense::row_block(mr * k * 4, &cpu), 2);
        let inputs = [data.clone(), packed.clone(), bias.clone()];
        let got = run_on(&out, &inputs, &vals, x86::schedule_dense, &target, &cpu);
        assert_close(&got, &want, 1e-4, &format!("row blocks ({target})"), seed);
    }
}

#[test]
fn long_reductions_chunk_to_half_of_l1() {
    use x86::dense::{group_tiles, k_chunk};
    // AVX2: blocks of 16 floats (64 bytes a row of the panel), a 32 KiB L1.
    let cpu = kiln_tir::CpuDesc::custom(256, 16);
    assert_eq!(cpu.caches.l1d, 32 * 1024);
    assert_eq!(k_chunk(1024, 64, &cpu), Some(256));
    assert_eq!(k_chunk(1536, 64, &cpu), Some(256));
    assert_eq!(k_chunk(1000, 64, &cpu), Some(200));
    // A panel that fits L1 is not chunked.
    assert_eq!(k_chunk(512, 64, &cpu), None);
    // AVX-512's blocks of 32 floats: chunks of 128.
    assert_eq!(k_chunk(1024, 128, &cpu), Some(128));
    // 6 x 16 accumulators (384 bytes): 21 tiles in a quarter of L1.
    assert_eq!(group_tiles(384, &cpu), 21);
    assert_eq!(group_tiles(1 << 20, &cpu), 1);
}

#[test]
fn dense_packed_weights() {
    let seed = seed("dense_packed");
    // 13 x 97: a last tile short of both rows and columns (its guard `row && column`).
    for (case, (m, n, k, with_bias)) in [
        (1, 40, 33, true),
        (3, 32, 8, false),
        (2, 1000, 17, true),
        (13, 97, 24, true),
        // Long rows of A (8 KiB each).
        (13, 40, 2048, false),
    ]
    .into_iter()
    .enumerate()
    {
        let b = 16;
        let nb = (n + b - 1) / b;
        let data = input(&[m, k], "data");
        let weight = input(&[n, k], "weight");
        let packed = input(&[nb, k, b], "weight_packed");
        let bias = input(&[n], "bias");
        let out = nn::dense_packed(&data, &packed, Some(n), with_bias.then_some(&bias)).unwrap();
        let vals = random_inputs(&[data.clone(), weight, bias.clone()], seed + case as u64);
        let (mu, nu, ku, bu) = (m as usize, n as usize, k as usize, b as usize);
        // [N, K] -> [N/b, K, b], zeros past N.
        let mut pw = vec![0f32; nb as usize * ku * bu];
        for j in 0..nu {
            for r in 0..ku {
                pw[((j / bu) * ku + r) * bu + j % bu] = vals[1][j * ku + r];
            }
        }
        let mut want = vec![0f32; mu * nu];
        for i in 0..mu {
            for j in 0..nu {
                let mut acc = if with_bias { vals[2][j] } else { 0.0 };
                for r in 0..ku {
                    acc += vals[0][i * ku + r] * vals[1][j * ku + r];
                }
                want[i * nu + j] = acc;
            }
        }
        let mut inputs = vec![data, packed];
        let mut ivals = vec![vals[0].clone(), pw];
        if with_bias {
            inputs.push(bias);
            ivals.push(vals[2].clone());
        }
        check(
            &format!("packed dense {m}x{n}x{k} bias={with_bias}"),
            &out,
            &inputs,
            &ivals,
            x86::schedule_dense,
            &want,
            1e-4,
            seed,
        );
    }
}

#[test]
fn matmul_nd_broadcast_batches() {
    let seed = seed("matmul_nd");
    // (a shape, b shape, transpose_b): attention-like 4-D products and a 3-D x 2-D weight.
    let cases: [(&[i64], &[i64], bool); 3] = [
        (&[1, 3, 5, 4], &[1, 3, 6, 4], true),
        (&[2, 7, 8], &[8, 5], false),
        (&[2, 1, 3, 4], &[3, 4, 2], false),
    ];
    for (case, (sa, sb, tb)) in cases.into_iter().enumerate() {
        let a = input(sa, "a");
        let b = input(sb, "b");
        let attrs = MatmulAttrs {
            transpose_a: false,
            transpose_b: tb,
        };
        let out = nn::matmul(&a, &b, &attrs).unwrap();
        let inputs = vec![a, b];
        let vals = random_inputs(&inputs, seed + case as u64);
        let oshape = shape_of(&out);
        let nd = oshape.len();
        let (m, n) = (oshape[nd - 2] as usize, oshape[nd - 1] as usize);
        let k = sa[sa.len() - 1] as usize;
        // Naive reference: unravel each output batch index and broadcast it to each operand.
        let batch: Vec<i64> = oshape[..nd - 2].to_vec();
        let nbatch: i64 = batch.iter().product();
        let offset = |own: &[i64], flat: i64| -> usize {
            let own_b = &own[..own.len() - 2];
            let mut idx = vec![0i64; batch.len()];
            let mut f = flat;
            for d in (0..batch.len()).rev() {
                idx[d] = f % batch[d];
                f /= batch[d];
            }
            let off = batch.len() - own_b.len();
            let mut lin = 0i64;
            for (d, &e) in own_b.iter().enumerate() {
                lin = lin * e + if e == 1 { 0 } else { idx[off + d] };
            }
            lin as usize * (own[own.len() - 2] * own[own.len() - 1]) as usize
        };
        let mut want = vec![0f32; nbatch as usize * m * n];
        for bi in 0..nbatch {
            let (oa, ob) = (offset(sa, bi), offset(sb, bi));
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0f32;
                    for r in 0..k {
                        let bv = if tb {
                            vals[1][ob + j * k + r]
                        } else {
                            vals[1][ob + r * n + j]
                        };
                        acc += vals[0][oa + i * k + r] * bv;
                    }
                    want[(bi as usize * m + i) * n + j] = acc;
                }
            }
        }
        check(
            &format!("matmul {sa:?} x {sb:?} tb={tb}"),
            &out,
            &inputs,
            &vals,
            x86::schedule_dense,
            &want,
            1e-4,
            seed,
        );
    }
}

#[test]
fn softmax_of_a_scaled_product_in_row_blocks() {
    // Attention scores fused with their softmax: the x86 softmax schedule computes the
    // product a block of rows at a time when the block's rows divide the product's, its
    // columns are whole vectors and B is read along them, else (B stored transposed, as
    // attention's keys may be, included) the whole product first with the matrix kernel's
    // schedule.
    let seed = seed("softmax_of_product");
    // (batch, m, n, k, transpose_b)
    let cases = [
        (2, 48, 96, 16, false),
        (2, 64, 128, 32, true),
        (2, 64, 128, 32, false),
        (1, 30, 48, 5, false),
        (2, 45, 77, 16, false),
    ];
    for (case, (bs, m, n, k, tb)) in cases.into_iter().enumerate() {
        let a = input(&[bs, m, k], "A");
        let b = if tb {
            input(&[bs, n, k], "B")
        } else {
            input(&[bs, k, n], "B")
        };
        let attrs = MatmulAttrs {
            transpose_a: false,
            transpose_b: tb,
        };
        let p = nn::batch_matmul(&a, &b, &attrs).unwrap();
        let scale = kiln_tir::PrimExpr::const_float(kiln_tir::DataType::float(32), 0.25);
        let scaled = kiln_te::compute(p.shape(), |i| p.at_vars(i) * scale.clone(), "scale");
        let out = nn::softmax::softmax_in_lanes(&scaled, -1, 8).unwrap();
        for (target, cpu) in targets() {
            let s = kiln_te::create_schedule(&[out.op().clone()]);
            x86::schedule_softmax(&s, &out, &cpu).unwrap();
            let args = [a.clone(), b.clone(), out.clone()];
            let text = kiln_codegen::driver::lower(&s, &args, "f", true)
                .unwrap()
                .to_string();
            let size: i64 = text
                .split("batch_matmul = T.allocate([")
                .nth(1)
                .and_then(|t| t.split(']').next())
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("{target}: no product buffer in\n{text}"));
            let lanes = cpu.f32_lanes();
            let vectors = if n % (2 * lanes) == 0 { 2 } else { 1 };
            let (tile, _) = x86::dense::matrix_tile(m, 1, vectors, &cpu);
            let rows = ((tile + 1) / 2..=tile).rev().find(|r| m % r == 0);
            // B stored transposed would take a gather per vector of columns.
            match rows.filter(|_| n % lanes == 0 && !tb) {
                // One block of rows, on the stack.
                Some(r) => {
                    assert_eq!(size, r * n, "{target}, case {case}:\n{text}");
                    assert!(text.contains(&format!("T.allocate([{size}], \"float32\", \"local\")")));
                }
                None => assert_eq!(size, bs * m * n, "{target}, case {case}:\n{text}"),
            }
        }
        let inputs = [a, b];
        let vals = random_inputs(&inputs, seed + case as u64);
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let mut want = Vec::with_capacity(bs as usize * m * n);
        for bi in 0..bs as usize {
            for i in 0..m {
                let row: Vec<f64> = (0..n)
                    .map(|j| {
                        let dot: f64 = (0..k)
                            .map(|r| {
                                let bv = if tb {
                                    vals[1][(bi * n + j) * k + r]
                                } else {
                                    vals[1][(bi * k + r) * n + j]
                                };
                                vals[0][(bi * m + i) * k + r] as f64 * bv as f64
                            })
                            .sum();
                        dot * 0.25
                    })
                    .collect();
                want.extend(softmax_ref(&row));
            }
        }
        check(
            &format!("softmax of a product, case {case}"),
            &out,
            &inputs,
            &vals,
            x86::schedule_softmax,
            &want,
            1e-5,
            seed,
        );
    }
}

#[test]
fn softmax_of_a_dense_product_computes_it_whole_first() {
    // A product of a [N, K] weight (nn.dense, a transposed right-hand matrix) inside a softmax:
    // the matrix kernel's schedule computes it whole first (vector code), then the softmax.
    let seed = seed("softmax_of_dense");
    let (m, n, k) = (24i64, 64i64, 16i64);
    let a = input(&[m, k], "A");
    let w = input(&[n, k], "W");
    let out = nn::softmax::softmax_in_lanes(&nn::dense(&a, &w, None).unwrap(), -1, 8).unwrap();
    for (target, cpu) in targets() {
        let s = kiln_te::create_schedule(&[out.op().clone()]);
        x86::schedule_softmax(&s, &out, &cpu).unwrap();
        let args = [a.clone(), w.clone(), out.clone()];
        let text = kiln_codegen::driver::lower(&s, &args, "f", true)
            .unwrap()
            .to_string();
        assert!(
            text.contains(&format!("T.allocate([{}], \"float32\", \"global\")", m * n)),
            "{target}:\n{text}"
        );
        assert!(
            text.contains(".local[T.Ramp("),
            "{target}: no register tile\n{text}"
        );
    }
    let inputs = [a, w];
    let vals = random_inputs(&inputs, seed);
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let mut want = Vec::with_capacity(mu * nu);
    for i in 0..mu {
        let row: Vec<f64> = (0..nu)
            .map(|j| {
                (0..ku)
                    .map(|r| vals[0][i * ku + r] as f64 * vals[1][j * ku + r] as f64)
                    .sum()
            })
            .collect();
        want.extend(softmax_ref(&row));
    }
    check(
        "softmax of a dense product",
        &out,
        &inputs,
        &vals,
        x86::schedule_softmax,
        &want,
        1e-5,
        seed,
    );
}

/// The softmax of one row, in float64 (the reference of the fused softmax tests).
fn softmax_ref(row: &[f64]) -> Vec<f32> {
    let max = row.iter().cloned().fold(f64::MIN, f64::max);
    let sum: f64 = row.iter().map(|x| (x - max).exp()).sum();
    row.iter().map(|x| ((x - max).exp() / sum) as f32).collect()
}
