//! Unit tests of the C generator's pieces (literals, names, errors); end-to-end tests are in
//! `tests/c_codegen*.rs`.

use super::expr::{float_literal, int_literal, scalar_binary};
use super::packed::assert_kind_message;
use super::*;
use kiln_tir::{BinOp, PrimExpr, Stmt};

#[test]
fn literals() {
    let t = |s: &str| s.parse::<DataType>().unwrap();
    assert_eq!(int_literal(t("int32"), -5).unwrap(), "(-5)");
    assert_eq!(
        int_literal(t("int32"), i32::MIN as i64).unwrap(),
        "INT32_MIN"
    );
    assert_eq!(int_literal(t("int64"), i64::MIN).unwrap(), "INT64_MIN");
    assert_eq!(int_literal(t("int64"), 7).unwrap(), "INT64_C(7)");
    assert_eq!(
        int_literal(t("uint64"), -1).unwrap(),
        "UINT64_C(18446744073709551615)"
    );
    assert_eq!(int_literal(t("uint8"), 2).unwrap(), "((uint8_t)2)");
    assert_eq!(int_literal(t("bool"), 1).unwrap(), "true");
    assert_eq!(float_literal(t("float32"), 0.1).unwrap(), "0.1f");
    assert_eq!(float_literal(t("float32"), -2.0).unwrap(), "(-2.0f)");
    assert_eq!(float_literal(t("float64"), 1e-300).unwrap(), "1e-300");
    assert_eq!(
        float_literal(t("float32"), f64::NEG_INFINITY).unwrap(),
        "(-INFINITY)"
    );
    assert_eq!(float_literal(t("float32"), f64::NAN).unwrap(), "NAN");
    assert_eq!(
        float_literal(t("float16"), 1.5).unwrap(),
        "((_Float16)1.5f)"
    );
    let e = scalar_ctype(t("bfloat16")).unwrap_err();
    assert!(e.message().contains("bfloat16"), "{}", e.message());
    assert_eq!(
        scalar_binary(BinOp::FloorDiv, t("int64"), "a", "b"),
        "kiln_floordiv_int64_t(a, b)"
    );
    assert_eq!(
        scalar_binary(BinOp::FloorMod, t("uint32"), "a", "b"),
        "(a % b)"
    );
    assert_eq!(
        scalar_binary(BinOp::Add, t("int8"), "a", "b"),
        "((int8_t)(a + b))"
    );
}

#[test]
fn strings_names_and_messages() {
    assert_eq!(
        c_string("a\"b\\c\n?\u{e9}"),
        "\"a\\\"b\\\\c\\n\\?\\303\\251\""
    );
    let mut cg = CodeGenC::new();
    let (v1, v2) = (Var::int32("j.outer"), Var::int32("j.outer"));
    assert_eq!(cg.bind(&v1).0, "j_outer");
    assert_eq!(cg.bind(&v2).0, "j_outer_1");
    assert_eq!(cg.bind(&Var::int32("int")).0, "int_");
    assert_eq!(cg.bind(&Var::int32("_x")).0, "v__x");
    assert_eq!(cg.bind(&Var::int32("expf")).0, "expf_");
    assert_eq!(
        cg.bind(&Var::int32("kiln_floordiv_int32_t")).0,
        "kiln_floordiv_int32_t_"
    );
    assert_eq!(cg.bind(&Var::int32("")).0, "v_");
    let (k, m) = assert_kind_message(&PrimExpr::string("ValueError: bad: thing"));
    assert_eq!((k.as_str(), m.as_str()), ("ValueError", "bad: thing"));
    let (k, m) = assert_kind_message(&PrimExpr::string("no kind here"));
    assert_eq!((k.as_str(), m.as_str()), ("RuntimeError", "no kind here"));
}

#[test]
fn unpacked_functions_are_refused() {
    let a = kiln_tir::Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(4)]);
    let f = PrimFunc::from_buffers("f", &[a], Stmt::no_op());
    let e = generate_c(&IRModule::from_func("f", f)).unwrap_err();
    assert!(e.message().contains("lower_pipeline"), "{}", e.message());
}

#[test]
fn device_dialect_literals_types_and_ops() {
    let t = |s: &str| s.parse::<DataType>().unwrap();
    let (cl, cu) = (Dialect::OpenCl, Dialect::Cuda);
    assert_eq!(cl.scalar_type(t("int64")).unwrap(), "long");
    assert_eq!(cu.scalar_type(t("int64")).unwrap(), "long long");
    assert_eq!(cl.scalar_type(t("uint8")).unwrap(), "uchar");
    assert!(cl.scalar_type(t("float16")).is_err());
    assert!(cu.scalar_type(t("handle")).is_err());
    assert_eq!(cl.int_literal(t("int64"), 7).unwrap(), "7L");
    assert_eq!(cu.int_literal(t("int64"), -7).unwrap(), "(-7LL)");
    assert_eq!(
        cl.int_literal(t("int32"), i32::MIN as i64).unwrap(),
        "(-2147483647 - 1)"
    );
    assert_eq!(cl.int_literal(t("uint64"), 3).unwrap(), "3UL");
    assert_eq!(cl.float_literal(t("float32"), f64::NAN).unwrap(), "NAN");
    assert_eq!(
        cu.float_literal(t("float32"), f64::NEG_INFINITY).unwrap(),
        "(-__int_as_float(0x7f800000))"
    );
    assert_eq!(cl.binary(BinOp::Min, t("float32"), "a", "b"), "fmin(a, b)");
    assert_eq!(cu.binary(BinOp::Max, t("float32"), "a", "b"), "fmaxf(a, b)");
    assert_eq!(cl.binary(BinOp::Max, t("int32"), "a", "b"), "max(a, b)");
    assert_eq!(
        cl.binary(BinOp::FloorDiv, t("int64"), "a", "b"),
        "kiln_floordiv_i64(a, b)"
    );
    assert_eq!(
        cl.math("tir.nearbyint", t("float32"), &["x".into()]),
        "rint(x)"
    );
    assert_eq!(cu.math("tir.exp", t("float32"), &["x".into()]), "expf(x)");
    assert_eq!(cu.math("tir.exp", t("float64"), &["x".into()]), "exp(x)");
    assert_eq!(
        cl.cast(t("int32"), t("float32"), "i").unwrap(),
        "((float)(i))"
    );
    assert!(cl.device_helpers("no helpers").is_empty());
    assert!(cl
        .device_helpers("kiln_floormod_i32(a, b)")
        .contains("static inline int kiln_floormod_i32(int a, int b)"));
}
