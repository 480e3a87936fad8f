//! The text form of statements, functions and modules.

use kiln_ffi::{Any, Map};
use kiln_tir::op::{call_extern, exp};
use kiln_tir::*;

#[test]
fn a_lowered_function_reads_like_tvmscript() {
    let f32 = DataType::float(32);
    let n = Var::int32("n");
    let a = Buffer::decl("A", f32, vec![n.to_expr()]);
    let b = Buffer::decl("B", f32, vec![n.to_expr()]);
    let tmp = Buffer::decl_in("tmp", f32, vec![PrimExpr::i32(4)], "local");
    let (io, ii) = (Var::int32("i_outer"), Var::int32("i_inner"));
    let i = &io * 4 + &ii;
    let body = Stmt::for_loop(
        &io,
        0,
        floordiv(&n + 3, 4),
        ForKind::Parallel,
        Stmt::allocate_buffer(
            &tmp,
            Stmt::seq(vec![
                Stmt::for_loop(
                    &ii,
                    0,
                    4,
                    ForKind::Unrolled,
                    Stmt::if_then_else(
                        i.lt(&n),
                        tmp.store(exp(a.load(vec![i.clone()])), vec![ii.to_expr()]),
                        Some(tmp.store(0.0, vec![ii.to_expr()])),
                    ),
                ),
                Stmt::for_loop(
                    &ii,
                    0,
                    4,
                    ForKind::Vectorized,
                    b.store(tmp.load(vec![ii.to_expr()]) * 2.0, vec![i.clone()]),
                ),
            ]),
        ),
    );
    let pa = Var::handle("A");
    let pb = Var::handle("B");
    let attrs = Map::new(vec![(Any::from("global_symbol"), Any::from("exp2x"))]);
    let f = PrimFunc::new(
        vec![pa.clone(), pb.clone(), n.clone()],
        body,
        DataType::void(),
        vec![(pa, a), (pb, b)],
        attrs,
    )
    .unwrap();
    let expected = r#"@T.prim_func
def exp2x(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32"), n: T.int32):
    T.func_attr({"global_symbol": "exp2x"})
    for i_outer in T.parallel(0, (n + 3) // 4):
        tmp = T.decl_buffer((4,), "float32", scope="local")
        for i_inner in T.unroll(0, 4):
            if i_outer * 4 + i_inner < n:
                tmp[i_inner] = T.exp(A[i_outer * 4 + i_inner])
            else:
                tmp[i_inner] = T.float32(0.0)
        for i_inner in T.vectorized(0, 4):
            B[i_outer * 4 + i_inner] = tmp[i_inner] * T.float32(2.0)"#;
    assert_eq!(f.to_string(), expected);
}

#[test]
fn lets_attributes_asserts_and_modules() {
    let x = Var::int32("x");
    let c = Buffer::decl("C", DataType::int64(), vec![PrimExpr::i32(2)]);
    let body = Stmt::attr(
        x.clone(),
        "pragma_note",
        PrimExpr::string("hello"),
        Stmt::let_stmt(
            &x,
            7,
            Stmt::assert(
                x.gt(0),
                "x must be positive",
                Stmt::seq(vec![
                    c.store(x.cast(DataType::int(64)), vec![PrimExpr::i32(0)]),
                    Stmt::evaluate(call_extern(
                        DataType::int(32),
                        "puts",
                        vec![PrimExpr::string("done")],
                    )),
                ]),
            ),
        ),
    );
    let expected = r#"with T.attr(x, "pragma_note", "hello"):
    x: T.int32 = 7
    assert x > 0, "x must be positive"
    C[0] = T.Cast("int64", x)
    T.evaluate(T.call_extern("int32", "puts", "done"))"#;
    assert_eq!(body.to_string(), expected);
    let f = PrimFunc::from_buffers("write", &[c], body);
    let m = IRModule::from_func("write", f);
    let text = m.to_string();
    assert!(text.starts_with("@I.ir_module\nclass Module:\n    @T.prim_func\n    def write(C: T.Buffer((2,), \"int64\")):"), "{text}");
    assert_eq!(
        printer::any_to_text(&Any::from(m).view()),
        text,
        "what tir.AsText prints"
    );
}

#[test]
fn constants_and_vectors() {
    let v = PrimExpr::ramp_raw(PrimExpr::i32(0), PrimExpr::i32(2), 8);
    assert_eq!(v.to_string(), "T.Ramp(0, 2, 8)");
    let b = PrimExpr::broadcast_raw(PrimExpr::f32(1.0), 4);
    assert_eq!(b.to_string(), "T.Broadcast(T.float32(1.0), 4)");
    assert_eq!(PrimExpr::i64(5).to_string(), "T.int64(5)");
    assert_eq!(
        PrimExpr::const_int(DataType::uint(8), 255).to_string(),
        "T.uint8(255)"
    );
    assert_eq!(PrimExpr::bool(true).to_string(), "True");
    assert_eq!(
        PrimExpr::f64(f64::INFINITY).to_string(),
        "T.float64(\"inf\")"
    );
    let x = Var::int32("x");
    assert_eq!(
        PrimExpr::binary_raw(BinOp::Sub, x.to_expr(), PrimExpr::i32(-3)).to_string(),
        "x - -3"
    );
    assert_eq!(
        let_expr(&x, 1, &x + 2).to_string(),
        "T.Let(x + 2, where={x: 1})"
    );
}

trait Int64 {
    fn int64() -> DataType;
}
impl Int64 for DataType {
    fn int64() -> DataType {
        DataType::int(64)
    }
}
