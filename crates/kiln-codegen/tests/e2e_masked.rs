//! Vector loops whose lanes take different sides of a condition, end to end on LLVM (masked
//! loads and stores) and C (lane by lane): a zero-padded row read with unit and stride-2
//! loads, and a split whose last vector runs past the extent (a predicated store). Fresh
//! random inputs, poisoned outputs, naive reference loops; the LLVM code is checked to use
//! masked memory operations rather than a scalar loop.

mod e2e_common;

use e2e_common::*;
use kiln_codegen::driver;
use kiln_te::*;
use kiln_tir::PrimExpr;

/// The vector width of these tests (not a CPU's: LLVM splits or widens it as the target needs).
const LANES: i64 = 8;

/// `out[i] = inside(src) ? a[src] : 0` with `src = stride * i + offset - pad` over `n` outputs
/// read from `w` inputs, the row split in vectors of [`LANES`] (a tail of `n % LANES` lanes).
fn padded_row(w: i64, n: i64, stride: i64, offset: i64, pad: i64) -> (Tensor, Tensor, Schedule) {
    let a = placeholder(&[c(w)], f32t(), "A");
    let a2 = a.clone();
    let out = compute(
        &[c(n)],
        move |i| {
            let src = i[0].to_expr() * stride + (offset - pad);
            let inside = src.ge(0).logical_and(src.lt(w));
            if_then_else(inside, a2.at(&[src]), PrimExpr::f32(0.0))
        },
        "pad",
    );
    let s = create_schedule(&[out.op().clone()]);
    let st = s.stage(&out);
    let (_, xi) = st.split(&out.axis(0), LANES).unwrap();
    st.vectorize(&xi).unwrap();
    (a, out, s)
}

fn reference(av: &[f32], n: i64, stride: i64, offset: i64, pad: i64) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let src = i * stride + offset - pad;
            if (0..av.len() as i64).contains(&src) {
                av[src as usize]
            } else {
                0.0
            }
        })
        .collect()
}

#[test]
fn padded_rows_read_with_masked_loads() {
    // (inputs, outputs, stride, offset, pad): a 3x3 convolution's padded row (29 -> 31), the
    // even and odd halves of a stride-2 padded row, a row ending past its input.
    let cases = [
        (29, 31, 1, 0, 1),
        (37, 20, 2, 0, 1),
        (37, 20, 2, 1, 1),
        (16, 24, 1, 3, 0),
    ];
    for (target, (w, n, stride, offset, pad)) in targets_by(cases) {
        let seed = seed("masked_pad") + (w * 100 + n * 10 + stride + offset) as u64;
        let (a, out, s) = padded_row(w, n, stride, offset, pad);
        let module = driver::build(&s, &[a, out], target, "pad").unwrap();
        if target == NATIVE {
            let ir = module.inspect_source("ll").unwrap();
            assert!(
                ir.contains("llvm.masked.load"),
                "{target}: no masked load:\n{ir}"
            );
        }
        let f = module.function("pad").unwrap();
        let av = random(w as usize, seed);
        let o = poisoned(&[n]);
        f.invoke::<()>((tensor(&av, &[w]), o.clone())).unwrap();
        let want = reference(&av, n, stride, offset, pad);
        assert_close(&o.to_vec::<f32>().unwrap(), &want, 0.0, target, seed);
    }
}

#[test]
fn last_partial_vector_is_a_predicated_store() {
    for (target, n) in targets_by([37i64, 5, 64]) {
        let seed = seed("masked_tail") + n as u64;
        let a = placeholder(&[c(n)], f32t(), "A");
        let b = placeholder(&[c(n)], f32t(), "B");
        let (a2, b2) = (a.clone(), b.clone());
        let out = compute(
            &[c(n)],
            move |i| a2.at(&[i[0].to_expr()]) * 2.0 + b2.at(&[i[0].to_expr()]),
            "axpy",
        );
        let s = create_schedule(&[out.op().clone()]);
        let st = s.stage(&out);
        let (_, xi) = st.split(&out.axis(0), LANES).unwrap();
        st.vectorize(&xi).unwrap();
        let args = [a, b, out];
        // Vector code throughout: no loop over the lanes of the last piece.
        let tir = driver::lower(&s, &args, "axpy", true).unwrap().to_string();
        assert!(!tir.contains("i.inner in"), "a scalar tail:\n{tir}");
        let module = driver::build(&s, &args, target, "axpy").unwrap();
        let f = module.function("axpy").unwrap();
        let (av, bv) = (random(n as usize, seed), random(n as usize, seed + 1));
        let o = poisoned(&[n]);
        f.invoke::<()>((tensor(&av, &[n]), tensor(&bv, &[n]), o.clone()))
            .unwrap();
        let want: Vec<f32> = av.iter().zip(&bv).map(|(x, y)| x * 2.0 + y).collect();
        assert_close(&o.to_vec::<f32>().unwrap(), &want, 1e-6, target, seed);
    }
}
