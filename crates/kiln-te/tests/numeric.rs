//! Numerics: lowered schedules run in the reference interpreter against naive Rust loops on
//! random inputs.

mod support;

use kiln_te::*;
use kiln_testing::{random, reference};
use kiln_tir::PrimFunc;
use support::assert_close;
use support::eval::{run, NdArray};
use support::workloads;

fn out(f: &PrimFunc, args: Vec<NdArray>, which: usize) -> Vec<f32> {
    let res = run(f, args).unwrap_or_else(|e| panic!("{e}\n{f}"));
    res[which].to_f32()
}

#[test]
fn elementwise_with_broadcasting_and_symbolic_rows() {
    let m = 7;
    let (a, b, cc, s) = workloads::broadcast(m);
    let f = lower(&s, &[a, b, cc], "bcast").unwrap();
    let rows = 6;
    let av = random(rows * m as usize, 1);
    let bv = random(m as usize, 2);
    let want: Vec<f32> = (0..rows * m as usize)
        .map(|k| av[k] * bv[k % m as usize] + 1.0)
        .collect();
    let got = out(
        &f,
        vec![
            NdArray::f32(&[rows as i64, m], &av),
            NdArray::f32(&[m], &bv),
            NdArray::zeros(&[rows as i64, m]),
        ],
        2,
    );
    assert_close(&got, &want, 1e-6);
}

#[test]
fn sum_over_an_axis() {
    let (n, m) = (5, 9);
    let (a, b, s) = workloads::row_sum_split(n, m);
    let f = lower(&s, &[a, b], "rowsum").unwrap();
    let av = random((n * m) as usize, 3);
    let want: Vec<f32> = (0..n as usize)
        .map(|i| av[i * m as usize..(i + 1) * m as usize].iter().sum())
        .collect();
    let got = out(
        &f,
        vec![NdArray::f32(&[n, m], &av), NdArray::zeros(&[n])],
        1,
    );
    assert_close(&got, &want, 1e-5);
}

struct Matmul {
    a: Tensor,
    b: Tensor,
    c: Tensor,
    k: IterVar,
}

fn matmul(n: i64, m: i64, l: i64) -> Matmul {
    let (a, b, c, k) = workloads::matmul(n, m, l);
    Matmul { a, b, c, k }
}

fn check_matmul(mm: &Matmul, f: &PrimFunc, n: i64, m: i64, l: i64, seed: u64) {
    let av = random((n * l) as usize, seed);
    let bv = random((l * m) as usize, seed + 1);
    let want = reference::matmul(&av, &bv, n as usize, m as usize, l as usize);
    let _ = mm;
    let got = out(
        f,
        vec![
            NdArray::f32(&[n, l], &av),
            NdArray::f32(&[l, m], &bv),
            NdArray::zeros(&[n, m]),
        ],
        2,
    );
    assert_close(&got, &want, 1e-4);
}

#[test]
fn matmul_naive() {
    let (n, m, l) = (6, 5, 7);
    let mm = matmul(n, m, l);
    let s = create_schedule(&[mm.c.op().clone()]);
    let f = lower(&s, &[mm.a.clone(), mm.b.clone(), mm.c.clone()], "mm").unwrap();
    check_matmul(&mm, &f, n, m, l, 10);
}

#[test]
fn matmul_tiled_vectorized_parallel_with_ragged_edges() {
    let (n, m, l) = (19, 21, 13);
    let mm = matmul(n, m, l);
    let s = workloads::schedule_tiled(&mm.c, &mm.k, 8, 8, 4);
    let f = lower(&s, &[mm.a.clone(), mm.b.clone(), mm.c.clone()], "mm").unwrap();
    let text = f.to_string();
    assert!(text.contains("T.parallel"), "{text}");
    assert!(text.contains("T.vectorized"), "{text}");
    assert!(text.contains("T.likely"), "{text}");
    check_matmul(&mm, &f, n, m, l, 20);
}

#[test]
fn matmul_cache_write_compute_at() {
    let (n, m, l) = (16, 24, 10);
    let mm = matmul(n, m, l);
    let s = workloads::schedule_cache_write(&mm.c, &mm.k);
    let f = lower(&s, &[mm.a.clone(), mm.b.clone(), mm.c.clone()], "mm").unwrap();
    let text = f.to_string();
    assert!(text.contains("C.local = T.decl_buffer((8, 8)"), "{text}");
    check_matmul(&mm, &f, n, m, l, 30);
}

#[test]
fn conv2d_with_inlined_padding() {
    let (h, w, ci, co, kh, kw, pad) = (6i64, 5i64, 2i64, 3i64, 3i64, 3i64, 1i64);
    let (data, weight, conv, s) = workloads::conv2d(ci, h, w, co, kh, kw, pad);
    let f = lower(&s, &[data.clone(), weight.clone(), conv.clone()], "conv").unwrap();
    let text = f.to_string();
    assert!(!text.contains("pad["), "padding is inlined:\n{text}");
    let dv = random((ci * h * w) as usize, 40);
    let wv = random((co * ci * kh * kw) as usize, 41);
    let want = reference::conv2d_chw(&dv, &wv, (ci, h, w, co, kh, kw, pad));
    let got = out(
        &f,
        vec![
            NdArray::f32(&[ci, h, w], &dv),
            NdArray::f32(&[co, ci, kh, kw], &wv),
            NdArray::zeros(&[co, h, w]),
        ],
        2,
    );
    assert_close(&got, &want, 1e-4);
}

#[test]
fn softmax_in_four_stages() {
    let (n, m) = (4i64, 11i64);
    let (x, y, s) = workloads::softmax(n, m);
    let f = lower(&s, &[x.clone(), y.clone()], "softmax").unwrap();
    let text = f.to_string();
    assert!(text.contains("exp = T.decl_buffer((1, 11)"), "{text}");
    let xv = random((n * m) as usize, 50);
    let want = reference::softmax_rows(&xv, n as usize, m as usize);
    let got = out(
        &f,
        vec![NdArray::f32(&[n, m], &xv), NdArray::zeros(&[n, m])],
        1,
    );
    assert_close(&got, &want, 1e-5);
}

#[test]
fn cache_read_into_local_and_general_reducer() {
    let (n, m) = (6i64, 8i64);
    // Sum of squares through a general combiner: x + y with identity 0.
    let (a, b, s) = workloads::sum_of_squares_cache_read(n, m);
    let f = lower(&s, &[a.clone(), b.clone()], "sumsq").unwrap();
    let text = f.to_string();
    assert!(text.contains("A.local = T.decl_buffer((1, 8)"), "{text}");
    let av = random((n * m) as usize, 60);
    let want = reference::row_sum_squares(&av, n as usize, m as usize);
    let got = out(
        &f,
        vec![NdArray::f32(&[n, m], &av), NdArray::zeros(&[n])],
        1,
    );
    assert_close(&got, &want, 1e-5);
}
