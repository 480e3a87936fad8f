use super::*;
use crate::stmt::ForKind;
use crate::structural::assert_structural_equal;
use crate::{IRModule, StmtKind};

/// The assert messages in execution order.
fn asserts(s: &Stmt) -> Vec<String> {
    fn walk(s: &Stmt, out: &mut Vec<String>) {
        match s.kind() {
            StmtKind::Assert(a) => {
                if let crate::ExprKind::StringImm(m) = a.message.kind() {
                    out.push(m.to_string());
                }
                walk(&a.body, out)
            }
            StmtKind::LetStmt(l) => walk(&l.body, out),
            StmtKind::DeclBuffer(d) => walk(&d.body, out),
            StmtKind::IfThenElse(i) => walk(&i.then_case, out),
            StmtKind::Seq(q) => q.seq.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(s, &mut out);
    out
}

fn vadd() -> PrimFunc {
    let f32 = DataType::float(32);
    let n = Var::int32("n");
    let a = Buffer::decl("A", f32, vec![n.to_expr(), PrimExpr::i32(4)]);
    let c = Buffer::decl("C", f32, vec![n.to_expr(), PrimExpr::i32(4)]);
    let x = Var::new("x", f32);
    let i = Var::int32("i");
    let body = Stmt::for_loop(
        &i,
        0,
        &n,
        ForKind::Serial,
        c.store(
            a.load(vec![i.to_expr(), PrimExpr::i32(0)]) * &x,
            vec![i.to_expr(), PrimExpr::i32(0)],
        ),
    );
    let av = Var::handle("A");
    let cv = Var::handle("C");
    PrimFunc::new(
        vec![av.clone(), cv.clone(), x],
        body,
        DataType::void(),
        vec![(av, a), (cv, c)],
        kiln_ffi::Map::new(vec![("global_symbol".into(), "add".into())]),
    )
    .unwrap()
}

#[test]
fn packed_signature_and_messages_mirror_tvm() {
    let f = vadd();
    let sig = "add(A: Tensor([n, 4], float32), C: Tensor([n, 4], float32), x: float32)";
    assert_eq!(signature("add", &f), sig);
    let p = make_packed_func(&f).unwrap();
    let names: Vec<&str> = p.params().iter().map(|v| v.name()).collect();
    assert_eq!(names, ["self_handle", "args", "num_args", "result"]);
    assert_eq!(p.ret_type(), DataType::int(32));
    assert!(p.buffer_map().is_empty());
    assert_eq!(
        p.get_attr("calling_conv").unwrap().try_as::<i64>().unwrap(),
        1
    );
    assert_eq!(p.global_symbol().as_deref(), Some("add"));
    let when = format!(" when calling:\n  `{sig}`");
    let msgs = asserts(p.body());
    let expect = [
        format!("TypeError: Expected 3 arguments{when}"),
        format!("TypeError: args pointer is NULL{when}"),
        format!("TypeError: Mismatched type on argument #0{when},\n  expected Tensor"),
        format!("TypeError: Mismatched type on argument #1{when},\n  expected Tensor"),
        format!("TypeError: Mismatched type on argument #2{when},\n  expected float"),
        format!("TypeError: Mismatched type on argument #0{when},\n  expected Tensor"),
        format!("ValueError: Mismatched A.ndim on argument #0{when},\n  expected 2"),
        format!("TypeError: Mismatched A.dtype on argument #0{when},\n  expected float32"),
        format!("ValueError: Mismatched A.device_type on argument #0{when},\n  expected cpu"),
        format!("TypeError: Mismatched type on argument #1{when},\n  expected Tensor"),
        format!("ValueError: Mismatched C.ndim on argument #1{when},\n  expected 2"),
        format!("TypeError: Mismatched C.dtype on argument #1{when},\n  expected float32"),
        format!("ValueError: Mismatched C.device_type on argument #1{when},\n  expected cpu"),
        format!("ValueError: Mismatched A.strides on argument #0{when},\n  expected to be compact array"),
        format!("ValueError: A data pointer is NULL on argument #0{when},\n  expected non-NULL data pointer"),
        format!("ValueError: Mismatched C.shape[0] on argument #1{when},\n  expected to match A.shape[0]"),
        format!("ValueError: Mismatched C.strides on argument #1{when},\n  expected to be compact array"),
        format!("ValueError: Mismatched C.device_id on argument #1{when},\n  expected to match A.device_id"),
        format!("ValueError: C data pointer is NULL on argument #1{when},\n  expected non-NULL data pointer"),
        format!("ValueError: Invalid A.shape[1] on argument #0{when},\n  expected 4"),
        format!("ValueError: Invalid A.byte_offset on argument #0{when},\n  expected 0"),
        format!("ValueError: Invalid C.shape[1] on argument #1{when},\n  expected 4"),
        format!("ValueError: Invalid C.byte_offset on argument #1{when},\n  expected 0"),
    ];
    assert_eq!(msgs, expect);
    // Running the pass twice changes nothing the second time.
    let m = IRModule::from_func("add", f);
    let once = make_packed_api().apply(m).unwrap();
    let twice = make_packed_api().apply(once.clone()).unwrap();
    assert!(twice
        .lookup("add")
        .unwrap()
        .same_as(once.lookup("add").unwrap()));
}

#[test]
fn prologue_structure() {
    // One 1-D tensor of constant shape and one int scalar: the whole IR, node by node.
    let i32t = DataType::int(32);
    let h = DataType::handle();
    let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(8)]);
    let k = Var::int32("k");
    let body = a.store(
        cast(DataType::float(32), k.to_expr()),
        vec![PrimExpr::i32(0)],
    );
    let av = Var::handle("A");
    let f = PrimFunc::new(
        vec![av.clone(), k.clone()],
        body.clone(),
        DataType::void(),
        vec![(av, a.clone())],
        kiln_ffi::Map::new(vec![("global_symbol".into(), "g".into())]),
    )
    .unwrap();
    let p = make_packed_func(&f).unwrap();
    let args = p.params()[1].clone();
    let num_args = p.params()[2].clone();
    let sig = "g(A: Tensor([8], float32), k: int32)";
    let when = format!(" when calling:\n  `{sig}`");
    let m = |head: &str, i: usize, exp: &str| {
        format!("{head} on argument #{i}{when},\n  expected {exp}")
    };
    let ti_a = Var::new("A_type_index", i32t);
    let ti_k = Var::new("k_type_index", i32t);
    let ah = Var::new("A_handle", h);
    let shape = Var::new("g_A_shape", h);
    let strides = Var::new("g_A_strides", h);
    let dev = Var::new("dev_id", i32t);
    let shape_buf = int64_array(&shape, 1);
    let strides_buf = int64_array(&strides, 1);
    let ptr = struct_get(h, &args, 0, struct_field::ANY_PTR);
    let null = |v: &Var| PrimExpr::not_raw(is_null(v));
    let tail = Stmt::seq(vec![
        body,
        Stmt::evaluate(PrimExpr::call(i32t, builtin::RET, vec![PrimExpr::i32(0)])),
    ]);
    let tail = Stmt::assert(
        PrimExpr::const_int(DataType::uint(64), 0).equal(struct_get(
            DataType::uint(64),
            &ah,
            0,
            struct_field::DL_BYTE_OFFSET,
        )),
        &format!("ValueError: {}", m("Invalid A.byte_offset", 0, "0")),
        tail,
    );
    let tail = Stmt::assert(
        cast(i32t, shape_buf.load(vec![PrimExpr::i32(0)])).equal(8),
        &format!("ValueError: {}", m("Invalid A.shape[0]", 0, "8")),
        tail,
    );
    let tail = Stmt::assert(
        null(a.data()),
        &format!("ValueError: A data pointer is NULL on argument #0{when},\n  expected non-NULL data pointer"),
        tail,
    );
    let tail = Stmt::let_stmt(a.data(), struct_get(h, &ah, 0, struct_field::DL_DATA), tail);
    let compact =
        cast(i32t, PrimExpr::i32(1)).equal(cast(i32t, strides_buf.load(vec![PrimExpr::i32(0)])));
    let tail = Stmt::seq(vec![
        Stmt::if_then_else(
            null(&strides),
            Stmt::assert(
                compact,
                &format!(
                    "ValueError: {}",
                    m("Mismatched A.strides", 0, "to be compact array")
                ),
                Stmt::no_op(),
            ),
            None,
        ),
        tail,
    ]);
    let tail = Stmt::let_stmt(
        &dev,
        struct_get(i32t, &ah, 0, struct_field::DL_DEVICE_ID),
        tail,
    );
    let tail = Stmt::assert(
        struct_get(i32t, &ah, 0, struct_field::DL_DEVICE_TYPE).equal(1),
        &format!("ValueError: {}", m("Mismatched A.device_type", 0, "cpu")),
        tail,
    );
    let tail = Stmt::decl_buffer(strides_buf.clone(), tail);
    let tail = Stmt::let_stmt(
        &strides,
        struct_get(h, &ah, 0, struct_field::DL_STRIDES),
        tail,
    );
    let tail = Stmt::decl_buffer(shape_buf.clone(), tail);
    let tail = Stmt::let_stmt(&shape, struct_get(h, &ah, 0, struct_field::DL_SHAPE), tail);
    let dt = struct_get(DataType::uint(8), &ah, 0, struct_field::DL_DTYPE_CODE)
        .equal(2)
        .logical_and(struct_get(DataType::uint(8), &ah, 0, struct_field::DL_DTYPE_BITS).equal(32))
        .logical_and(struct_get(DataType::uint(16), &ah, 0, struct_field::DL_DTYPE_LANES).equal(1));
    let tail = Stmt::assert(
        dt,
        &format!("TypeError: {}", m("Mismatched A.dtype", 0, "float32")),
        tail,
    );
    let tail = Stmt::assert(
        PrimExpr::i32(1).equal(struct_get(i32t, &ah, 0, struct_field::DL_NDIM)),
        &format!("ValueError: {}", m("Mismatched A.ndim", 0, "1")),
        tail,
    );
    let tail = Stmt::assert(
        null(&ah),
        &format!("TypeError: {}", m("Mismatched type", 0, "Tensor")),
        tail,
    );
    let tail = Stmt::let_stmt(
        &k,
        cast(
            i32t,
            struct_get(DataType::int(64), &args, 1, struct_field::ANY_INT64),
        ),
        tail,
    );
    let tail = Stmt::assert(
        logical_or(ti_k.equal(1), ti_k.equal(2)),
        &format!("TypeError: {}", m("Mismatched type", 1, "int")),
        tail,
    );
    let tail = Stmt::let_stmt(
        &ti_k,
        struct_get(i32t, &args, 1, struct_field::ANY_TYPE_INDEX),
        tail,
    );
    let obj = PrimExpr::call(
        h,
        builtin::HANDLE_ADD_BYTE_OFFSET,
        vec![ptr.clone(), PrimExpr::i32(24)],
    );
    let tail = Stmt::let_stmt(&ah, select(ti_a.equal(70), obj, ptr), tail);
    let ok = logical_or(
        logical_or(logical_or(ti_a.equal(0), ti_a.equal(4)), ti_a.equal(7)),
        ti_a.equal(70),
    );
    let tail = Stmt::assert(
        ok,
        &format!("TypeError: {}", m("Mismatched type", 0, "Tensor")),
        tail,
    );
    let tail = Stmt::let_stmt(
        &ti_a,
        struct_get(i32t, &args, 0, struct_field::ANY_TYPE_INDEX),
        tail,
    );
    let tail = Stmt::assert(
        null(&args),
        &format!("TypeError: args pointer is NULL{when}"),
        tail,
    );
    let expected = Stmt::assert(
        num_args.equal(2),
        &format!("TypeError: Expected 2 arguments{when}"),
        tail,
    );
    assert_structural_equal(p.body(), &expected);
}

#[test]
fn scalar_kinds() {
    let b = Var::new("flag", DataType::bool());
    let h = Var::handle("ptr");
    let f = PrimFunc::new(
        vec![b, h],
        Stmt::no_op(),
        DataType::void(),
        vec![],
        kiln_ffi::Map::new(vec![("global_symbol".into(), "s".into())]),
    )
    .unwrap();
    let p = make_packed_func(&f).unwrap();
    let msgs = asserts(p.body());
    assert!(msgs[2].ends_with("expected bool"), "{msgs:?}");
    assert!(msgs[3].ends_with("expected pointer"), "{msgs:?}");
}
