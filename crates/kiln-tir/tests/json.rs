//! JSON round trips through `kiln-ffi`'s reflection: every node kind is rebuilt, variables stay
//! shared, and the result is structurally equal (and prints the same).

use kiln_ffi::{reflection, Any, Map};
use kiln_tir::op::{call_packed, exp, if_then_else};
use kiln_tir::*;

/// A function that uses every expression and statement kind.
fn everything() -> PrimFunc {
    let f32 = DataType::float(32);
    let n = Var::size_var("n_elements", DataType::int(32));
    let a = Buffer::decl("A_input_buffer", f32, vec![n.to_expr()]);
    let b = Buffer::decl("B", f32, vec![n.to_expr(), PrimExpr::i32(4)]);
    let tmp = Buffer::decl_in("tmp_local_buffer", f32, vec![PrimExpr::i32(4)], "local");
    let (i, j) = (Var::int32("i_outer_inner"), Var::int32("j"));
    let t = Var::int32("t_let_variable");
    let x = a.load(vec![i.to_expr()]);
    let value = select(
        i.lt(4)
            .logical_and(j.ge(0).logical_or(logical_not(j.equal(2)))),
        exp(x.clone()) * 2.0,
        max(min(x.clone(), 1.0), -1.0),
    );
    let idx = floordiv(&i * 4 + &j, 4) + floormod(&j, 4) - truncdiv(&j, 2) + truncmod(&j, 3);
    let vec4 = PrimExpr::ramp_raw(PrimExpr::i32(0), PrimExpr::i32(1), 4);
    let tmp_store = Stmt::buffer_store_raw(
        tmp.clone(),
        PrimExpr::broadcast_raw(PrimExpr::f32(0.5), 4),
        vec![vec4],
    );
    let inner = Stmt::seq(vec![
        tmp_store,
        b.store(
            value + tmp.load(vec![j.to_expr()]),
            vec![i.to_expr(), PrimExpr::i32(1)],
        ),
        Stmt::let_stmt(
            &t,
            &i * 2,
            Stmt::if_then_else(
                t.not_equal(&j).logical_and(t.gt(1)),
                Stmt::evaluate(call_packed("my.packed_function", vec![t.to_expr(), idx])),
                Some(Stmt::evaluate(if_then_else(
                    t.le(3),
                    let_expr(&j, 1, j.cast(DataType::int(64))),
                    PrimExpr::i64(0),
                ))),
            ),
        ),
    ]);
    let annotations = Map::new(vec![(Any::from("pragma_unroll_explicit"), Any::from(1i64))]);
    let body = Stmt::try_for(
        i.clone(),
        0,
        &n,
        ForKind::Parallel,
        Stmt::allocate_buffer(&tmp, Stmt::for_loop(&j, 0, 4, ForKind::Vectorized, inner)),
        annotations,
    )
    .unwrap();
    let body = Stmt::attr(
        i.clone(),
        "pragma_parallel_launch_point",
        1,
        Stmt::assert(n.ge(0), "n must be non-negative", body),
    );
    let pa = Var::handle("A_handle");
    let pb = Var::handle("B_handle");
    let attrs = Map::new(vec![
        (Any::from("global_symbol"), Any::from("everything_kernel")),
        (Any::from("tir.noalias"), Any::from(true)),
    ]);
    PrimFunc::new(
        vec![pa.clone(), pb.clone(), n.clone()],
        body,
        DataType::int(32),
        vec![(pa, a), (pb, b)],
        attrs,
    )
    .unwrap()
}

#[test]
fn every_node_kind_survives_a_round_trip() {
    let f = everything();
    let text = to_json(&f).unwrap();
    let back: PrimFunc = from_json(&text).unwrap();
    assert!(!back.same_as(&f));
    assert_structural_equal(&f, &back);
    assert_eq!(f.to_string(), back.to_string());
    // Variables stay shared: the rebuilt loop variable is the one the body uses.
    let loop_var = match back.body().kind() {
        StmtKind::AttrStmt(a) => a.node.try_as::<Var>().unwrap(),
        _ => panic!("attr first"),
    };
    assert!(kiln_tir::visitor::stmt_uses_var(back.body(), &loop_var));
    assert!(back.params()[2].is_size_var());
    // Serializing again gives the same document.
    assert_eq!(to_json(&back).unwrap(), text);
}

#[test]
fn modules_round_trip() {
    let m = IRModule::new(vec![("everything".into(), everything())])
        .unwrap()
        .with_attr("target", "llvm -mcpu=znver4");
    let back: IRModule = from_json(&to_json(&m).unwrap()).unwrap();
    assert_structural_equal(&m, &back);
    assert!(back.lookup("everything").is_some());
}

#[test]
fn reflection_sees_node_fields_by_name() {
    let x = Var::int32("x");
    let e = &x + 1;
    let obj = e.object().clone().upcast();
    assert_eq!(reflection::field_names(&obj), vec!["dtype", "a", "b"]);
    assert_eq!(obj.type_key(), "tir.Add");
    let b = reflection::get_field_by_name(&obj, "b").unwrap();
    assert_eq!(b.try_as::<PrimExpr>().unwrap().as_int(), Some(1));
    // Nodes can be made field by field, as C and Python do.
    let made = reflection::create_object(
        "tir.Mul",
        vec![
            ("dtype".into(), Any::from(DataType::int(32))),
            ("a".into(), Any::from(x.clone())),
            ("b".into(), Any::from(PrimExpr::i32(3))),
        ],
    )
    .unwrap()
    .try_as::<PrimExpr>()
    .unwrap();
    assert_eq!(made.to_string(), "x * 3");
    // Lists read as ffi.Array, always the same object.
    let load =
        Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(4)]).load(vec![x.to_expr()]);
    let lobj = load.object().clone().upcast();
    let i1 = reflection::get_field_by_name(&lobj, "indices").unwrap();
    let i2 = reflection::get_field_by_name(&lobj, "indices").unwrap();
    assert_eq!(i1.view().type_name(), "ffi.Array");
    assert_eq!(i1.view().object_ptr(), i2.view().object_ptr());
    // A bare parent object is not an expression.
    let bare = reflection::create_object(
        "tir.PrimExpr",
        vec![("dtype".into(), Any::from(DataType::int(32)))],
    )
    .unwrap();
    assert!(bare.try_as::<PrimExpr>().is_err());
}
