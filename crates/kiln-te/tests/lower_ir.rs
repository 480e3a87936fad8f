//! IR in, IR out: the loop structure lowering produces for each primitive.

use kiln_te::*;
use kiln_tir::{DataType, ForKind, PrimExpr, PrimFunc, Stmt, StmtKind, Var};

fn c(v: i64) -> PrimExpr {
    PrimExpr::i32(v)
}

fn f32t() -> DataType {
    DataType::float(32)
}

/// `B = A * 2` over `shape`.
fn scale(shape: &[PrimExpr]) -> (Tensor, Tensor) {
    let a = placeholder(shape, f32t(), "A");
    let b = compute(shape, |i| a.at_vars(i) * 2.0, "B");
    (a, b)
}

/// The loops of a function, outermost first, as (name, extent text, kind).
fn loops(f: &PrimFunc) -> Vec<(String, String, ForKind)> {
    let mut out = Vec::new();
    fn walk(s: &Stmt, out: &mut Vec<(String, String, ForKind)>) {
        match s.kind() {
            StmtKind::For(l) => {
                out.push((l.loop_var.name().to_string(), l.extent.to_string(), l.kind));
                walk(&l.body, out);
            }
            StmtKind::Seq(q) => q.seq.iter().for_each(|x| walk(x, out)),
            StmtKind::Allocate(a) => walk(&a.body, out),
            StmtKind::DeclBuffer(d) => walk(&d.body, out),
            StmtKind::IfThenElse(i) => walk(&i.then_case, out),
            StmtKind::AttrStmt(a) => walk(&a.body, out),
            StmtKind::LetStmt(l) => walk(&l.body, out),
            _ => {}
        }
    }
    walk(f.body(), &mut out);
    out
}

#[test]
fn naive_elementwise_prints_like_tvm() {
    let (a, b) = scale(&[c(4), c(8)]);
    let s = create_schedule(&[b.op().clone()]);
    let f = lower(&s, &[a, b], "scale").unwrap();
    let want = "\
@T.prim_func
def scale(A: T.Buffer((4, 8), \"float32\"), B: T.Buffer((4, 8), \"float32\")):
    T.func_attr({\"global_symbol\": \"scale\"})
    for i in range(0, 4):
        for j in range(0, 8):
            B[i, j] = A[i, j] * T.float32(2.0)";
    assert_eq!(f.to_string(), want);
    assert_eq!(f.global_symbol().as_deref(), Some("scale"));
    assert_eq!(f.params().len(), 2);
}

#[test]
fn split_guards_only_when_not_divisible() {
    for (n, guarded) in [(16, false), (13, true)] {
        let (a, b) = scale(&[c(n)]);
        let s = create_schedule(&[b.op().clone()]);
        s.stage(&b).split(&b.axis(0), 4).unwrap();
        let f = lower(&s, &[a, b], "f").unwrap();
        let text = f.to_string();
        assert_eq!(
            text.contains("T.likely(i.outer * 4 + i.inner < 13)"),
            guarded,
            "{text}"
        );
        let l = loops(&f);
        assert_eq!(l[0].1, "4");
        assert_eq!(l[1].1, "4");
    }
}

#[test]
fn symbolic_extent_split_is_guarded() {
    let n = Var::size_var("n", DataType::int(32));
    let (a, b) = scale(&[n.to_expr()]);
    let s = create_schedule(&[b.op().clone()]);
    s.stage(&b).split_nparts(&b.axis(0), 3).unwrap();
    let f = lower(&s, &[a, b], "f").unwrap();
    let text = f.to_string();
    assert!(text.contains("T.likely("), "{text}");
    let l = loops(&f);
    assert_eq!(l[0].1, "3");
    assert_eq!(l[1].1, "(n + 2) // 3");
}

#[test]
fn loop_kinds_fuse_reorder_and_pragma() {
    let (a, b) = scale(&[c(4), c(6), c(8)]);
    let s = create_schedule(&[b.op().clone()]);
    let st = s.stage(&b);
    let (i, j, k) = (b.axis(0), b.axis(1), b.axis(2));
    st.reorder(&[j.clone(), i.clone(), k.clone()]).unwrap();
    let ji = st.fuse(&j, &i).unwrap();
    st.parallel(&ji).unwrap();
    let (ko, ki) = st.split(&k, 4).unwrap();
    st.vectorize(&ki).unwrap();
    st.unroll(&ko).unwrap();
    st.pragma(&ji, "auto_unroll_max_step", 16).unwrap();
    let f = lower(&s, &[a, b], "f").unwrap();
    let l = loops(&f);
    let kinds: Vec<_> = l
        .iter()
        .map(|x| (x.0.as_str(), x.1.as_str(), x.2))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("j.i.fused", "24", ForKind::Parallel),
            ("k.outer", "2", ForKind::Unrolled),
            ("k.inner", "4", ForKind::Vectorized),
        ]
    );
    let text = f.to_string();
    assert!(text.contains("pragma_auto_unroll_max_step"), "{text}");
    assert!(
        text.contains("B[j.i.fused % 4, j.i.fused // 4, k.outer * 4 + k.inner]"),
        "{text}"
    );
    // Leaf order after the primitives.
    let names: Vec<String> = st
        .leaf_iter_vars()
        .iter()
        .map(|v| v.name().to_string())
        .collect();
    assert_eq!(names, ["j.i.fused", "k.outer", "k.inner"]);
}

#[test]
fn errors_name_the_stage_and_axis() {
    let (_a, b) = scale(&[c(4), c(8)]);
    let s = create_schedule(&[b.op().clone()]);
    let st = s.stage(&b);
    st.split(&b.axis(0), 2).unwrap();
    let e = st.split(&b.axis(0), 2).unwrap_err().to_string();
    assert!(e.contains("`i` is not a leaf axis"), "{e}");
    let leaves = st.leaf_iter_vars();
    let e = st.fuse(&leaves[0], &leaves[2]).unwrap_err().to_string();
    assert!(e.contains("adjacent"), "{e}");
}

#[test]
fn reduction_init_goes_outside_the_first_reduction_loop() {
    let a = placeholder(&[c(4), c(8)], f32t(), "A");
    let k = reduce_axis_n(8, "k");
    let b = compute(
        &[c(4)],
        |i| sum(a.at(&[i[0].to_expr(), k.expr()]), std::slice::from_ref(&k)),
        "B",
    );
    let s = create_schedule(&[b.op().clone()]);
    let f = lower(&s, &[a.clone(), b.clone()], "f").unwrap();
    let want = "\
    for i in range(0, 4):
        B[i] = T.float32(0.0)
        for k in range(0, 8):
            B[i] = B[i] + A[i, k]";
    assert!(f.to_string().ends_with(want), "{f}");

    // Reduction outermost: the init gets its own copy of the data-parallel loop.
    let s = create_schedule(&[b.op().clone()]);
    s.stage(&b).reorder(&[k.clone(), b.axis(0)]).unwrap();
    let f = lower(&s, &[a, b], "f").unwrap();
    let want = "\
    for i in range(0, 4):
        B[i] = T.float32(0.0)
    for k in range(0, 8):
        for i_1 in range(0, 4):
            B[i_1] = B[i_1] + A[i_1, k]";
    assert!(f.to_string().ends_with(want), "{f}");
}

#[test]
fn compute_at_allocates_the_bounded_region() {
    let a = placeholder(&[c(16), c(16)], f32t(), "A");
    let b = compute(&[c(16), c(16)], |i| a.at_vars(i) + 1.0, "B");
    let cc = compute(
        &[c(16), c(16)],
        |i| b.at(&[i[0].to_expr(), i[1].to_expr()]) * 2.0,
        "C",
    );
    let s = create_schedule(&[cc.op().clone()]);
    let sc = s.stage(&cc);
    let (xo, yo, _xi, _yi) = sc.tile(&cc.axis(0), &cc.axis(1), 4, 8).unwrap();
    s.stage(&b).compute_at(&sc, &yo).unwrap();
    let bounds = infer_bound(&s).unwrap();
    let rb: Vec<String> = bounds
        .iter()
        .filter(|(iv, _)| iv == &b.axis(0) || iv == &b.axis(1))
        .map(|(_, r)| r.to_string())
        .collect();
    assert_eq!(
        rb,
        [
            "range(i.outer * 4, i.outer * 4 + 4)",
            "range(j.outer * 8, j.outer * 8 + 8)"
        ]
    );
    let f = lower(&s, &[a, cc], "f").unwrap();
    let want = "\
    for i.outer in range(0, 4):
        for j.outer in range(0, 2):
            B = T.decl_buffer((4, 8), \"float32\")
            for i in range(0, 4):
                for j in range(0, 8):
                    B[i, j] = A[i + i.outer * 4, j + j.outer * 8] + T.float32(1.0)
            for i.inner in range(0, 4):
                for j.inner in range(0, 8):
                    C[i.outer * 4 + i.inner, j.outer * 8 + j.inner] = B[i.inner, j.inner] * T.float32(2.0)";
    assert!(f.to_string().ends_with(want), "{f}");
    let _ = xo;
}

/// A producer over flattened positions (`B[p]`) read back by row and column (`C[y, x] =
/// B[y*7 + x]`), computed at a tile of the consumer's fused rows and columns: the tile's
/// positions are `floordiv(f, 7)*7 + floormod(f, 7)`, which simplifies to `f`, so the producer
/// covers exactly the tile's 6 positions (not the whole rows the tile touches).
#[test]
fn compute_at_a_fused_tile_covers_its_positions() {
    let a = placeholder(&[c(49)], f32t(), "A");
    let b = compute(&[c(49)], |i| a.at_vars(i) + 1.0, "B");
    let cc = compute(
        &[c(7), c(7)],
        |i| b.at(&[i[0].to_expr() * 7 + i[1].to_expr()]) * 2.0,
        "C",
    );
    let s = create_schedule(&[cc.op().clone()]);
    let sc = s.stage(&cc);
    let f = sc.fuse(&cc.axis(0), &cc.axis(1)).unwrap();
    let (fo, _fi) = sc.split(&f, 6).unwrap();
    s.stage(&b).compute_at(&sc, &fo).unwrap();
    let bounds = infer_bound(&s).unwrap();
    let rb: Vec<String> = bounds
        .iter()
        .filter(|(iv, _)| iv == &b.axis(0))
        .map(|(_, r)| r.to_string())
        .collect();
    assert_eq!(rb, ["range(i.j.fused.outer * 6, i.j.fused.outer * 6 + 6)"]);
}

#[test]
fn compute_inline_substitutes_the_body() {
    let a = placeholder(&[c(8)], f32t(), "A");
    let b = compute(&[c(8)], |i| a.at_vars(i) + 1.0, "B");
    let cc = compute(&[c(8)], |i| b.at_vars(i) * b.at_vars(i), "C");
    let s = create_schedule(&[cc.op().clone()]);
    s.stage(&b).compute_inline().unwrap();
    let f = lower(&s, &[a, cc.clone()], "f").unwrap();
    assert!(
        f.to_string()
            .ends_with("C[i] = (A[i] + T.float32(1.0)) * (A[i] + T.float32(1.0))"),
        "{f}"
    );
    // Reductions cannot be inlined.
    let k = reduce_axis_n(8, "k");
    let a2 = placeholder(&[c(8)], f32t(), "A2");
    let r = compute(
        &[],
        |_| sum(a2.at(&[k.expr()]), std::slice::from_ref(&k)),
        "R",
    );
    let s = create_schedule(&[r.op().clone()]);
    assert!(s.stage(&r).compute_inline().is_err());
}

#[test]
fn root_intermediate_is_allocated_whole() {
    let a = placeholder(&[c(8)], f32t(), "A");
    let b = compute(&[c(8)], |i| a.at_vars(i) + 1.0, "B");
    let cc = compute(&[c(8)], |i| b.at_vars(i) * 2.0, "C");
    let s = create_schedule(&[cc.op().clone()]);
    let f = lower(&s, &[a, cc], "f").unwrap();
    let want = "\
    B = T.decl_buffer((8,), \"float32\")
    for i in range(0, 8):
        B[i] = A[i] + T.float32(1.0)
    for i_1 in range(0, 8):
        C[i_1] = B[i_1] * T.float32(2.0)";
    assert!(f.to_string().contains(want), "{f}");
}

#[test]
fn cache_write_makes_a_copy_stage() {
    let a = placeholder(&[c(8)], f32t(), "A");
    let b = compute(&[c(8)], |i| a.at_vars(i) + 1.0, "B");
    let s = create_schedule(&[b.op().clone()]);
    let bl = s.cache_write(&b, "local").unwrap();
    assert_eq!(bl.name(), "B.local");
    let names: Vec<String> = s
        .stages()
        .iter()
        .map(|st| st.op().name().to_string())
        .collect();
    assert_eq!(names, ["A", "B.local", "B"]);
    let f = lower(&s, &[a, b], "f").unwrap();
    let text = f.to_string();
    assert!(
        text.contains("B.local = T.decl_buffer((8,), \"float32\", scope=\"local\")"),
        "{text}"
    );
    assert!(text.contains("B[i] = B.local[i]"), "{text}");
}

#[test]
fn tensors_are_buffers_and_round_trip_through_json() {
    let (a, b) = scale(&[c(4)]);
    assert_eq!(b.op().input_tensors(), vec![a.clone()]);
    assert_eq!(a.as_buffer().name(), "A");
    assert_eq!(Tensor::from_buffer(&a.as_buffer()), Some(a.clone()));
    let json = kiln_tir::to_json(&b).unwrap();
    assert!(json.contains("te.ComputeOp"), "{json}");
    let back: Tensor = kiln_tir::from_json(&json).unwrap();
    assert_eq!(back.name(), "B");
    assert_eq!(back.op().num_outputs(), 1);
}

#[test]
fn compute_at_on_a_ragged_tile_guards_the_attached_stage() {
    // B (10 points) in tiles of 4: the last tile covers 8..12. B.local, computed at the tile,
    // must not compute (nor read A at) 10 and 11: it is guarded by its own domain.
    let a = placeholder(&[c(10)], f32t(), "A");
    let b = compute(&[c(10)], |i| a.at_vars(i) + 1.0, "B");
    let s = create_schedule(&[b.op().clone()]);
    let bl = s.cache_write(&b, "local").unwrap();
    let (bo, _bi) = s.stage(&b).split(&b.axis(0), 4).unwrap();
    s.stage(&bl).compute_at(&s.stage(&b), &bo).unwrap();
    let f = lower(&s, &[a, b], "f").unwrap();
    let text = f.to_string();
    let local = text
        .lines()
        .position(|l| l.contains("B.local[") && l.contains("= A["))
        .unwrap_or_else(|| panic!("{text}"));
    let guard = text.lines().nth(local - 1).unwrap();
    assert!(
        guard.contains("T.likely(") && guard.contains("< 10"),
        "the local stage is not guarded:\n{text}"
    );
    // A tile that divides the extent needs no guard.
    let a = placeholder(&[c(12)], f32t(), "A");
    let b = compute(&[c(12)], |i| a.at_vars(i) + 1.0, "B");
    let s = create_schedule(&[b.op().clone()]);
    let bl = s.cache_write(&b, "local").unwrap();
    let (bo, _bi) = s.stage(&b).split(&b.axis(0), 4).unwrap();
    s.stage(&bl).compute_at(&s.stage(&b), &bo).unwrap();
    let text = lower(&s, &[a, b], "f").unwrap().to_string();
    assert!(!text.contains("likely"), "{text}");
}

#[test]
fn prefetch_wraps_its_loop_for_inject_prefetch() {
    let (a, b) = scale(&[c(8), c(100)]);
    let s = create_schedule(&[b.op().clone()]);
    let st = s.stage(&b);
    st.prefetch(&a, &b.axis(0), 2).unwrap();
    let f = lower(&s, &[a.clone(), b.clone()], "f").unwrap();
    let StmtKind::AttrStmt(at) = f.body().kind() else {
        panic!("no prefetch scope around the row loop:\n{f}");
    };
    assert_eq!(at.attr_key.as_str(), "prefetch_scope");
    assert_eq!(at.value.as_int(), Some(2));
    assert!(matches!(at.body.kind(), StmtKind::For(_)), "{f}");
    // Bad requests are errors, not panics.
    assert!(st.prefetch(&a, &b.axis(0), 0).is_err(), "an offset of 0");
    let other = placeholder(&[c(4)], f32t(), "X");
    let o = compute(&[c(4)], |i| other.at_vars(i) + 1.0, "O");
    assert!(
        st.prefetch(&a, &o.axis(0), 1).is_err(),
        "a loop of another stage"
    );
}
