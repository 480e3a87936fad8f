//! `kiln demo`: the bundled example. It drives Kiln's FFI the way compiled code and bindings do:
//! global functions looked up by name, callbacks across the ABI, errors coming back with their
//! kind, and a reflected object printed and sent through JSON. Each step checks its result.

use kiln_ffi::{call, json, registry, Any, Array, Error, Function, Result};
use std::time::Instant;

fn check(what: &str, ok: bool) -> Result<()> {
    if ok {
        println!("  ok  {what}");
        Ok(())
    } else {
        Err(Error::runtime_error(format!("demo check failed: {what}")))
    }
}

/// Runs the demo; fails on the first check that does not hold.
pub fn run() -> Result<()> {
    println!(
        "Kiln demo: the FFI core ({} global functions registered)",
        registry::names().len()
    );
    let add_one = registry::get_required("testing.add_one")?;
    check(
        "testing.add_one(41) == 42",
        add_one.invoke::<i64>((41i64,))? == 42,
    )?;

    let square = Function::from_typed(|x: f64| x * x);
    let apply = registry::get_required("testing.apply")?;
    let out = call!(apply, square, 1.5f64)?.try_as::<f64>()?;
    check(
        "testing.apply(square, 1.5) == 2.25 through the C convention",
        out == 2.25,
    )?;

    let raise = registry::get_required("testing.test_raise_error")?;
    let err = call!(raise, "ValueError", "bad shape").unwrap_err();
    check(
        "a raised ValueError comes back with kind and message",
        err.kind() == "ValueError" && err.message() == "bad shape",
    )?;

    let make = registry::get_required("kiln.testing.make_node")?;
    let leaf = call!(make, "leaf", 1i64, 0.5f64, Array::empty())?;
    let root = call!(
        make,
        "root",
        2i64,
        1.0f64,
        Array::new(vec![leaf.clone(), leaf])
    )?;
    println!("  {:?}", root);
    let text = json::to_json(&root.view())?;
    let back: Any = json::from_json(&text)?;
    check(
        "the node tree survives a JSON round trip",
        kiln_ffi::reflection::structural_equal(&root.view(), &back.view()),
    )?;

    let nop = registry::get_required("testing.nop")?;
    let n = 1_000_000;
    let start = Instant::now();
    for _ in 0..n {
        nop.call(&[])?;
    }
    println!(
        "  testing.nop from Rust: {:.1} ns per call",
        start.elapsed().as_nanos() as f64 / n as f64
    );
    println!("demo passed");
    Ok(())
}
