//! `kiln demo`: the bundled example. First the FFI the way compiled code and bindings use it
//! (globals by name, callbacks across the ABI, errors with their kind, a reflected object through
//! JSON); then the tensor compiler: a matmul written as a tensor expression, scheduled, lowered,
//! compiled by LLVM for this CPU, loaded and checked against a naive loop. Each step checks its
//! result.

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
    compile_and_run_matmul()?;
    println!("demo passed");
    Ok(())
}

/// Builds C = A x B (256^3, float32) with a tiled, vectorized schedule, runs it and checks it.
fn compile_and_run_matmul() -> Result<()> {
    use kiln::runtime::tensor::Tensor;
    use kiln::te::{compute, create_schedule, placeholder, reduce_axis_n, sum};
    use kiln::tir::PrimExpr;
    let n = 256i64;
    let f32t = kiln_ffi::DataType::float(32);
    let dim = || PrimExpr::i32(n);
    println!("Kiln demo: the tensor compiler (matmul {n}x{n}x{n}, float32, llvm -mcpu=native)");
    let a = placeholder(&[dim(), dim()], f32t, "A");
    let b = placeholder(&[dim(), dim()], f32t, "B");
    let k = reduce_axis_n(n, "k");
    let c = compute(
        &[dim(), dim()],
        |i| {
            sum(
                a.at(&[i[0].to_expr(), k.expr()]) * b.at(&[k.expr(), i[1].to_expr()]),
                std::slice::from_ref(&k),
            )
        },
        "C",
    );
    let s = create_schedule(&[c.op().clone()]);
    let st = s.stage(&c);
    let (io, jo, ii, ji) = st.tile(&c.axis(0), &c.axis(1), 8, 16)?;
    st.reorder(&[io, jo, k.clone(), ii, ji.clone()])?;
    st.vectorize(&ji)?;
    let start = Instant::now();
    let module = kiln::codegen::driver::build(&s, &[a, b, c], "llvm -mcpu=native", "matmul")?;
    let f = module.function("matmul")?;
    println!(
        "  compiled in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    // Small integer inputs: every product and partial sum is exact in float32.
    let av: Vec<f32> = (0..n * n).map(|x| ((x * 7) % 13) as f32 - 6.0).collect();
    let bv: Vec<f32> = (0..n * n).map(|x| ((x * 5) % 11) as f32 - 5.0).collect();
    let out = Tensor::from_slice(&vec![f32::NAN; (n * n) as usize], &[n, n])?;
    let (ta, tb) = (
        Tensor::from_slice(&av, &[n, n])?,
        Tensor::from_slice(&bv, &[n, n])?,
    );
    f.invoke::<()>((ta.clone(), tb.clone(), out.clone()))?;
    let got = out.to_vec::<f32>()?;
    let nu = n as usize;
    let ok = (0..nu).all(|i| {
        (0..nu).all(|j| {
            got[i * nu + j]
                == (0..nu)
                    .map(|kk| av[i * nu + kk] * bv[kk * nu + j])
                    .sum::<f32>()
        })
    });
    check("compiled matmul equals the naive loop on every element", ok)?;
    let runs = 20;
    let start = Instant::now();
    for _ in 0..runs {
        f.invoke::<()>((ta.clone(), tb.clone(), out.clone()))?;
    }
    let secs = start.elapsed().as_secs_f64() / runs as f64;
    println!(
        "  {:.3} ms per call, {:.1} GFLOP/s",
        secs * 1e3,
        2.0 * (n * n * n) as f64 / secs / 1e9
    );
    Ok(())
}
