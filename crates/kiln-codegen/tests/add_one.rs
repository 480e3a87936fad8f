//! End to end without TIR: exported safe-call functions written with inkwell by hand, compiled
//! by LLVM 19 to an object, linked by `cc` into a `.so`, then loaded and called by Kiln's
//! runtime and (when `.venv` has it) by Apache TVM 0.27.
//!
//! - `add_one(x: int) -> int`: reads `args[0]` as an int, writes an int result; a wrong arity
//!   raises through the `__TVMFFIErrorSetRaisedFromCStr` context slot, a wrong type through the
//!   imported `TVMFFIErrorSetRaisedFromCStrParts`.
//! - `call_add_one(x)`: calls the global function `testing.add_one` by name (context slots
//!   `__TVMFFIHandleInitOnce`, `__TVMFFIEnvModLookupFromImports`, `__TVMFFIFunctionCall`, and
//!   `__tvm_ffi__library_ctx`).
//!
//! `libsingle.so` has `add_one` and the `__tvm_ffi_main` alias; `libmulti.so` has both functions
//! and a library blob (`__tvm_ffi__library_bin`, written by the runtime's blob writer).

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::FunctionValue;
use inkwell::IntPredicate;
use kiln_codegen::llvm::abi::{AnyField, FfiAbi};
use kiln_codegen::llvm::symbols::{self, ContextSlot};
use kiln_codegen::{link_shared, LinkOptions, LlvmTarget};
use kiln_ffi::abi::type_index;
use kiln_runtime::module::blob::{self, BlobModule, LibraryBin};
use kiln_testing::error::expect_err;
use std::path::{Path, PathBuf};

type R<T> = kiln_ffi::Result<T>;

fn err(e: inkwell::builder::BuilderError) -> kiln_ffi::Error {
    kiln_ffi::Error::runtime_error(e.to_string())
}

/// `add_one(x: int) -> int`, checking arity and type as generated code does.
fn define_add_one<'ctx>(
    t: &LlvmTarget,
    m: &Module<'ctx>,
    abi: &FfiAbi<'ctx>,
) -> R<FunctionValue<'ctx>> {
    let ctx = abi.ctx;
    let f = symbols::declare_safe_call(m, abi, "add_one")?;
    t.set_function_attributes(ctx, f);
    let args = f.get_nth_param(1).unwrap().into_pointer_value();
    let num_args = f.get_nth_param(2).unwrap().into_int_value();
    let result = f.get_nth_param(3).unwrap().into_pointer_value();
    let b = ctx.create_builder();
    let entry = ctx.append_basic_block(f, "entry");
    let bad_arity = ctx.append_basic_block(f, "bad_arity");
    let check_type = ctx.append_basic_block(f, "check_type");
    let bad_type = ctx.append_basic_block(f, "bad_type");
    let compute = ctx.append_basic_block(f, "compute");
    let (zero, one) = (abi.i32.const_zero(), abi.i32.const_int(1, false));
    let minus_one = abi.i32.const_all_ones();

    b.position_at_end(entry);
    let ok = b
        .build_int_compare(IntPredicate::EQ, num_args, one, "ok_arity")
        .map_err(err)?;
    b.build_conditional_branch(ok, check_type, bad_arity)
        .map_err(err)?;

    b.position_at_end(bad_arity);
    let kind = b
        .build_global_string_ptr("TypeError", "kind")
        .map_err(err)?;
    let msg = b
        .build_global_string_ptr("add_one expects 1 argument", "msg")
        .map_err(err)?;
    symbols::build_slot_call(
        &b,
        m,
        abi,
        ContextSlot::ErrorSetRaisedFromCStr,
        &[
            kind.as_pointer_value().into(),
            msg.as_pointer_value().into(),
        ],
        "",
    )?;
    b.build_return(Some(&minus_one)).map_err(err)?;

    b.position_at_end(check_type);
    let ti = abi
        .load_any_field(&b, args, zero, AnyField::TypeIndex, "x.type_index")?
        .into_int_value();
    let is_int = b
        .build_int_compare(
            IntPredicate::EQ,
            ti,
            abi.i32.const_int(type_index::INT as u64, false),
            "is_int",
        )
        .map_err(err)?;
    b.build_conditional_branch(is_int, compute, bad_type)
        .map_err(err)?;

    b.position_at_end(bad_type);
    let parts = [
        "Mismatched type on argument #",
        "0",
        " when calling `add_one(x: int)`, expected int",
    ]
    .iter()
    .map(|p| {
        b.build_global_string_ptr(p, "part")
            .map(|g| g.as_pointer_value())
    })
    .collect::<Result<Vec<_>, _>>()
    .map_err(err)?;
    symbols::build_set_raised(&b, m, abi, "TypeError", &parts)?;
    b.build_return(Some(&minus_one)).map_err(err)?;

    b.position_at_end(compute);
    let x = abi
        .load_any_field(&b, args, zero, AnyField::Int64, "x")?
        .into_int_value();
    let y = b
        .build_int_add(x, abi.i64.const_int(1, false), "y")
        .map_err(err)?;
    abi.store_any(&b, result, one, Some(y.into()))?;
    b.build_return(Some(&zero)).map_err(err)?;
    Ok(f)
}

/// `call_add_one(...)`: forwards its arguments to the global function `testing.add_one`.
fn define_call_add_one<'ctx>(t: &LlvmTarget, m: &Module<'ctx>, abi: &FfiAbi<'ctx>) -> R<()> {
    let ctx = abi.ctx;
    let f = symbols::declare_safe_call(m, abi, "call_add_one")?;
    t.set_function_attributes(ctx, f);
    let b = ctx.create_builder();
    let entry = ctx.append_basic_block(f, "entry");
    let call = ctx.append_basic_block(f, "call");
    let fail = ctx.append_basic_block(f, "fail");
    b.position_at_end(entry);
    let (status, handle) = symbols::build_function_handle(&b, m, abi, "testing.add_one")?;
    let ok = b
        .build_int_compare(IntPredicate::EQ, status, abi.i32.const_zero(), "ok")
        .map_err(err)?;
    b.build_conditional_branch(ok, call, fail).map_err(err)?;
    b.position_at_end(fail);
    b.build_return(Some(&status)).map_err(err)?;
    b.position_at_end(call);
    let h = b
        .build_load(abi.ptr, handle.as_pointer_value(), "handle")
        .map_err(err)?;
    let params: Vec<_> = (1..4).map(|i| f.get_nth_param(i).unwrap().into()).collect();
    let rc = symbols::build_slot_call(
        &b,
        m,
        abi,
        ContextSlot::FunctionCall,
        &[h.into(), params[0], params[1], params[2]],
        "rc",
    )?
    .try_as_basic_value()
    .basic()
    .unwrap();
    b.build_return(Some(&rc)).map_err(err)?;
    Ok(())
}

fn work_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-codegen-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles the two libraries into `dir`; returns (single, multi).
fn build_libraries(dir: &Path) -> (PathBuf, PathBuf) {
    let t = LlvmTarget::host().unwrap();
    let ctx = Context::create();
    let abi = FfiAbi::new(&ctx);

    let single = t.create_module(&ctx, "single");
    let f = define_add_one(&t, &single, &abi).unwrap();
    symbols::add_main_alias(&single, &abi, f).unwrap();
    t.optimize(&single).unwrap();
    let single_o = dir.join("single.o");
    t.write_object(&single, &single_o).unwrap();
    let single_so = dir.join("libsingle.so");
    link_shared(&[single_o], &single_so, &LinkOptions::default()).unwrap();

    let multi = t.create_module(&ctx, "multi");
    define_add_one(&t, &multi, &abi).unwrap();
    define_call_add_one(&t, &multi, &abi).unwrap();
    t.optimize(&multi).unwrap();
    let ir = kiln_codegen::llvm::ir_text(&multi);
    assert!(
        ir.contains("@__tvm_ffi__library_ctx = linkonce dllexport"),
        "{ir}"
    );
    let multi_o = dir.join("multi.o");
    t.write_object(&multi, &multi_o).unwrap();
    let bin = LibraryBin::from_children(vec![BlobModule::Lib], &[vec![]]);
    let multi_so = dir.join("libmulti.so");
    let opts = LinkOptions {
        library_bin: Some(blob::write(&bin)),
        ..Default::default()
    };
    link_shared(&[multi_o], &multi_so, &opts).unwrap();
    (single_so, multi_so)
}

fn venv_python() -> Option<PathBuf> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    py.is_file().then_some(py)
}

#[test]
fn hand_written_library_runs_in_kiln_and_tvm() {
    let dir = work_dir();
    let (single, multi) = build_libraries(&dir);

    let syms = kiln_runtime::module::elf::dynamic_symbols_of_file(&multi).unwrap();
    assert!(syms.is_function("__tvm_ffi_add_one"));
    assert!(syms.is_function("__tvm_ffi_call_add_one"));
    assert_eq!(syms.size_of("__TVMFFIFunctionCall"), Some(8));
    assert_eq!(syms.size_of("__tvm_ffi__library_ctx"), Some(8));
    assert!(syms.defines("__tvm_ffi__library_bin"));
    assert!(
        !syms.defines("__tvm_ffi_main"),
        "two functions: no main alias"
    );
    let single_syms = kiln_runtime::module::elf::dynamic_symbols_of_file(&single).unwrap();
    assert!(single_syms.is_function("__tvm_ffi_main"));

    // Kiln's loader.
    let m = kiln_runtime::module::load_module(&single).unwrap();
    let add_one = m.function("add_one").unwrap();
    assert_eq!(add_one.invoke::<i64>((41i64,)).unwrap(), 42);
    assert_eq!(add_one.invoke::<i64>((-7i64,)).unwrap(), -6);
    assert_eq!(
        m.function("main").unwrap().invoke::<i64>((1i64,)).unwrap(),
        2
    );
    expect_err(
        add_one.invoke::<i64>((1i64, 2i64)),
        "TypeError",
        "add_one expects 1 argument",
    );
    let e = expect_err(add_one.invoke::<i64>(("x",)), "TypeError", "");
    assert_eq!(
        e.message(),
        "Mismatched type on argument #0 when calling `add_one(x: int)`, expected int"
    );

    let m2 = kiln_runtime::module::load_module(&multi).unwrap();
    assert_eq!(m2.kind(), "library");
    let call = m2.function("call_add_one").unwrap();
    assert_eq!(call.invoke::<i64>((41i64,)).unwrap(), 42);
    assert_eq!(call.invoke::<i64>((99i64,)).unwrap(), 100);
    assert_eq!(
        m2.function("add_one")
            .unwrap()
            .invoke::<i64>((0i64,))
            .unwrap(),
        1
    );

    // Apache TVM 0.27's loader, in a subprocess.
    let Some(py) = venv_python() else {
        eprintln!("skipping the Apache TVM check: no .venv/bin/python (run scripts/setup.sh)");
        return;
    };
    let has_tvm = std::process::Command::new(&py)
        .args(["-c", "import tvm"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_tvm {
        eprintln!("skipping the Apache TVM check: apache-tvm is not importable from .venv");
        return;
    }
    let script = r#"
import sys, tvm
single = tvm.runtime.load_module(sys.argv[1])
assert single["add_one"](41) == 42
assert single["main"](1) == 2
try:
    single["add_one"]("x")
    raise SystemExit("no error for a string argument")
except TypeError as e:
    assert "Mismatched type on argument #0" in str(e), str(e)
try:
    single["add_one"](1, 2)
    raise SystemExit("no error for two arguments")
except TypeError as e:
    assert "add_one expects 1 argument" in str(e), str(e)
multi = tvm.runtime.load_module(sys.argv[2])
assert multi["call_add_one"](41) == 42
assert multi["add_one"](5) == 6
print("tvm ok")
"#;
    let out = std::process::Command::new(&py)
        .args(["-c", script])
        .arg(&single)
        .arg(&multi)
        .output()
        .unwrap();
    let text = kiln_testing::process::combined(&out);
    assert!(out.status.success() && text.contains("tvm ok"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
