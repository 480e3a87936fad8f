//! The indexing, scatter, scan, selection and shift operators (`gather_nd`, `scatter_elements`,
//! `scatter_nd`, `cumsum`, `topk`, `left_shift`, `right_shift`): each reference evaluator
//! against a naive loop written here, and each compiled kernel (graph build -> `.so` -> graph
//! executor) against the evaluator (or, for `topk`, which has none, a sort) on random inputs.

mod common;
use common::{build_and_load, random};

use kiln_ffi::Function as FfiFunction;
use kiln_graph::ir::{AttrValue, Expr, Function, IRModule, Type, Var};
use kiln_graph::op::{self, mk};
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor;

// Links the registrations of kiln-graph (the `graph.build` global).
const _: fn() -> *const () = kiln_graph::link_globals;

fn f(exec: &Module, name: &str) -> FfiFunction {
    exec.function(name).unwrap()
}

/// `op(inputs)` compiled into a one-node graph and run: its outputs.
fn compiled(name: &str, inputs: &[Tensor], attrs: &[(&str, AttrValue)], tag: &str) -> Vec<Tensor> {
    let vars: Vec<Var> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| Var::new(&format!("x{i}"), Type::tensor(t.shape(), t.dtype())))
        .collect();
    let body = mk(name, vars.iter().map(Var::expr).collect(), attrs);
    let exec = build_and_load(&IRModule::from_main(Function::new(vars, body)), vec![], tag);
    for (i, t) in inputs.iter().enumerate() {
        f(&exec, "set_input")
            .invoke::<()>((format!("x{i}").as_str(), t.clone()))
            .unwrap();
    }
    f(&exec, "run").invoke::<()>(()).unwrap();
    let n: i64 = f(&exec, "get_num_outputs").invoke(()).unwrap();
    (0..n)
        .map(|i| f(&exec, "get_output").invoke::<Tensor>((i,)).unwrap())
        .collect()
}

/// `op(inputs)` through the operator's reference evaluator.
fn evaluated(name: &str, inputs: &[Tensor], attrs: &[(&str, AttrValue)]) -> Tensor {
    let args: Vec<Expr> = inputs.iter().map(|t| Expr::constant(t.clone())).collect();
    let call = mk(name, args, attrs);
    let ty = kiln_graph::transform::infer_type::infer_expr(&call)
        .unwrap()
        .ty()
        .unwrap();
    let def = op::get(name).unwrap();
    let map = def.normalize(inputs.len(), attrs).unwrap();
    (def.eval.expect("an evaluator"))(inputs, kiln_graph::ir::attrs::Attrs::new(&map), &ty).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    kiln_testing::assert_allclose(got, want, kiln_testing::Tolerance::Scaled(1e-5), what);
}

/// Random floats of `shape`.
fn floats(shape: &[i64], seed: u64) -> Tensor {
    let n = shape.iter().product::<i64>() as usize;
    Tensor::from_slice(&random(n, seed), shape).unwrap()
}

/// Random `int64` values in `[lo, hi)` of `shape`.
fn ints(shape: &[i64], lo: i64, hi: i64, seed: u64) -> Vec<i64> {
    let n = shape.iter().product::<i64>() as usize;
    random(n, seed)
        .iter()
        .map(|&r| lo + (((r as f64 + 1.0) / 2.0 * (hi - lo) as f64) as i64).min(hi - lo - 1))
        .collect()
}

fn i64s(v: &[i64], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

fn s(v: &str) -> AttrValue {
    AttrValue::from(v)
}

const REDUCTIONS: [&str; 5] = ["none", "add", "mul", "max", "min"];

fn combine(r: &str, acc: f64, v: f64) -> f64 {
    match r {
        "add" => acc + v,
        "mul" => acc * v,
        "max" => acc.max(v),
        "min" => acc.min(v),
        _ => v,
    }
}

#[test]
fn gather_nd_matches_a_loop_and_compiles() {
    // batch_dims = 1: data [2, 3, 4], indices [2, 2, 1] -> [2, 2, 4].
    let data = floats(&[2, 3, 4], 1);
    let ix = ints(&[2, 2, 1], -3, 3, 2);
    let d = values(&data);
    let mut want = Vec::new();
    for b in 0..2 {
        for i in 0..2 {
            let r = ix[b * 2 + i];
            let r = if r < 0 { r + 3 } else { r } as usize;
            for t in 0..4 {
                want.push(d[b * 12 + r * 4 + t]);
            }
        }
    }
    let args = [data.clone(), i64s(&ix, &[2, 2, 1])];
    let attrs = [("batch_dims", AttrValue::Int(1))];
    let ev = evaluated("gather_nd", &args, &attrs);
    assert_eq!(ev.shape(), &[2, 2, 4]);
    assert_close(&values(&ev), &want, "gather_nd eval b=1");
    let got = compiled("gather_nd", &args, &attrs, "gnd1");
    assert_close(&values(&got[0]), &want, "gather_nd compiled b=1");

    // batch_dims = 0, tuples of 2: data [3, 4, 5], indices [6, 2] -> [6, 5].
    let data = floats(&[3, 4, 5], 3);
    let i0 = ints(&[6], -3, 3, 4);
    let i1 = ints(&[6], -4, 4, 5);
    let ix: Vec<i64> = i0.iter().zip(&i1).flat_map(|(&a, &b)| [a, b]).collect();
    let d = values(&data);
    let mut want = Vec::new();
    for m in 0..6 {
        let a = if i0[m] < 0 { i0[m] + 3 } else { i0[m] } as usize;
        let b = if i1[m] < 0 { i1[m] + 4 } else { i1[m] } as usize;
        want.extend((0..5).map(|t| d[a * 20 + b * 5 + t]));
    }
    let args = [data, i64s(&ix, &[6, 2])];
    let ev = evaluated("gather_nd", &args, &[]);
    assert_close(&values(&ev), &want, "gather_nd eval b=0");
    let got = compiled("gather_nd", &args, &[], "gnd0");
    assert_close(&values(&got[0]), &want, "gather_nd compiled b=0");
}

#[test]
fn scatter_elements_matches_a_loop_and_compiles() {
    // Along axis 0 with duplicate and negative indices; updates narrower than the data on
    // axis 1, so some columns receive nothing.
    let data = floats(&[4, 5], 10);
    let upd = floats(&[3, 3], 11);
    let ix = ints(&[3, 3], -4, 4, 12);
    let (d, u) = (values(&data), values(&upd));
    let args = [data, i64s(&ix, &[3, 3]), upd];
    for (k, r) in REDUCTIONS.iter().enumerate() {
        let mut want = d.clone();
        for i in 0..3 {
            for j in 0..3 {
                let t = ix[i * 3 + j];
                let t = if t < 0 { t + 4 } else { t } as usize;
                want[t * 5 + j] = combine(r, want[t * 5 + j], u[i * 3 + j]);
            }
        }
        let attrs = [("axis", AttrValue::Int(0)), ("reduction", s(r))];
        let ev = evaluated("scatter_elements", &args, &attrs);
        assert_close(&values(&ev), &want, &format!("scatter_elements eval {r}"));
        let got = compiled("scatter_elements", &args, &attrs, &format!("se{k}"));
        assert_close(
            &values(&got[0]),
            &want,
            &format!("scatter_elements compiled {r}"),
        );
    }
}

#[test]
fn scatter_nd_matches_a_loop_and_compiles() {
    // Slices: data [4, 3, 2], indices [5, 1] (duplicates), updates [5, 3, 2].
    let data = floats(&[4, 3, 2], 20);
    let upd = floats(&[5, 3, 2], 21);
    let ix = ints(&[5, 1], -4, 4, 22);
    let (d, u) = (values(&data), values(&upd));
    let args = [data.clone(), i64s(&ix, &[5, 1]), upd];
    for (k, r) in REDUCTIONS.iter().enumerate() {
        let mut want = d.clone();
        for (m, &t) in ix.iter().enumerate() {
            let t = if t < 0 { t + 4 } else { t } as usize;
            for e in 0..6 {
                want[t * 6 + e] = combine(r, want[t * 6 + e], u[m * 6 + e]);
            }
        }
        let attrs = [("reduction", s(r))];
        let ev = evaluated("scatter_nd", &args, &attrs);
        assert_close(&values(&ev), &want, &format!("scatter_nd eval {r}"));
        let got = compiled("scatter_nd", &args, &attrs, &format!("snd{k}"));
        assert_close(&values(&got[0]), &want, &format!("scatter_nd compiled {r}"));
    }
    // Points: indices [4, 2] into the first two axes, updates [4, 2].
    let upd = floats(&[4, 2], 23);
    let i0 = ints(&[4], 0, 4, 24);
    let i1 = ints(&[4], 0, 3, 25);
    let ix: Vec<i64> = i0.iter().zip(&i1).flat_map(|(&a, &b)| [a, b]).collect();
    let args = [data, i64s(&ix, &[4, 2]), upd];
    let attrs = [("reduction", s("add"))];
    let ev = evaluated("scatter_nd", &args, &attrs);
    let got = compiled("scatter_nd", &args, &attrs, "snd_pt");
    assert_close(&values(&got[0]), &values(&ev), "scatter_nd points");
}

#[test]
fn cumsum_matches_a_loop_and_compiles() {
    let data = floats(&[3, 5, 2], 30);
    let d = values(&data);
    for (k, (exclusive, reverse)) in [(false, false), (true, false), (false, true), (true, true)]
        .into_iter()
        .enumerate()
    {
        let mut want = vec![0.0; d.len()];
        for a in 0..3 {
            for c in 0..2 {
                let at = |j: usize| a * 10 + j * 2 + c;
                for i in 0..5 {
                    want[at(i)] = (0..5)
                        .filter(|&j| match (exclusive, reverse) {
                            (false, false) => j <= i,
                            (true, false) => j < i,
                            (false, true) => j >= i,
                            (true, true) => j > i,
                        })
                        .map(|j| d[at(j)])
                        .sum();
                }
            }
        }
        let attrs = [
            ("axis", AttrValue::Int(-2)),
            ("exclusive", AttrValue::Bool(exclusive)),
            ("reverse", AttrValue::Bool(reverse)),
        ];
        let args = [data.clone()];
        let ev = evaluated("cumsum", &args, &attrs);
        assert_close(&values(&ev), &want, &format!("cumsum eval {k}"));
        let got = compiled("cumsum", &args, &attrs, &format!("cs{k}"));
        assert_close(&values(&got[0]), &want, &format!("cumsum compiled {k}"));
    }
    // A long axis (77 > DIRECT_MAX) is scanned in blocks, the last one short.
    let long = [floats(&[2, 77, 3], 31)];
    for (k, (exclusive, reverse)) in [(false, false), (true, false), (false, true), (true, true)]
        .into_iter()
        .enumerate()
    {
        let attrs = [
            ("axis", AttrValue::Int(1)),
            ("exclusive", AttrValue::Bool(exclusive)),
            ("reverse", AttrValue::Bool(reverse)),
        ];
        let want = values(&evaluated("cumsum", &long, &attrs));
        let got = compiled("cumsum", &long, &attrs, &format!("csl{k}"));
        assert_close(&values(&got[0]), &want, &format!("cumsum blocks {k}"));
    }
}

#[test]
fn topk_compiles_to_a_stable_selection() {
    // Few distinct values, so that ties are common: equal values keep index order. Rows of 7
    // with k = 4 go through ranks; rows of 20 with k = 3 and of 33 with k = 16, slot by slot.
    for (rows, n, k) in [(6usize, 7usize, 4i64), (5, 20, 3), (3, 33, 16)] {
        let v: Vec<f32> = ints(&[rows as i64, n as i64], 0, 4, 40 + n as u64)
            .iter()
            .map(|&x| x as f32)
            .collect();
        let data = Tensor::from_slice(&v, &[rows as i64, n as i64]).unwrap();
        for largest in [true, false] {
            let attrs = [
                ("k", AttrValue::Int(k)),
                ("axis", AttrValue::Int(1)),
                ("largest", AttrValue::Bool(largest)),
            ];
            let tag = format!("topk{n}{largest}");
            let got = compiled("topk", std::slice::from_ref(&data), &attrs, &tag);
            assert_eq!(got.len(), 2);
            assert_eq!(got[1].shape(), &[rows as i64, k]);
            let (gv, gi) = (values(&got[0]), got[1].to_vec::<i64>().unwrap());
            for r in 0..rows {
                let mut order: Vec<usize> = (0..n).collect();
                // A stable sort keeps equal elements in index order.
                order.sort_by(|&a, &b| {
                    let (x, y) = (v[r * n + a], v[r * n + b]);
                    if largest {
                        y.partial_cmp(&x).unwrap()
                    } else {
                        x.partial_cmp(&y).unwrap()
                    }
                });
                for j in 0..k as usize {
                    let at = r * k as usize + j;
                    assert_eq!(gi[at], order[j] as i64, "{tag} index row {r} slot {j}");
                    assert_eq!(gv[at], v[r * n + order[j]] as f64, "{tag} value row {r}");
                }
            }
        }
    }
}

#[test]
fn shifts_match_a_loop_and_compile() {
    let x: Vec<u8> = ints(&[12], 0, 256, 50).iter().map(|&v| v as u8).collect();
    let y: Vec<u8> = ints(&[12], 0, 8, 51).iter().map(|&v| v as u8).collect();
    let args = [
        Tensor::from_slice(&x, &[12]).unwrap(),
        Tensor::from_slice(&y, &[12]).unwrap(),
    ];
    for op in ["left_shift", "right_shift"] {
        let want: Vec<f64> = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| if op == "left_shift" { a << b } else { a >> b } as f64)
            .collect();
        let ev = evaluated(op, &args, &[]);
        assert_eq!(values(&ev), want, "{op} eval");
        let got = compiled(op, &args, &[], op);
        assert_eq!(got[0].to_vec::<u8>().unwrap(), ev.to_vec::<u8>().unwrap());
    }
    // uint32 with a broadcast shift amount.
    let x: Vec<u32> = ints(&[2, 5], 0, 1 << 30, 52)
        .iter()
        .map(|&v| v as u32 * 3)
        .collect();
    let args = [
        Tensor::from_slice(&x, &[2, 5]).unwrap(),
        Tensor::from_slice(&[3u32], &[1]).unwrap(),
    ];
    for op in ["left_shift", "right_shift"] {
        let want: Vec<u32> = x
            .iter()
            .map(|&a| if op == "left_shift" { a << 3 } else { a >> 3 })
            .collect();
        assert_eq!(evaluated(op, &args, &[]).to_vec::<u32>().unwrap(), want);
        let got = compiled(op, &args, &[], &format!("{op}32"));
        assert_eq!(got[0].to_vec::<u32>().unwrap(), want, "{op} uint32");
    }
}

#[test]
fn bad_attributes_are_named() {
    let x = Var::new("x", Type::f32(&[2, 3]));
    let e = op::call(
        "topk",
        vec![x.expr()],
        &[("k", AttrValue::Int(4)), ("axis", AttrValue::Int(1))],
    )
    .unwrap();
    let err = kiln_graph::transform::infer_type::infer_expr(&e).unwrap_err();
    assert!(err.to_string().contains("`k`"), "{err}");
    let ix = Var::new("i", Type::tensor(&[1, 2], kiln_ffi::DataType::int(64)));
    let u = Var::new("u", Type::f32(&[1, 2]));
    let e = op::call(
        "scatter_elements",
        vec![x.expr(), ix.expr(), u.expr()],
        &[("reduction", s("sum"))],
    )
    .unwrap();
    let err = kiln_graph::transform::infer_type::infer_expr(&e).unwrap_err();
    assert!(err.to_string().contains("`reduction`"), "{err}");
}
