//! The whole default pipeline on a hand-built elementwise function.

use super::*;
use crate::visitor::{post_order_visit, IrRef};
use crate::*;

/// `C[i, j] = exp(A[i, j]) + T[j]` over `(n, 16)` with `i` parallel, `j` split by 4 and the
/// inner part vectorized, `T` a 16-element temporary filled first (as TE lowering emits).
fn elementwise() -> PrimFunc {
    let f32 = DataType::float(32);
    let n = Var::int32("n");
    let a = Buffer::decl("A", f32, vec![n.to_expr(), PrimExpr::i32(16)]);
    let c = Buffer::decl("C", f32, vec![n.to_expr(), PrimExpr::i32(16)]);
    let t = Buffer::decl("T", f32, vec![PrimExpr::i32(16)]);
    let (i, jo, ji, k) = (
        Var::int32("i"),
        Var::int32("j.outer"),
        Var::int32("j.inner"),
        Var::int32("k"),
    );
    let j = &jo * 4 + &ji;
    let fill = Stmt::for_loop(
        &k,
        0,
        16,
        ForKind::Serial,
        t.store(cast(f32, k.to_expr()), vec![k.to_expr()]),
    );
    let value = crate::op::exp(a.load(vec![i.to_expr(), j.clone()])) + t.load(vec![j.clone()]);
    let compute = Stmt::for_loop(
        &i,
        0,
        &n,
        ForKind::Parallel,
        Stmt::for_loop(
            &jo,
            0,
            4,
            ForKind::Serial,
            Stmt::for_loop(
                &ji,
                0,
                4,
                ForKind::Vectorized,
                c.store(value, vec![i.to_expr(), j]),
            ),
        ),
    );
    let body = Stmt::allocate_buffer(&t, Stmt::seq(vec![fill, compute]));
    PrimFunc::from_buffers("ew", &[a, c], body)
}

#[test]
fn default_pipeline_lowers_an_elementwise_kernel() {
    let m = IRModule::from_func("ew", elementwise());
    let printed = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let p2 = printed.clone();
    let ctx = PassContext::default().print_after(
        &["tir.VectorizeLoop"],
        Some(std::sync::Arc::new(
            move |name: &str, m: &dyn std::fmt::Display| {
                p2.lock().unwrap().push(format!("{name}\n{m}"))
            },
        )),
    );
    let out = lower_pipeline().run(m, &ctx).unwrap();
    assert_eq!(printed.lock().unwrap().len(), 1);
    let f = out.lookup("ew").unwrap();
    assert_eq!(f.params().len(), 4);
    assert!(f.buffer_map().is_empty());
    let (mut ramps, mut parallel, mut vector_loops, mut multi_dim, mut allocs) = (0, 0, 0, 0, 0);
    let mut vector_stores = 0;
    post_order_visit(f.body(), |n| match n {
        IrRef::Expr(e) => match e.kind() {
            ExprKind::Ramp { lanes, .. } => {
                assert_eq!(lanes, 4);
                ramps += 1;
            }
            ExprKind::BufferLoad { indices, .. } if indices.len() > 1 => multi_dim += 1,
            _ => {}
        },
        IrRef::Stmt(s) => match s.kind() {
            StmtKind::For(l) if l.kind == ForKind::Parallel => parallel += 1,
            StmtKind::For(l) if l.kind == ForKind::Vectorized => vector_loops += 1,
            StmtKind::BufferStore(st) if st.indices.len() > 1 => multi_dim += 1,
            StmtKind::BufferStore(st) if st.value.dtype() == DataType::float(32).with_lanes(4) => {
                vector_stores += 1
            }
            StmtKind::Allocate(_) => allocs += 1,
            _ => {}
        },
    });
    assert!(ramps >= 2, "{f}");
    assert_eq!(parallel, 1, "{f}");
    assert_eq!(vector_loops, 0, "{f}");
    assert_eq!(multi_dim, 0, "{f}");
    assert_eq!(allocs, 1, "64 bytes stay on the stack: {f}");
    assert_eq!(vector_stores, 1, "{f}");
    assert!(f.to_string().contains("T.ret(0)"), "{f}");
}

#[test]
fn opt_level_and_disabled_passes() {
    let m = IRModule::from_func("ew", elementwise());
    let ctx = PassContext::default().disable("tir.VectorizeLoop");
    let out = lower_pipeline().run(m.clone(), &ctx).unwrap();
    assert!(!out.to_string().contains("Ramp"), "{out}");
    // At opt level 0, LoopPartition (level 1) does not run; everything else does.
    let out = lower_pipeline()
        .run(m, &PassContext::with_opt_level(0))
        .unwrap();
    assert_eq!(out.lookup("ew").unwrap().params().len(), 4);
}
