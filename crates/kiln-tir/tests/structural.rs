//! Structural equality and hashing: variables matched by definition, free variables by
//! identity (or paired with `map_free_vars`), hashes agreeing with equality.

use kiln_tir::*;

/// `for i in 0..n: C[i] = A[i] * 2 + i`, with fresh variables and buffers named as given.
fn scale_func(names: [&str; 4]) -> PrimFunc {
    let [a, c, i, n] = names;
    let n = Var::int32(n);
    let a = Buffer::decl(a, DataType::float(32), vec![n.to_expr()]);
    let c = Buffer::decl(c, DataType::float(32), vec![n.to_expr()]);
    let i = Var::int32(i);
    let value = a.load(vec![i.to_expr()]) * 2.0 + i.cast(DataType::float(32));
    let body = Stmt::for_loop(
        &i,
        0,
        &n,
        ForKind::Parallel,
        c.store(value, vec![i.to_expr()]),
    );
    let pa = Var::handle("pa");
    let pc = Var::handle("pc");
    PrimFunc::new(
        vec![pa.clone(), pc.clone(), n],
        body,
        DataType::void(),
        vec![(pa, a), (pc, c)],
        kiln_ffi::Map::new(vec![]),
    )
    .unwrap()
}

#[test]
fn functions_differing_only_in_names_are_equal_and_hash_alike() {
    let f = scale_func(["A", "C", "i", "n"]);
    let g = scale_func(["X", "Y", "k", "m"]);
    assert!(structural_equal(&f, &g));
    assert_eq!(structural_hash(&f), structural_hash(&g));
    assert_ne!(f.to_string(), g.to_string(), "the texts differ by names");
}

#[test]
fn different_structure_is_unequal() {
    let f = scale_func(["A", "C", "i", "n"]);
    let i = Var::int32("i");
    let (a, c) = (
        f.buffer_map().entries()[0].1.clone(),
        f.buffer_map().entries()[1].1.clone(),
    );
    let n = f.params()[2].clone();
    let other_body = Stmt::for_loop(
        &i,
        0,
        &n,
        ForKind::Serial,
        c.store(
            a.load(vec![i.to_expr()]) * 2.0 + i.cast(DataType::float(32)),
            vec![i.to_expr()],
        ),
    );
    let g = f.with_body(other_body);
    assert!(!structural_equal(&f, &g), "serial vs parallel");
    assert_ne!(structural_hash(&f), structural_hash(&g));
    let h = f.with_attr("global_symbol", "scale");
    assert!(!structural_equal(&f, &h), "attributes count");
}

#[test]
fn free_variables_are_compared_by_identity_unless_mapped() {
    let (x, y) = (Var::int32("x"), Var::int32("x"));
    let e1 = &x + 1;
    let e2 = &y + 1;
    assert!(!structural_equal(&e1, &e2));
    assert!(structural_equal_with(&e1, &e2, true));
    assert_eq!(
        structural_hash_with(&e1, true),
        structural_hash_with(&e2, true)
    );
    assert_ne!(structural_hash(&e1), structural_hash(&e2));
    // Mapping is one-to-one: x + x is not y + z.
    let z = Var::int32("z");
    assert!(!structural_equal_with(&(&x + &x), &(&y + &z), true));
    // dtypes must agree.
    let w = Var::new("w", DataType::int(64));
    assert!(!structural_equal_with(&x.to_expr(), &w.to_expr(), true));
}

#[test]
fn bound_variables_pair_positionally() {
    let a = Buffer::decl("A", DataType::int(32), vec![PrimExpr::i32(8)]);
    let (i, j) = (Var::int32("i"), Var::int32("j"));
    let loop_i = Stmt::for_loop(&i, 0, 8, ForKind::Serial, a.store(&i, vec![i.to_expr()]));
    let loop_j = Stmt::for_loop(&j, 0, 8, ForKind::Serial, a.store(&j, vec![j.to_expr()]));
    assert!(structural_equal(&loop_i, &loop_j));
    assert_eq!(structural_hash(&loop_i), structural_hash(&loop_j));
    // The loop variable used where the other side uses a constant: unequal.
    let loop_c = Stmt::for_loop(&j, 0, 8, ForKind::Serial, a.store(0, vec![j.to_expr()]));
    assert!(!structural_equal(&loop_i, &loop_c));
    // Let and let-statement variables.
    let (t, u) = (Var::int32("t"), Var::int32("u"));
    assert!(structural_equal(
        &let_expr(&t, 1, &t * 2),
        &let_expr(&u, 1, &u * 2)
    ));
    let s1 = Stmt::let_stmt(&t, 3, a.store(&t, vec![PrimExpr::i32(0)]));
    let s2 = Stmt::let_stmt(&u, 3, a.store(&u, vec![PrimExpr::i32(0)]));
    assert!(structural_equal(&s1, &s2));
    // A variable bound on one side and free on the other is not equal.
    let s3 = Stmt::let_stmt(&u, 3, a.store(&t, vec![PrimExpr::i32(0)]));
    assert!(!structural_equal(&s1, &s3));
}

#[test]
fn allocations_pair_their_buffers() {
    let mk = |name: &str| {
        let b = Buffer::decl_in(name, DataType::float(32), vec![PrimExpr::i32(4)], "local");
        let i = Var::int32("i");
        Stmt::allocate_buffer(
            &b,
            Stmt::for_loop(&i, 0, 4, ForKind::Unrolled, b.store(0.0, vec![i.to_expr()])),
        )
    };
    let (s1, s2) = (mk("T"), mk("U"));
    assert!(structural_equal(&s1, &s2));
    assert_eq!(structural_hash(&s1), structural_hash(&s2));
    let other_scope = {
        let b = Buffer::decl_in("T", DataType::float(32), vec![PrimExpr::i32(4)], "global");
        Stmt::allocate_buffer(&b, b.store(0.0, vec![PrimExpr::i32(0)]))
    };
    assert!(!structural_equal(&s1, &other_scope));
}

#[test]
fn values_in_attributes_and_annotations_compare_structurally() {
    let i = Var::int32("i");
    let ann = |v: i64| {
        kiln_ffi::Map::new(vec![(
            kiln_ffi::Any::from("pragma_unroll"),
            kiln_ffi::Any::from(v),
        )])
    };
    let mk =
        |v: i64| Stmt::try_for(i.clone(), 0, 4, ForKind::Serial, Stmt::no_op(), ann(v)).unwrap();
    assert!(structural_equal(&mk(1), &mk(1)));
    assert!(!structural_equal(&mk(1), &mk(2)));
    let n = Var::int32("n");
    let a1 = Stmt::attr(n.clone(), "thread_extent", 4, Stmt::no_op());
    let a2 = Stmt::attr(n.clone(), "thread_extent", 4, Stmt::no_op());
    let a3 = Stmt::attr(n, "thread_extent", 8, Stmt::no_op());
    assert!(structural_equal(&a1, &a2));
    assert!(!structural_equal(&a1, &a3));
}

#[test]
fn modules_compare_by_function_name() {
    let m1 = IRModule::new(vec![
        ("f".into(), scale_func(["A", "C", "i", "n"])),
        ("g".into(), scale_func(["A", "C", "i", "n"])),
    ])
    .unwrap();
    let m2 = IRModule::new(vec![
        ("g".into(), scale_func(["P", "Q", "r", "s"])),
        ("f".into(), scale_func(["A", "C", "i", "n"])),
    ])
    .unwrap();
    assert!(structural_equal(&m1, &m2));
    assert_eq!(structural_hash(&m1), structural_hash(&m2));
    let m3 = m1.with_function("h", scale_func(["A", "C", "i", "n"]));
    assert!(!structural_equal(&m1, &m3));
    assert!(IRModule::new(vec![
        ("f".into(), scale_func(["A", "C", "i", "n"])),
        ("f".into(), scale_func(["A", "C", "i", "n"])),
    ])
    .is_err());
}

#[test]
fn assert_structural_equal_shows_both_sides() {
    let x = Var::int32("x");
    let r = std::panic::catch_unwind(|| assert_structural_equal(&(&x + 1), &(&x + 2)));
    let msg = r.unwrap_err();
    let msg = msg.downcast_ref::<String>().unwrap();
    assert!(msg.contains("x + 1") && msg.contains("x + 2"), "{msg}");
}

#[test]
fn loads_of_distinct_buffers_at_one_index_are_not_equal() {
    // Free buffers compare by identity: `max(A[i], B[i])` must not simplify to `A[i]`.
    let i = Var::int32("i");
    let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(8)]);
    let b = Buffer::decl("B", DataType::float(32), vec![PrimExpr::i32(8)]);
    let (la, lb) = (a.load(vec![i.to_expr()]), b.load(vec![i.to_expr()]));
    assert!(!structural_equal(&la, &lb));
    assert!(structural_equal(&la, &a.load(vec![i.to_expr()])));
    assert!(
        structural_equal_with(&la, &lb, true),
        "paired when free variables may be mapped"
    );
    let m = arith::simplify(&max(la.clone(), lb.clone()));
    assert!(
        !structural_equal(&m, &la),
        "max(A[i], B[i]) simplified to {m}"
    );
}
