use super::abi::{AnyField, DlTensorField, FfiAbi};
use super::symbols::{self, ContextSlot};
use super::*;
use inkwell::targets::TargetData;
use inkwell::types::BasicType;
use inkwell::values::BasicMetadataValueEnum;

fn llvm(s: &str) -> LlvmTarget {
    LlvmTarget::new(&Target::parse(s).unwrap()).unwrap()
}

/// `void add_one(float* a, const float* b, i64 n)`: `a[i] = b[i] + 1` for i < n.
fn add_loop<'ctx>(t: &LlvmTarget, ctx: &'ctx Context, name: &str) -> Module<'ctx> {
    let m = t.create_module(ctx, name);
    let (f32t, i64t, ptr) = (
        ctx.f32_type(),
        ctx.i64_type(),
        ctx.ptr_type(Default::default()),
    );
    let fty = ctx
        .void_type()
        .fn_type(&[ptr.into(), ptr.into(), i64t.into()], false);
    let f = m.add_function("add_one", fty, None);
    t.set_function_attributes(ctx, f);
    let noalias = ctx.create_enum_attribute(
        inkwell::attributes::Attribute::get_named_enum_kind_id("noalias"),
        0,
    );
    f.add_attribute(AttributeLoc::Param(0), noalias);
    f.add_attribute(AttributeLoc::Param(1), noalias);
    let (a, b_, n) = (
        f.get_nth_param(0).unwrap().into_pointer_value(),
        f.get_nth_param(1).unwrap().into_pointer_value(),
        f.get_nth_param(2).unwrap().into_int_value(),
    );
    let b = ctx.create_builder();
    let entry = ctx.append_basic_block(f, "entry");
    let body = ctx.append_basic_block(f, "body");
    let exit = ctx.append_basic_block(f, "exit");
    b.position_at_end(entry);
    let zero = i64t.const_zero();
    let nonempty = b
        .build_int_compare(inkwell::IntPredicate::SGT, n, zero, "nonempty")
        .unwrap();
    b.build_conditional_branch(nonempty, body, exit).unwrap();
    b.position_at_end(body);
    let i = b.build_phi(i64t, "i").unwrap();
    let iv = i.as_basic_value().into_int_value();
    // SAFETY: the loop runs i over 0..n, in bounds of both n-element buffers.
    let src = unsafe { b.build_in_bounds_gep(f32t, b_, &[iv], "src").unwrap() };
    let x = b.build_load(f32t, src, "x").unwrap().into_float_value();
    let y = b.build_float_add(x, f32t.const_float(1.0), "y").unwrap();
    // SAFETY: as for `src`.
    let dst = unsafe { b.build_in_bounds_gep(f32t, a, &[iv], "dst").unwrap() };
    b.build_store(dst, y).unwrap();
    let next = b
        .build_int_add(iv, i64t.const_int(1, false), "next")
        .unwrap();
    i.add_incoming(&[(&zero, entry), (&next, body)]);
    let done = b
        .build_int_compare(inkwell::IntPredicate::EQ, next, n, "done")
        .unwrap();
    b.build_conditional_branch(done, exit, body).unwrap();
    b.position_at_end(exit);
    b.build_return(None).unwrap();
    m
}

#[test]
fn version_is_19() {
    assert_eq!(llvm_version().0, 19);
}

#[test]
fn module_gets_triple_layout_and_target_flag() {
    let t = llvm("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver4");
    assert_eq!(t.triple(), "x86_64-pc-linux-gnu");
    assert_eq!(t.cpu(), "znver4");
    let ctx = Context::create();
    let m = add_loop(&t, &ctx, "m");
    let ir = ir_text(&m);
    assert!(
        ir.contains("target triple = \"x86_64-pc-linux-gnu\""),
        "{ir}"
    );
    assert!(ir.contains(&format!("target datalayout = \"{}\"", t.data_layout())));
    assert!(ir.contains("\"tvm_target\", !\"llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver4\""));
    assert!(ir.contains("\"target-cpu\"=\"znver4\""), "{ir}");
    verify(&m).unwrap();
}

#[test]
fn o3_vectorizes_for_avx512_and_o0_does_not() {
    let t = llvm("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver5");
    let ctx = Context::create();
    let m = add_loop(&t, &ctx, "vec");
    t.optimize(&m).unwrap();
    let ir = ir_text(&m);
    assert!(ir.contains("x float>"), "the loop was vectorized:\n{ir}");
    let asm = t.emit_assembly(&m).unwrap();
    assert!(asm.contains("zmm") || asm.contains("ymm"), "{asm}");

    let t0 = llvm("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver5 -opt-level=0");
    let ctx0 = Context::create();
    let m0 = add_loop(&t0, &ctx0, "scalar");
    t0.optimize(&m0).unwrap();
    assert!(!ir_text(&m0).contains("x float>"));
}

#[test]
fn fast_math_only_when_asked() {
    let plain = llvm("llvm");
    assert_eq!(plain.fast_math_flags(), FastMathFlags::AllowContract);
    let fast = llvm("llvm -fast-math");
    assert_eq!(fast.fast_math_flags(), FastMathFlags::all());
    let ctx = Context::create();
    let m = add_loop(&fast, &ctx, "fm");
    assert!(ir_text(&m).contains("\"unsafe-fp-math\"=\"true\""));
    let m2 = add_loop(&plain, &ctx, "nofm");
    assert!(!ir_text(&m2).contains("unsafe-fp-math"));
}

#[test]
fn object_and_assembly_output() {
    let t = LlvmTarget::host().unwrap();
    let ctx = Context::create();
    let m = add_loop(&t, &ctx, "obj");
    t.optimize(&m).unwrap();
    let obj = t.emit_object(&m).unwrap();
    assert_eq!(&obj[..4], b"\x7fELF");
    let asm = t.emit_assembly(&m).unwrap();
    assert!(asm.contains("add_one:"), "{asm}");
    let dir = std::env::temp_dir().join(format!("kiln-codegen-obj-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.o");
    t.write_object(&m, &path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), obj);
    let e = t
        .write_object(&m, &dir.join("no/such/dir/m.o"))
        .unwrap_err();
    assert!(e.message().contains("no/such/dir"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn target_errors() {
    let e = LlvmTarget::new(&Target::parse("c").unwrap()).unwrap_err();
    assert!(
        e.message().contains("not an LLVM target"),
        "{}",
        e.message()
    );
    let e = LlvmTarget::new(&Target::parse("llvm -mtriple=nonsense-foo-bar").unwrap()).unwrap_err();
    assert!(e.message().contains("nonsense"), "{}", e.message());
    // Another architecture works when LLVM has its backend.
    let arm = llvm("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1");
    let ctx = Context::create();
    let m = add_loop(&arm, &ctx, "arm");
    arm.optimize(&m).unwrap();
    assert!(arm.emit_assembly(&m).unwrap().contains("add_one:"));
}

#[test]
fn invalid_module_is_reported() {
    let t = llvm("llvm");
    let ctx = Context::create();
    let m = t.create_module(&ctx, "broken");
    let f = m.add_function("f", ctx.i32_type().fn_type(&[], false), None);
    ctx.append_basic_block(f, "entry"); // no terminator
    let e = t.optimize(&m).unwrap_err();
    assert!(
        e.message().contains("`broken` is invalid"),
        "{}",
        e.message()
    );
}

#[test]
fn abi_type_sizes_match_the_c_layout() {
    let t = llvm("llvm");
    let ctx = Context::create();
    let abi = FfiAbi::new(&ctx);
    let td = TargetData::create(&t.data_layout());
    let size = |ty: &dyn BasicType| td.get_store_size(ty);
    assert_eq!(size(&abi.any), abi::ANY_BYTES);
    assert_eq!(size(&abi.dl_tensor), abi::DLTENSOR_BYTES);
    assert_eq!(size(&abi.dl_device), 8);
    assert_eq!(size(&abi.dl_datatype), 4);
    assert_eq!(size(&abi.parallel_group_env), 16);
    for (i, field) in [
        DlTensorField::Data,
        DlTensorField::DeviceType,
        DlTensorField::Ndim,
        DlTensorField::DtypeCode,
        DlTensorField::Shape,
        DlTensorField::Strides,
        DlTensorField::ByteOffset,
    ]
    .into_iter()
    .enumerate()
    {
        let index = [0, 1, 2, 3, 4, 5, 6][i];
        assert_eq!(
            td.offset_of_element(&abi.dl_tensor, index),
            Some(field.offset())
        );
    }
    assert_eq!(
        td.offset_of_element(&abi.any, 2),
        Some(AnyField::Int64.offset())
    );
    // A second ABI in the same context reuses the named types.
    assert_eq!(FfiAbi::new(&ctx).any, abi.any);
}

#[test]
fn symbols_are_made_as_tvm_makes_them() {
    let t = llvm("llvm");
    let ctx = Context::create();
    let abi = FfiAbi::new(&ctx);
    let m = t.create_module(&ctx, "syms");
    let f = symbols::declare_safe_call(&m, &abi, "k").unwrap();
    assert!(symbols::declare_safe_call(&m, &abi, "k").is_err());
    let b = ctx.create_builder();
    b.position_at_end(ctx.append_basic_block(f, "entry"));
    let size = abi.i64.const_int(256, false);
    let (dev, zero) = (abi.i32.const_int(1, false), abi.i32.const_zero());
    let args: [BasicMetadataValueEnum; 5] = [
        dev.into(),
        zero.into(),
        size.into(),
        zero.into(),
        zero.into(),
    ];
    let call = symbols::build_slot_call(
        &b,
        &m,
        &abi,
        ContextSlot::BackendAllocWorkspace,
        &args,
        "ws",
    )
    .unwrap();
    let ws = call.try_as_basic_value().basic().unwrap();
    symbols::build_slot_call(
        &b,
        &m,
        &abi,
        ContextSlot::BackendFreeWorkspace,
        &[dev.into(), zero.into(), ws.into()],
        "",
    )
    .unwrap();
    let (status, _) = symbols::build_function_handle(&b, &m, &abi, "testing.echo").unwrap();
    b.build_return(Some(&status)).unwrap();
    symbols::add_main_alias(&m, &abi, f).unwrap();
    assert!(symbols::add_main_alias(&m, &abi, f).is_err());
    verify(&m).unwrap();
    let ir = ir_text(&m);
    for slot in [
        "__TVMBackendAllocWorkspace",
        "__TVMBackendFreeWorkspace",
        "__TVMFFIHandleInitOnce",
        "__TVMFFIEnvModLookupFromImports",
        "__tvm_ffi__library_ctx",
    ] {
        let line = format!("@{slot} = linkonce dllexport global ptr null, align 8");
        assert!(ir.contains(&line), "{line} in\n{ir}");
    }
    // Slots are defined only when used.
    assert!(!ir.contains("__TVMBackendParallelLaunch"));
    assert!(ir.contains("@.tvm_func.testing.echo = internal global ptr null, align 8"));
    assert!(ir.contains("define internal i32 @__tvm_func_handle_init.testing.echo(ptr"));
    assert!(
        ir.contains(
            "define dllexport i32 @__tvm_ffi_k(ptr noalias %self_handle, ptr noalias %args, \
         i32 %num_args, ptr noalias %result)"
        ),
        "{ir}"
    );
    assert!(
        ir.contains("define weak dllexport i32 @__tvm_ffi_main(ptr"),
        "{ir}"
    );
    t.emit_object(&m).unwrap();
}

#[test]
fn library_bin_global() {
    let ctx = Context::create();
    let t = llvm("llvm");
    let abi = FfiAbi::new(&ctx);
    let m = t.create_module(&ctx, "bin");
    let mut blob = 3u64.to_le_bytes().to_vec();
    blob.extend([1, 2, 3]);
    symbols::add_library_bin(&m, &abi, &blob).unwrap();
    let ir = ir_text(&m);
    assert!(
        ir.contains("@__tvm_ffi__library_bin = dllexport constant [11 x i8] c\"\\03\\00"),
        "{ir}"
    );
    assert!(ir.contains("align 1"));
    for bad in [&blob[..5], &blob[..10], &[][..]] {
        assert!(symbols::add_library_bin(&m, &abi, bad).is_err());
    }
}

#[test]
fn compiled_module_outlives_its_context() {
    let t = llvm("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver5");
    let compiled = {
        let ctx = Context::create();
        let m = add_loop(&t, &ctx, "detached");
        CompiledModule::compile(&t, &m, "").unwrap()
    };
    assert_eq!(&compiled.object[..4], b"\x7fELF");
    assert!(compiled.source("ll").unwrap().contains("x float>"));
    let asm = std::thread::spawn(move || compiled.source("asm").map(|a| (a, compiled)))
        .join()
        .unwrap()
        .unwrap();
    assert!(asm.0.contains("add_one:"), "{}", asm.0);
    let e = asm.1.source("c").unwrap_err();
    assert!(e.message().contains("formats: ll, asm"));
}
