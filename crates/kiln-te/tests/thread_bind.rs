//! Binding loops to GPU thread axes: the errors of `thread_axis` / `Stage::bind` and the
//! `thread_extent` attributes lowering emits.

use kiln_te::*;
use kiln_tir::{DataType, PrimExpr, Var};

/// `C = A + B` over a symbolic length `n`.
fn vadd() -> (Var, Tensor, Tensor, Tensor) {
    let n = Var::size_var("n", DataType::int(32));
    let shape = [n.to_expr()];
    let a = placeholder(&shape, DataType::float(32), "A");
    let b = placeholder(&shape, DataType::float(32), "B");
    let c = compute(&shape, |i| a.at_vars(i) + b.at_vars(i), "C");
    (n, a, b, c)
}

#[test]
fn unknown_tags_are_refused() {
    for tag in ["vthread", "threadIdx.w", "blockIdx", "warp.x", ""] {
        let e = thread_axis(tag).unwrap_err().to_string();
        assert!(e.contains("unknown thread tag"), "{tag}: {e}");
    }
    assert!(thread_axis("vthread")
        .unwrap_err()
        .to_string()
        .contains("virtual threads"));
    let t = thread_axis("blockIdx.z").unwrap();
    assert_eq!(t.thread_tag(), "blockIdx.z");
    assert_eq!(t.iter_type(), iter_type::THREAD_INDEX);
}

#[test]
fn binding_errors() {
    let (_, _, _, c) = vadd();
    let s = create_schedule(&[c.op().clone()]);
    let st = s.stage(&c);
    let (bx, tx) = st.split(&c.axis(0), 64).unwrap();
    let (tbx, ttx) = (
        thread_axis("blockIdx.x").unwrap(),
        thread_axis("threadIdx.x").unwrap(),
    );
    st.bind(&bx, &tbx).unwrap();
    let e = st.bind(&bx, &ttx).unwrap_err().to_string();
    assert!(e.contains("already bound to `blockIdx.x`"), "{e}");
    let e = st.bind(&tx, &tbx).unwrap_err().to_string();
    assert!(e.contains("`blockIdx.x` is bound to loop"), "{e}");
    // Not a leaf any more.
    let e = st.bind(&c.axis(0), &ttx).unwrap_err().to_string();
    assert!(e.contains("not a leaf axis"), "{e}");
    // A plain loop variable is not a thread axis.
    let e = st.bind(&tx, &c.axis(0)).unwrap_err().to_string();
    assert!(e.contains("not a thread axis"), "{e}");
    // A bound loop cannot also be vectorized.
    let e = st.vectorize(&bx).unwrap_err().to_string();
    assert!(e.contains("bound to `blockIdx.x`"), "{e}");

    // Reduction axes.
    let a = placeholder(
        &[PrimExpr::i32(16), PrimExpr::i32(16)],
        DataType::float(32),
        "A",
    );
    let k = reduce_axis_n(16, "k");
    let r = compute(
        &[PrimExpr::i32(16)],
        |i| sum(a.at(&[i[0].to_expr(), k.expr()]), std::slice::from_ref(&k)),
        "R",
    );
    let s = create_schedule(&[r.op().clone()]);
    let e = s.stage(&r).bind(&k, &tbx).unwrap_err().to_string();
    assert!(
        e.contains("reduction axis cannot be bound to a block index"),
        "{e}"
    );
    let e = s.stage(&r).bind(&k, &ttx).unwrap_err().to_string();
    assert!(e.contains("cross-thread reductions"), "{e}");
}

#[test]
fn bound_vector_add_lowers_to_thread_extents() {
    let (_, a, b, c) = vadd();
    let s = create_schedule(&[c.op().clone()]);
    let st = s.stage(&c);
    let (bx, tx) = st.split(&c.axis(0), 64).unwrap();
    st.bind(&bx, &thread_axis("blockIdx.x").unwrap()).unwrap();
    st.bind(&tx, &thread_axis("threadIdx.x").unwrap()).unwrap();
    let text = lower(&s, &[a, b, c], "vadd").unwrap().to_string();
    assert!(
        text.contains(r#"T.attr(blockIdx.x, "thread_extent", (n + 63) // 64)"#),
        "{text}"
    );
    assert!(
        text.contains(r#"T.attr(threadIdx.x, "thread_extent", 64)"#),
        "{text}"
    );
    assert!(!text.contains("for "), "no loop is left:\n{text}");
    assert!(text.contains("blockIdx.x * 64 + threadIdx.x < n"), "{text}");
}

#[test]
fn stages_bound_to_one_tag_share_its_variable() {
    let a = placeholder(&[PrimExpr::i32(256)], DataType::float(32), "A");
    let b = compute(&[PrimExpr::i32(256)], |i| a.at_vars(i) * 2.0, "B");
    let c = compute(&[PrimExpr::i32(256)], |i| b.at_vars(i) + 1.0, "C");
    let s = create_schedule(&[c.op().clone()]);
    for t in [&b, &c] {
        let st = s.stage(t);
        let (o, i) = st.split(&t.axis(0), 32).unwrap();
        st.bind(&o, &thread_axis("blockIdx.x").unwrap()).unwrap();
        st.bind(&i, &thread_axis("threadIdx.x").unwrap()).unwrap();
    }
    let f = lower(&s, &[a, c], "two").unwrap();
    let mut vars = Vec::new();
    kiln_tir::visitor::post_order_visit(f.body(), |n| {
        if let kiln_tir::visitor::IrRef::Stmt(st) = n {
            let kiln_tir::StmtKind::AttrStmt(at) = st.kind() else {
                return;
            };
            if let Ok(v) = at.node.try_as::<Var>() {
                vars.push(v);
            }
        }
    });
    assert_eq!(vars.len(), 4, "{f}");
    let names: Vec<&str> = vars.iter().map(|v| v.name()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "threadIdx.x").count(),
        2,
        "{names:?}"
    );
    let tx: Vec<&Var> = vars.iter().filter(|v| v.name() == "threadIdx.x").collect();
    assert!(tx[0] == tx[1], "one variable per tag");
}
