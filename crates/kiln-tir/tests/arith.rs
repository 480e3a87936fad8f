//! The simplifier rule by rule: IR in, IR out, compared structurally.

use kiln_tir::arith::{can_prove, const_int_bound, simplify, POS_INF};
use kiln_tir::op::if_then_else;
use kiln_tir::*;

fn raw(op: BinOp, a: impl Into<Operand>, b: impl Into<Operand>) -> PrimExpr {
    let (a, b) = expr::operands(a, b).unwrap();
    PrimExpr::binary_raw(op, a, b)
}

fn vars() -> (Var, Var, Var) {
    (Var::int32("x"), Var::int32("y"), Var::int32("z"))
}

/// An analyzer with x in [0, 8), y in [0, 8), z unknown.
fn ranged(x: &Var, y: &Var) -> Analyzer {
    let mut an = Analyzer::new();
    an.bind(x, &Range::from_min_extent(0, 8));
    an.bind(y, &Range::from_min_extent(0, 8));
    an
}

#[track_caller]
fn check(an: &mut Analyzer, input: PrimExpr, expected: PrimExpr) {
    let out = an.simplify(&input);
    assert!(
        structural_equal(&out, &expected),
        "simplify({input})\n  gave     {out}\n  expected {expected}"
    );
}

#[test]
fn constants_fold_for_every_operator() {
    let mut an = Analyzer::new();
    let i = PrimExpr::i32;
    let cases = [
        (BinOp::Add, 7, 3, 10),
        (BinOp::Sub, 7, 3, 4),
        (BinOp::Mul, 7, 3, 21),
        (BinOp::Div, -7, 3, -2),
        (BinOp::Mod, -7, 3, -1),
        (BinOp::FloorDiv, -7, 3, -3),
        (BinOp::FloorMod, -7, 3, 2),
        (BinOp::Min, 7, 3, 3),
        (BinOp::Max, 7, 3, 7),
    ];
    for (op, a, b, want) in cases {
        check(&mut an, raw(op, i(a), i(b)), i(want));
    }
    for (op, want) in [
        (BinOp::Eq, false),
        (BinOp::Ne, true),
        (BinOp::Lt, false),
        (BinOp::Le, false),
        (BinOp::Gt, true),
        (BinOp::Ge, true),
    ] {
        check(&mut an, raw(op, i(7), i(3)), PrimExpr::bool(want));
    }
    let (t, f) = (PrimExpr::bool(true), PrimExpr::bool(false));
    check(&mut an, raw(BinOp::And, t.clone(), f.clone()), f.clone());
    check(&mut an, raw(BinOp::Or, t.clone(), f.clone()), t.clone());
    check(&mut an, PrimExpr::not_raw(t.clone()), f.clone());
    let (a, b) = (PrimExpr::f32(1.5), PrimExpr::f32(0.25));
    check(
        &mut an,
        raw(BinOp::Mul, a.clone(), b.clone()),
        PrimExpr::f32(0.375),
    );
    check(&mut an, raw(BinOp::Lt, a.clone(), b.clone()), f.clone());
    check(&mut an, raw(BinOp::Max, a, b), PrimExpr::f32(1.5));
    // Nested constants fold all the way up.
    let e = raw(
        BinOp::Mul,
        raw(BinOp::Add, i(2), i(3)),
        raw(BinOp::Sub, i(10), i(4)),
    );
    check(&mut an, e, i(30));
}

#[test]
fn casts_fold_and_merge() {
    let mut an = Analyzer::new();
    let cast_raw = |t: DataType, e: PrimExpr| PrimExpr::cast_raw(t, e);
    check(
        &mut an,
        cast_raw(DataType::float(32), PrimExpr::i32(3)),
        PrimExpr::f32(3.0),
    );
    check(
        &mut an,
        cast_raw(DataType::int(32), PrimExpr::f32(-3.7)),
        PrimExpr::i32(-3),
    );
    check(
        &mut an,
        cast_raw(DataType::int(8), PrimExpr::i32(200)),
        PrimExpr::const_int(DataType::int(8), -56),
    );
    check(
        &mut an,
        cast_raw(DataType::bool(), PrimExpr::i32(5)),
        PrimExpr::bool(true),
    );
    let x = Var::new("x", DataType::int(8));
    let inner = cast_raw(DataType::int(16), x.to_expr());
    check(
        &mut an,
        cast_raw(DataType::int(64), inner),
        cast_raw(DataType::int(64), x.to_expr()),
    );
    let y = Var::int32("y");
    check(
        &mut an,
        cast_raw(DataType::int(32), y.to_expr()),
        y.to_expr(),
    );
}

#[test]
fn linear_forms_combine_like_terms() {
    let (x, y, z) = vars();
    let mut an = Analyzer::new();
    check(&mut an, raw(BinOp::Sub, &x * 4 + &y, &x * 4), y.to_expr());
    check(&mut an, raw(BinOp::Add, &x * 2, &x * 3), &x * 5);
    check(&mut an, raw(BinOp::Sub, &x, &x), PrimExpr::i32(0));
    check(
        &mut an,
        raw(BinOp::Mul, raw(BinOp::Add, &x, 1), 4),
        raw(BinOp::Add, raw(BinOp::Mul, &x, 4), 4),
    );
    // (x + y) - (y + x) = 0 whatever the order.
    check(&mut an, raw(BinOp::Sub, &x + &y, &y + &x), PrimExpr::i32(0));
    // Constants collect at the end, terms keep their first order.
    check(
        &mut an,
        raw(BinOp::Add, raw(BinOp::Add, 3, &z), raw(BinOp::Sub, &y, 5)),
        raw(BinOp::Sub, raw(BinOp::Add, &z, &y), 2),
    );
    // Products of non-constants are atoms that combine too.
    let xy = raw(BinOp::Mul, &x, &y);
    check(
        &mut an,
        raw(BinOp::Add, xy.clone(), xy.clone()),
        raw(BinOp::Mul, xy, 2),
    );
    check(&mut an, raw(BinOp::Sub, 0, &x), raw(BinOp::Mul, &x, -1));
}

#[test]
fn floor_division_uses_bounds() {
    let (x, y, z) = vars();
    let mut an = ranged(&x, &y);
    // floordiv(x*8 + y, 8) = x and floormod(x*8 + y, 8) = y when 0 <= y < 8.
    check(&mut an, floordiv(&x * 8 + &y, 8), x.to_expr());
    check(&mut an, floormod(&x * 8 + &y, 8), y.to_expr());
    // Without the bound of z, only the multiple of 8 moves out.
    check(&mut an, floordiv(&x * 8 + &z, 8), &x + floordiv(&z, 8));
    check(&mut an, floormod(&x * 8 + &z, 8), floormod(&z, 8));
    // Constants: floordiv(y + 9, 8) is 1 + floordiv(y + 1, 8), which bounds decide.
    check(&mut an, floordiv(&y + 8, 8), PrimExpr::i32(1));
    check(&mut an, floormod(&y + 8, 8), y.to_expr());
    check(&mut an, floordiv(&y - 8, 8), PrimExpr::i32(-1));
    check(&mut an, floordiv(&x, 16), PrimExpr::i32(0));
    check(&mut an, floormod(&x, 16), x.to_expr());
    // Common factors cancel.
    check(&mut an, floordiv(&z * 4, 8), floordiv(&z, 2));
    check(
        &mut an,
        floormod(&z * 4, 8),
        raw(BinOp::Mul, floormod(&z, 2), 4),
    );
    check(
        &mut an,
        floordiv(&z * 6 + 12, 3),
        raw(BinOp::Add, raw(BinOp::Mul, &z, 2), 4),
    );
    // Nested divisions merge.
    check(&mut an, floordiv(floordiv(&z, 4), 8), floordiv(&z, 32));
    check(&mut an, floormod(floormod(&z, 16), 4), floormod(&z, 4));
    // floordiv(v, c)*c + floormod(v, c) = v.
    check(&mut an, floordiv(&z, 4) * 4 + floormod(&z, 4), z.to_expr());
    check(
        &mut an,
        floordiv(&z + 1, 3) * 6 + floormod(&z + 1, 3) * 2,
        raw(BinOp::Add, raw(BinOp::Mul, &z, 2), 2),
    );
    // Splitting a fused loop index and recombining it gives the index back.
    let fused = &x * 8 + &y;
    check(
        &mut an,
        floordiv(&fused, 8) * 8 + floormod(&fused, 8),
        fused.clone(),
    );
}

#[test]
fn truncating_division_follows_floor_rules_when_non_negative() {
    let (x, y, z) = vars();
    let mut an = ranged(&x, &y);
    check(&mut an, truncdiv(&x * 8 + &y, 8), x.to_expr());
    check(&mut an, truncmod(&x * 8 + &y, 8), y.to_expr());
    // z may be negative: only exact divisions simplify.
    check(&mut an, truncdiv(&z * 8, 8), z.to_expr());
    check(&mut an, truncmod(&z * 8, 4), PrimExpr::i32(0));
    check(&mut an, truncdiv(&z + 8, 8), raw(BinOp::Div, &z + 8, 8));
    // |dividend| < divisor: quotient 0, remainder the dividend, whatever its sign.
    let neg = raw(BinOp::Sub, &y, 7);
    check(&mut an, truncmod(neg.clone(), 8), &y - 7);
    check(&mut an, truncdiv(neg, 8), PrimExpr::i32(0));
    // Non-negative remainder keeps truncating nodes.
    check(
        &mut an,
        truncdiv(&x * 16 + &y * 2, 4),
        &x * 4 + truncdiv(&y, 2),
    );
}

#[test]
fn bounds_of_expressions() {
    let (x, y, z) = vars();
    let ranges = [
        (x.clone(), Range::from_min_extent(0, 8)),
        (y.clone(), Range::from_min_extent(-2, 4)),
    ];
    let b = const_int_bound(&(&x * 4 + &y), &ranges);
    assert_eq!((b.min, b.max), (-2, 29));
    let b = const_int_bound(&floormod(&z, 8), &ranges);
    assert_eq!((b.min, b.max), (0, 7));
    let b = const_int_bound(&min(&x, 5), &ranges);
    assert_eq!((b.min, b.max), (0, 5));
    let b = const_int_bound(&select(z.lt(0), &x, &y), &ranges);
    assert_eq!((b.min, b.max), (-2, 7));
    let n = Var::size_var("n", DataType::int(64));
    let b = const_int_bound(&(n.to_expr() + 1), &[]);
    assert_eq!((b.min, b.max), (1, POS_INF));
    // A range whose extent is symbolic but bounded.
    let mut an = Analyzer::new();
    an.bind(&y, &Range::from_min_extent(0, 4));
    an.bind(&x, &Range::from_min_extent(&y, 10));
    let b = an.const_int_bound(&x.to_expr());
    assert_eq!((b.min, b.max), (0, 12));
}

#[test]
fn proofs_with_loop_ranges() {
    let (i, j, n) = vars();
    let ranges = [
        (i.clone(), Range::from_min_extent(0, 16)),
        (j.clone(), Range::from_min_extent(0, 4)),
    ];
    assert!(can_prove(&(&i * 4 + &j).lt(64), &ranges));
    assert!(!can_prove(&(&i * 4 + &j).lt(63), &ranges));
    assert!(can_prove(&(&i * 4 + &j).ge(0), &ranges));
    assert!(can_prove(&floordiv(&i * 4 + &j, 4).equal(&i), &ranges));
    assert!(can_prove(&(&i + &n).gt(&n - 1), &ranges), "n cancels");
    assert!(!can_prove(&i.lt(&n), &ranges));
    let mut an = Analyzer::new();
    assert!(an.can_prove_equal(&(&n * 3 - &n), &(&n * 2)));
    // Conditions in scope narrow ranges.
    an.with_constraint(&n.lt(10).logical_and(n.ge(2)), |an| {
        assert!(an.can_prove(&n.lt(11)));
        assert!(an.can_prove(&(&n * 2).ge(4)));
        assert!(an.can_prove(&n.lt(10)), "the fact itself");
    });
    assert!(!an.can_prove(&n.lt(11)), "forgotten after the scope");
}

#[test]
fn min_and_max_choose_with_bounds() {
    let (x, y, z) = vars();
    let mut an = ranged(&x, &y);
    check(&mut an, raw(BinOp::Min, &x, 8), x.to_expr());
    check(&mut an, raw(BinOp::Max, &x, 8), PrimExpr::i32(8));
    check(&mut an, raw(BinOp::Min, &z + 1, &z), z.to_expr());
    check(&mut an, raw(BinOp::Max, &z + 1, &z), &z + 1);
    check(&mut an, raw(BinOp::Min, &z, &z), z.to_expr());
    check(&mut an, raw(BinOp::Min, &x * 2, &x + 7), &x * 2);
    // Undecided: constant second, nested constants merged.
    check(&mut an, raw(BinOp::Min, 3, &z), raw(BinOp::Min, &z, 3));
    check(
        &mut an,
        raw(BinOp::Min, raw(BinOp::Min, &z, 5), 3),
        raw(BinOp::Min, &z, 3),
    );
    let f = Var::new("f", DataType::float(32));
    check(&mut an, raw(BinOp::Max, &f, &f), f.to_expr());
}

#[test]
fn comparisons_decide_or_normalize() {
    let (x, y, z) = vars();
    let mut an = ranged(&x, &y);
    check(&mut an, raw(BinOp::Lt, &x, 8), PrimExpr::bool(true));
    check(&mut an, raw(BinOp::Ge, &x, 8), PrimExpr::bool(false));
    check(
        &mut an,
        raw(BinOp::Eq, &x * 2 + 1, &y * 2),
        PrimExpr::bool(false),
    );
    check(&mut an, raw(BinOp::Le, &z, &z), PrimExpr::bool(true));
    // Constants move right, common terms cancel, factors divide out.
    check(&mut an, raw(BinOp::Lt, &z + 3, 10), raw(BinOp::Lt, &z, 7));
    check(
        &mut an,
        raw(BinOp::Lt, &z + &x, &x + 5),
        raw(BinOp::Lt, &z, 5),
    );
    check(&mut an, raw(BinOp::Lt, 5, &z), raw(BinOp::Gt, &z, 5));
    check(&mut an, raw(BinOp::Lt, &z * 4, 10), raw(BinOp::Lt, &z, 3));
    check(&mut an, raw(BinOp::Le, &z * 4, 10), raw(BinOp::Le, &z, 2));
    check(&mut an, raw(BinOp::Eq, &z * 4, 10), PrimExpr::bool(false));
    check(&mut an, raw(BinOp::Eq, &z * 4, 8), raw(BinOp::Eq, &z, 2));
}

#[test]
fn logic_folds() {
    let (x, _, z) = vars();
    let mut an = Analyzer::new();
    let c = z.lt(4);
    let t = PrimExpr::bool(true);
    let f = PrimExpr::bool(false);
    check(&mut an, raw(BinOp::And, t.clone(), c.clone()), c.clone());
    check(&mut an, raw(BinOp::And, c.clone(), f.clone()), f.clone());
    check(&mut an, raw(BinOp::Or, c.clone(), t.clone()), t.clone());
    check(&mut an, raw(BinOp::Or, f.clone(), c.clone()), c.clone());
    check(&mut an, raw(BinOp::And, c.clone(), c.clone()), c.clone());
    check(
        &mut an,
        raw(BinOp::And, c.clone(), PrimExpr::not_raw(c.clone())),
        f.clone(),
    );
    check(&mut an, raw(BinOp::Or, c.clone(), z.ge(4)), t.clone());
    check(
        &mut an,
        PrimExpr::not_raw(PrimExpr::not_raw(c.clone())),
        c.clone(),
    );
    check(&mut an, PrimExpr::not_raw(c.clone()), raw(BinOp::Ge, &z, 4));
    check(&mut an, raw(BinOp::And, z.lt(4), z.lt(9)), z.lt(4));
    check(&mut an, raw(BinOp::Or, z.lt(4), z.lt(9)), z.lt(9));
    check(&mut an, raw(BinOp::And, z.lt(4), z.gt(6)), f.clone());
    let both = raw(BinOp::And, z.ge(0), x.lt(3));
    check(&mut an, both.clone(), both);
}

#[test]
fn selects_and_conditionals_with_known_conditions() {
    let (x, y, z) = vars();
    let mut an = ranged(&x, &y);
    check(
        &mut an,
        PrimExpr::select_raw(x.lt(8), &z + 1 - 1, y.to_expr()),
        z.to_expr(),
    );
    check(
        &mut an,
        PrimExpr::select_raw(z.lt(2), y.to_expr(), &y + 0),
        y.to_expr(),
    );
    // `not` of a float comparison stays (NaN), so the select swaps its values instead.
    let f = Var::new("f", DataType::float(32));
    check(
        &mut an,
        PrimExpr::select_raw(PrimExpr::not_raw(f.lt(2.0)), x.to_expr(), y.to_expr()),
        PrimExpr::select_raw(f.lt(2.0), y.to_expr(), x.to_expr()),
    );
    let ite = PrimExpr::call(
        DataType::int(32),
        "tir.if_then_else",
        vec![x.ge(0), z.to_expr(), y.to_expr()],
    );
    check(&mut an, ite, z.to_expr());
    check(&mut an, if_then_else(z.lt(1), &x, &x), x.to_expr());
    let likely = PrimExpr::call(DataType::bool(), "tir.likely", vec![x.lt(100)]);
    check(&mut an, likely, PrimExpr::bool(true));
}

#[test]
fn lets_inline_constants_and_drop_unused() {
    let (x, _, z) = vars();
    let t = Var::int32("t");
    let mut an = Analyzer::new();
    check(&mut an, let_expr(&t, 3, &t * 2 + &z), &z + 6);
    check(&mut an, let_expr(&t, &z * &z, &x + 1), &x + 1);
    let kept = let_expr(&t, &z * &z, &t + &t);
    check(
        &mut an,
        kept,
        PrimExpr::let_raw(t.clone(), raw(BinOp::Mul, &z, &z), raw(BinOp::Mul, &t, 2)),
    );
}

#[test]
fn vector_ramps_and_broadcasts() {
    let (x, y, _) = vars();
    let mut an = ranged(&x, &y);
    let ramp = |b: PrimExpr, s: i64| PrimExpr::ramp_raw(b, PrimExpr::i32(s), 4);
    let bc = |v: PrimExpr| PrimExpr::broadcast_raw(v, 4);
    check(
        &mut an,
        raw(BinOp::Add, ramp(x.to_expr(), 1), bc(y.to_expr())),
        ramp(&x + &y, 1),
    );
    check(
        &mut an,
        raw(BinOp::Mul, ramp(x.to_expr(), 1), bc(PrimExpr::i32(2))),
        ramp(&x * 2, 2),
    );
    check(
        &mut an,
        raw(BinOp::Add, bc(x.to_expr()), bc(PrimExpr::i32(1))),
        bc(&x + 1),
    );
    check(
        &mut an,
        raw(BinOp::Sub, ramp(x.to_expr(), 3), ramp(x.to_expr(), 3)),
        bc(PrimExpr::i32(0)),
    );
    // floordiv(ramp(x*8, 1, 4), 8) is x in every lane; floormod keeps the ramp.
    check(
        &mut an,
        raw(BinOp::FloorDiv, ramp(&x * 8, 1), bc(PrimExpr::i32(8))),
        bc(x.to_expr()),
    );
    check(
        &mut an,
        raw(BinOp::FloorMod, ramp(&x * 8 + 4, 1), bc(PrimExpr::i32(8))),
        ramp(PrimExpr::i32(4), 1),
    );
    // Lanes crossing a multiple of 8 stay as they are.
    let crossing = raw(BinOp::FloorDiv, ramp(&x * 8 + 6, 1), bc(PrimExpr::i32(8)));
    check(&mut an, crossing.clone(), crossing);
}

#[test]
fn simplify_returns_the_same_object_when_nothing_changes() {
    let (x, y, _) = vars();
    let e = &x * 4 + &y;
    assert!(simplify(&e).same_as(&e));
    let c = x.lt(&y);
    assert!(simplify(&c).same_as(&c));
}

#[test]
fn statements_simplify_with_scopes() {
    let (i, n, _) = vars();
    let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(16)]);
    // for i in 0..16: if i < 16: A[i] = 1 else A[0] = 0  ->  the branch goes.
    let body = Stmt::for_loop(
        &i,
        0,
        16,
        ForKind::Serial,
        Stmt::if_then_else(
            raw(BinOp::Lt, &i, 16),
            a.store(1.0, vec![i.to_expr()]),
            Some(a.store(0.0, vec![PrimExpr::i32(0)])),
        ),
    );
    let out = Analyzer::new().simplify_stmt(&body);
    let expected = Stmt::for_loop(&i, 0, 16, ForKind::Serial, a.store(1.0, vec![i.to_expr()]));
    assert_structural_equal(&out, &expected);
    // An assert that holds disappears; a let of a variable is substituted.
    let m = Var::int32("m");
    let s = Stmt::let_stmt(
        &m,
        &n,
        Stmt::assert(
            raw(BinOp::Eq, &m, &n),
            "m is n",
            a.store(2.0, vec![&m - &n]),
        ),
    );
    let out = Analyzer::new().simplify_stmt(&s);
    assert_structural_equal(&out, &a.store(2.0, vec![PrimExpr::i32(0)]));
    // A false condition without else becomes a no-op.
    let s = Stmt::if_then_else(
        PrimExpr::bool(false),
        a.store(1.0, vec![PrimExpr::i32(0)]),
        None,
    );
    assert!(Analyzer::new().simplify_stmt(&s).is_no_op());
}
