//! The global functions, used the way a Python `kiln.te` would: build a compute through
//! `te.ComputeOp`, schedule it through `te.Stage*`, lower it through `te.Lower`.

use kiln_ffi::{registry, Any, Array};
use kiln_te::{IterVar, Operation, Tensor};
use kiln_tir::{DataType, PrimExpr, PrimFunc, Range, Var};

fn call(name: &str, args: Vec<Any>) -> Any {
    let f = registry::get(name).unwrap_or_else(|| panic!("global {name} is registered"));
    f.call_any(&args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn list(items: Vec<Any>) -> Any {
    Array::new(items).into()
}

#[test]
fn python_style_flow_lowers_a_vectorized_kernel() {
    kiln_te::link_globals();
    let a: Tensor = call(
        "te.Placeholder",
        vec![
            list(vec![PrimExpr::i32(8).into()]),
            DataType::float(32).into(),
            "A".into(),
        ],
    )
    .try_as()
    .unwrap();
    // Python's te.compute: one IterVar per dimension, the lambda on their vars, then ComputeOp.
    let i = Var::int32("i");
    let iv: IterVar = call(
        "te.IterVar",
        vec![
            Range::from_min_extent(0, 8).into(),
            i.clone().into(),
            0i64.into(),
            "".into(),
        ],
    )
    .try_as()
    .unwrap();
    let load: PrimExpr = call(
        "te.TensorLoad",
        vec![a.clone().into(), list(vec![i.into()])],
    )
    .try_as()
    .unwrap();
    let body = load * 2.0;
    let op: Operation = call(
        "te.ComputeOp",
        vec![
            "B".into(),
            "elemwise".into(),
            Any::none(),
            list(vec![iv.clone().into()]),
            list(vec![body.into()]),
        ],
    )
    .try_as()
    .unwrap();
    assert_eq!(op.tag(), "elemwise");
    let b: Tensor = call("te.OpGetOutput", vec![op.clone().into(), 0i64.into()])
        .try_as()
        .unwrap();
    let s = call("te.CreateSchedule", vec![list(vec![op.clone().into()])]);
    let stage = call("te.ScheduleGetStage", vec![s.clone(), op.into()]);
    let parts: Array = call(
        "te.StageSplitByFactor",
        vec![stage.clone(), iv.into(), PrimExpr::i32(4).into()],
    )
    .try_as()
    .unwrap();
    let inner = parts.get(1).unwrap();
    call("te.StageVectorize", vec![stage, inner.to_owned()]);
    let f: PrimFunc = call(
        "te.Lower",
        vec![s, list(vec![a.into(), b.into()]), "scale".into()],
    )
    .try_as()
    .unwrap();
    let text = f.to_string();
    assert!(
        text.contains("for i.inner in T.vectorized(0, 4):"),
        "{text}"
    );
    assert!(
        text.contains("B[i.outer * 4 + i.inner] = A[i.outer * 4 + i.inner] * T.float32(2.0)"),
        "{text}"
    );
}

#[test]
fn reductions_through_globals() {
    kiln_te::link_globals();
    let a = kiln_te::placeholder(&[PrimExpr::i32(4)], DataType::float(32), "A");
    let k = kiln_te::reduce_axis_n(4, "k");
    let src = a.at(&[k.expr()]);
    for name in ["te.Max", "te.Min", "te.Prod"] {
        let r: PrimExpr = call(name, vec![src.clone().into(), list(vec![k.clone().into()])])
            .try_as()
            .unwrap();
        assert!(kiln_te::Reduce::decode(&r).is_some(), "{name}");
    }
    let r: PrimExpr = call(
        "te.Sum",
        vec![src.into(), list(vec![k.into()]), Any::none()],
    )
    .try_as()
    .unwrap();
    assert!(kiln_te::Reduce::decode(&r).is_some());
}
