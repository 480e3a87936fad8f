//! VectorizeLoop on hand-built loops.

use super::*;
use crate::*;

fn loop_kind(s: &Stmt) -> ForKind {
    match s.kind() {
        StmtKind::For(f) => f.kind,
        _ => panic!("not a loop: {s}"),
    }
}

#[test]
fn elementwise_becomes_vector_code() {
    let f32 = DataType::float(32);
    let a = Buffer::decl("A", f32, vec![PrimExpr::i32(64)]);
    let c = Buffer::decl("C", f32, vec![PrimExpr::i32(64)]);
    let (io, ii) = (Var::int32("io"), Var::int32("ii"));
    let x = Var::new("x", f32);
    let idx = &io * 4 + &ii;
    let body = Stmt::for_loop(
        &ii,
        0,
        4,
        ForKind::Vectorized,
        c.store(a.load(vec![idx.clone()]) * &x + 1.0, vec![idx]),
    );
    let out = vectorize_stmt(&body, true);
    let ramp = PrimExpr::ramp_raw(
        PrimExpr::binary_raw(BinOp::Add, &io * 4, PrimExpr::i32(0)),
        PrimExpr::i32(1),
        4,
    );
    let load = PrimExpr::buffer_load_raw(a.clone(), vec![ramp.clone()]);
    let value = PrimExpr::binary_raw(
        BinOp::Add,
        PrimExpr::binary_raw(BinOp::Mul, load, PrimExpr::broadcast_raw(x.to_expr(), 4)),
        PrimExpr::broadcast_raw(PrimExpr::f32(1.0), 4),
    );
    let expected = Stmt::buffer_store_raw(c.clone(), value, vec![ramp]);
    assert_structural_equal(&out, &expected);
}

#[test]
fn falls_back_to_serial() {
    let f32 = DataType::float(32);
    let a = Buffer::decl("A", f32, vec![PrimExpr::i32(64)]);
    let (i, j) = (Var::int32("i"), Var::int32("j"));
    // A condition that varies across lanes, with an else branch.
    let cond = Stmt::for_loop(
        &i,
        0,
        4,
        ForKind::Vectorized,
        Stmt::if_then_else(
            i.lt(2),
            a.store(1.0, vec![i.to_expr()]),
            Some(a.store(2.0, vec![i.to_expr()])),
        ),
    );
    assert_eq!(loop_kind(&vectorize_stmt(&cond, true)), ForKind::Serial);
    // A per-lane choice whose side gathers (a load at lane-scattered indices).
    let b = Buffer::decl("B", f32, vec![PrimExpr::i32(64)]);
    let gather = Stmt::for_loop(
        &i,
        0,
        4,
        ForKind::Vectorized,
        b.store(
            crate::op::if_then_else(i.lt(2), a.load(vec![&i * &i]), PrimExpr::f32(0.0)),
            vec![i.to_expr()],
        ),
    );
    assert_eq!(loop_kind(&vectorize_stmt(&gather, true)), ForKind::Serial);
    // An inner loop.
    let inner = Stmt::for_loop(
        &i,
        0,
        4,
        ForKind::Vectorized,
        Stmt::for_loop(&j, 0, 2, ForKind::Serial, a.store(1.0, vec![&i * 2 + &j])),
    );
    assert_eq!(loop_kind(&vectorize_stmt(&inner, true)), ForKind::Serial);
    // A store that does not depend on the loop variable (a reduction into one place).
    let red = Stmt::for_loop(
        &i,
        0,
        4,
        ForKind::Vectorized,
        a.store(
            a.load(vec![PrimExpr::i32(0)]) + a.load(vec![&i + 1]),
            vec![PrimExpr::i32(0)],
        ),
    );
    assert_eq!(loop_kind(&vectorize_stmt(&red, true)), ForKind::Serial);
    // Disabled: serial.
    let ok = Stmt::for_loop(
        &i,
        0,
        4,
        ForKind::Vectorized,
        a.store(1.0, vec![i.to_expr()]),
    );
    assert_eq!(loop_kind(&vectorize_stmt(&ok, false)), ForKind::Serial);
    // Scalar condition and math intrinsic: vectorized.
    let n = Var::int32("n");
    let good = Stmt::for_loop(
        &i,
        0,
        8,
        ForKind::Vectorized,
        Stmt::if_then_else(
            n.lt(3),
            a.store(crate::op::exp(a.load(vec![i.to_expr()])), vec![i.to_expr()]),
            None,
        ),
    );
    let out = vectorize_stmt(&good, true);
    assert!(matches!(out.kind(), StmtKind::IfThenElse(_)), "{out}");
    assert!(out.to_string().contains("T.exp"), "{out}");
    // `if_then_else` with a lane-invariant condition (a padding row): one choice of
    // vectors (a per-lane one: `per_lane_choices_become_masked_vector_code`).
    let pick = |cond: PrimExpr| {
        Stmt::for_loop(
            &i,
            0,
            8,
            ForKind::Vectorized,
            a.store(
                crate::op::if_then_else(cond, a.load(vec![&i + &n]), PrimExpr::f32(0.0)),
                vec![i.to_expr()],
            ),
        )
    };
    let out = vectorize_stmt(&pick(n.ge(1)), true);
    assert!(!matches!(out.kind(), StmtKind::For(_)), "{out}");
    let text = out.to_string();
    assert!(
        text.contains("T.if_then_else(n >= 1, A[T.Ramp(0 + n, 1, 8)]"),
        "{text}"
    );
}

#[test]
fn per_lane_choices_become_masked_vector_code() {
    let f32 = DataType::float(32);
    let a = Buffer::decl("A", f32, vec![PrimExpr::i32(64)]);
    let b = Buffer::decl("B", f32, vec![PrimExpr::i32(64)]);
    let i = Var::int32("i");
    // A padded row: the interior read (stride 1 and 2), zeros at the edges.
    for stride in [1, 2] {
        let src = &i * stride - 1;
        let body = b.store(
            crate::op::if_then_else(src.ge(0), a.load(vec![src.clone()]), PrimExpr::f32(0.0)),
            vec![i.to_expr()],
        );
        let out = vectorize_stmt(&Stmt::for_loop(&i, 0, 8, ForKind::Vectorized, body), true);
        let StmtKind::BufferStore(st) = out.kind() else {
            panic!("not vector code: {out}");
        };
        let ExprKind::Call { op, args } = st.value.kind() else {
            panic!("not an if_then_else: {out}");
        };
        assert_eq!(op, crate::op::IF_THEN_ELSE);
        assert_eq!(args[0].dtype().lanes(), 8, "{out}");
        let ExprKind::BufferLoad { indices, .. } = args[1].kind() else {
            panic!("{out}");
        };
        assert!(
            matches!(indices[0].kind(), ExprKind::Ramp { stride: s, .. } if s.is_const_int(stride)),
            "{out}"
        );
    }
    // A store under a per-lane condition: predicated.
    let n = Var::int32("n");
    let guarded = Stmt::for_loop(
        &i,
        0,
        8,
        ForKind::Vectorized,
        Stmt::if_then_else(
            crate::op::likely(i.lt(&n)),
            b.store(a.load(vec![i.to_expr()]) * 2.0, vec![i.to_expr()]),
            None,
        ),
    );
    let out = vectorize_stmt(&guarded, true);
    let StmtKind::IfThenElse(p) = out.kind() else {
        panic!("not predicated: {out}");
    };
    assert_eq!(p.condition.dtype().lanes(), 8, "{out}");
    assert!(
        matches!(p.then_case.kind(), StmtKind::BufferStore(_)),
        "{out}"
    );
    // An accumulation of a split's last tile, a weight broadcast from one address:
    // predicated under lane 0's guard (the scalar loop read it when some lane held).
    let w = Buffer::decl("W", f32, vec![PrimExpr::i32(4)]);
    let k = Var::int32("k");
    let acc = Stmt::for_loop(
        &i,
        0,
        8,
        ForKind::Vectorized,
        Stmt::if_then_else(
            crate::op::likely((&k * 8 + &i).lt(13)),
            b.store(
                b.load(vec![i.to_expr()]) + a.load(vec![&k * 8 + &i]) * w.load(vec![k.to_expr()]),
                vec![i.to_expr()],
            ),
            None,
        ),
    );
    let out = vectorize_stmt(&acc, true);
    let StmtKind::IfThenElse(outer) = out.kind() else {
        panic!("not guarded: {out}");
    };
    assert_eq!(outer.condition.dtype().lanes(), 1, "{out}");
    let StmtKind::IfThenElse(inner) = outer.then_case.kind() else {
        panic!("not predicated: {out}");
    };
    assert_eq!(inner.condition.dtype().lanes(), 8, "{out}");
    // A condition whose lanes do not hold in order has no such guard: scalar.
    let reversed = Stmt::for_loop(
        &i,
        0,
        8,
        ForKind::Vectorized,
        Stmt::if_then_else(
            crate::op::likely((PrimExpr::i32(7) - &i).lt(&n)),
            b.store(w.load(vec![k.to_expr()]), vec![i.to_expr()]),
            None,
        ),
    );
    assert!(matches!(
        vectorize_stmt(&reversed, true).kind(),
        StmtKind::For(_)
    ));
}

#[test]
fn conjunction_of_a_uniform_and_a_per_lane_guard_stays_vector_code() {
    // A last tile of both rows and columns: `likely(r < 26) && likely(k * 8 + i < 13)` (the
    // row alike in every lane, the column per lane) is `if r < 26 { if mask { .. } }`.
    let f32 = DataType::float(32);
    let a = Buffer::decl("A", f32, vec![PrimExpr::i32(16)]);
    let b = Buffer::decl("B", f32, vec![PrimExpr::i32(8)]);
    let (i, k, r) = (Var::int32("i"), Var::int32("k"), Var::int32("r"));
    let row = crate::op::likely(r.lt(26));
    let col = crate::op::likely((&k * 8 + &i).lt(13));
    let store = b.store(a.load(vec![&k * 8 + &i]) * 2.0, vec![i.to_expr()]);
    for cond in [row.logical_and(col.clone()), col.logical_and(row.clone())] {
        let body = Stmt::for_loop(
            &i,
            0,
            8,
            ForKind::Vectorized,
            Stmt::if_then_else(cond, store.clone(), None),
        );
        let out = vectorize_stmt(&body, true);
        let StmtKind::IfThenElse(outer) = out.kind() else {
            panic!("not guarded: {out}");
        };
        assert_eq!(outer.condition.dtype().lanes(), 1, "{out}");
        let StmtKind::IfThenElse(inner) = outer.then_case.kind() else {
            panic!("not predicated: {out}");
        };
        assert_eq!(inner.condition.dtype().lanes(), 8, "{out}");
        assert!(
            matches!(inner.then_case.kind(), StmtKind::BufferStore(_)),
            "{out}"
        );
    }
    // Two per-lane conditions: no lane-uniform part to take outside, a serial loop.
    let both = crate::op::likely(i.lt(5)).logical_and(col);
    let body = Stmt::for_loop(
        &i,
        0,
        8,
        ForKind::Vectorized,
        Stmt::if_then_else(both, store, None),
    );
    assert!(matches!(
        vectorize_stmt(&body, true).kind(),
        StmtKind::For(_)
    ));
}

#[test]
fn guard_of_whole_vectors_is_one_branch() {
    // `likely(io * 8 + ii < 48)`: all lanes of a vector agree, so it stays a scalar `if`.
    let f32 = DataType::float(32);
    let a = Buffer::decl("A", f32, vec![PrimExpr::i32(64)]);
    let (io, ii) = (Var::int32("io"), Var::int32("ii"));
    let idx = &io * 8 + &ii;
    let body = Stmt::for_loop(
        &ii,
        0,
        8,
        ForKind::Vectorized,
        Stmt::if_then_else(
            crate::op::likely(idx.lt(48)),
            a.store(1.0, vec![idx.clone()]),
            None,
        ),
    );
    let out = vectorize_stmt(&body, true);
    let StmtKind::IfThenElse(p) = out.kind() else {
        panic!("{out}");
    };
    assert_eq!(p.condition.dtype().lanes(), 1, "{out}");
    // Not whole vectors (49): a per-lane predicate.
    let body = Stmt::for_loop(
        &ii,
        0,
        8,
        ForKind::Vectorized,
        Stmt::if_then_else(crate::op::likely(idx.lt(49)), a.store(1.0, vec![idx]), None),
    );
    let out = vectorize_stmt(&body, true);
    let StmtKind::IfThenElse(p) = out.kind() else {
        panic!("not predicated: {out}");
    };
    assert_eq!(p.condition.dtype().lanes(), 8);
}

#[test]
fn lanes_of_vector_code_as_scalars() {
    let f32 = DataType::float(32);
    let a = Buffer::decl("A", f32, vec![PrimExpr::i32(64)]);
    let (x, k) = (Var::int32("x"), Var::int32("k"));
    let ramp = PrimExpr::ramp_raw(x.to_expr(), PrimExpr::i32(2), 4);
    let e = PrimExpr::buffer_load_raw(a.clone(), vec![ramp]);
    let l = lane(&e, &k.to_expr()).unwrap();
    assert_eq!(l.dtype().lanes(), 1);
    let text = l.to_string();
    assert!(text.contains("A[x + T.Cast(\"int32\", k) * 2]"), "{text}");
}

#[test]
fn choices_at_whole_vector_offsets_are_one_branch() {
    // A concatenation along its innermost axis: `j < 16` holds for all lanes of a vector
    // starting at a multiple of 8 or for none, so it is one scalar branch of plain vector
    // loads; at an offset of 12 it differs across lanes, a per-lane (masked) choice.
    let f32 = DataType::float(32);
    let a = Buffer::decl("A", f32, vec![PrimExpr::i32(64)]);
    let b = Buffer::decl("B", f32, vec![PrimExpr::i32(64)]);
    let c = Buffer::decl("C", f32, vec![PrimExpr::i32(64)]);
    let (io, ii) = (Var::int32("io"), Var::int32("ii"));
    let j = &io * 8 + &ii;
    for (offset, uniform) in [(16, true), (12, false)] {
        let value = crate::op::if_then_else(
            j.lt(offset),
            a.load(vec![j.clone()]),
            b.load(vec![&j - offset]),
        );
        let body = Stmt::for_loop(
            &ii,
            0,
            8,
            ForKind::Vectorized,
            c.store(value, vec![j.clone()]),
        );
        let out = vectorize_stmt(&body, true);
        let StmtKind::BufferStore(st) = out.kind() else {
            panic!("not vector code: {out}");
        };
        let ExprKind::Call { op, args } = st.value.kind() else {
            panic!("not an if_then_else: {out}");
        };
        assert_eq!(op, crate::op::IF_THEN_ELSE, "{out}");
        let lanes = if uniform { 1 } else { 8 };
        assert_eq!(args[0].dtype().lanes(), lanes, "{out}");
        for side in &args[1..] {
            let ExprKind::BufferLoad { indices, .. } = side.kind() else {
                panic!("{out}");
            };
            assert!(
                matches!(indices[0].kind(), ExprKind::Ramp { stride, .. } if stride.is_const_int(1)),
                "{out}"
            );
        }
    }
}
