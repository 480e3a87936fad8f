//! OpenCL (and CUDA) code generation: SplitHostDevice's host launch and kernel information,
//! the kernel source of bound schedules, and the errors of unbound ones.

mod device_common;

use device_common::{matmul, rowsum, vadd};
use kiln_codegen::driver;
use kiln_runtime::module::Module;
use kiln_runtime::opencl::{FunctionInfo, OpenClModule};
use kiln_te::{compute, create_schedule, placeholder, thread_axis, Schedule, Tensor};
use kiln_tir::transform::split_host_device::{launch_params_of, split_host_device};
use kiln_tir::transform::PassContext;
use kiln_tir::{DataType, PrimExpr};

fn build_opencl(s: &Schedule, args: &[Tensor], name: &str) -> Module {
    let m = driver::build(s, args, "opencl", name).unwrap();
    assert_eq!(m.kind(), "llvm");
    let imports = m.imports();
    assert_eq!(imports.len(), 1);
    assert_eq!(imports[0].kind(), "opencl");
    imports[0].clone()
}

fn functions(device: &Module) -> Vec<FunctionInfo> {
    device
        .node()
        .as_any()
        .downcast_ref::<OpenClModule>()
        .expect("an OpenClModule")
        .functions()
        .to_vec()
}

#[test]
fn split_host_device_launches_the_kernel() {
    let (s, args) = vadd();
    let module = driver::lower(&s, &args, "vadd", true).unwrap();
    let split = split_host_device(4, "opencl")
        .run(module, &PassContext::default())
        .unwrap();
    let host = split.lookup("vadd").unwrap();
    let text = host.to_string();
    assert!(
        text.contains(r#"T.call_packed("vadd_kernel0", A_1, B_1, C_1, n, (n + 63) // 64, 64)"#),
        "{text}"
    );
    assert!(text.contains(r#""kiln.device_type": 4"#), "{text}");
    assert!(!text.contains("thread_extent"), "{text}");
    let k = split.lookup("vadd_kernel0").unwrap();
    assert_eq!(launch_params_of(k), ["blockIdx.x", "threadIdx.x"]);
    let types: Vec<String> = k.params().iter().map(|p| p.dtype().to_string()).collect();
    assert_eq!(types, ["handle", "handle", "handle", "int32"]);
    let ktext = k.to_string();
    assert!(ktext.contains(r#""calling_conv": 2"#), "{ktext}");
    assert!(
        ktext.contains(r#"T.attr(blockIdx.x, "thread_extent", (n + 63) // 64)"#),
        "{ktext}"
    );
}

#[test]
fn vector_add_kernel() {
    let (s, args) = vadd();
    let dev = build_opencl(&s, &args, "vadd");
    let src = dev.inspect_source("cl").unwrap();
    assert!(
        src.contains(
            "__kernel void vadd_kernel0(__global const float* restrict A, __global const float* \
             restrict B, __global float* restrict C, int n) {"
        ),
        "{src}"
    );
    let idx = "((((int)get_group_id(0)) * 64) + ((int)get_local_id(0)))";
    assert!(src.contains(&format!("if (({idx} < n))")), "{src}");
    assert!(
        src.contains(&format!("C[{idx}] = (A[{idx}] + B[{idx}]);")),
        "{src}"
    );
    assert!(!src.contains("cl_khr_fp64"), "{src}");
    assert_eq!(
        functions(&dev),
        [FunctionInfo {
            name: "vadd_kernel0".into(),
            arg_types: vec![
                DataType::handle(),
                DataType::handle(),
                DataType::handle(),
                DataType::int(32)
            ],
            launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        }]
    );
}

#[test]
fn row_reduction_kernel() {
    let (s, args) = rowsum();
    let dev = build_opencl(&s, &args, "rowsum");
    let src = dev.inspect_source("cl").unwrap();
    assert!(
        src.contains(
            "__kernel void rowsum_kernel0(__global const float* restrict A, __global float* \
             restrict R, int n) {"
        ),
        "{src}"
    );
    let row = "((((int)get_group_id(0)) * 32) + ((int)get_local_id(0)))";
    assert!(src.contains(&format!("R[{row}] = 0.0f;")), "{src}");
    assert!(src.contains("for (int k = 0; k < 128; ++k) {"), "{src}");
    assert!(
        src.contains("A[(((((int)get_group_id(0)) * 4096) + (((int)get_local_id(0)) * 128)) + k)]"),
        "{src}"
    );
    assert_eq!(
        functions(&dev)[0].launch_param_tags,
        ["blockIdx.x", "threadIdx.x"]
    );
}

#[test]
fn matmul_kernel_on_a_2d_grid() {
    let (s, args) = matmul();
    let dev = build_opencl(&s, &args, "matmul");
    let src = dev.inspect_source("cl").unwrap();
    assert!(
        src.contains(
            "__kernel void matmul_kernel0(__global const float* restrict A, __global const \
             float* restrict B, __global float* restrict C) {"
        ),
        "{src}"
    );
    assert!(
        src.contains("B[(((k * 64) + (((int)get_group_id(0)) * 8)) + ((int)get_local_id(0)))]"),
        "{src}"
    );
    assert!(src.contains("get_group_id(1)") && src.contains("get_local_id(1)"));
    let f = &functions(&dev)[0];
    assert_eq!(
        f.launch_param_tags,
        ["blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"]
    );
    assert_eq!(f.arg_types, vec![DataType::handle(); 3]);
}

#[test]
fn double_precision_enables_fp64_and_math_uses_builtins() {
    let n = PrimExpr::i32(256);
    let a = placeholder(std::slice::from_ref(&n), DataType::float(64), "A");
    let b = compute(
        std::slice::from_ref(&n),
        |i| kiln_tir::max(kiln_tir::op::exp(a.at_vars(i)), PrimExpr::f64(0.5)),
        "B",
    );
    let s = create_schedule(&[b.op().clone()]);
    let (o, i) = s.stage(&b).split(&b.axis(0), 64).unwrap();
    s.stage(&b)
        .bind(&o, &thread_axis("blockIdx.x").unwrap())
        .unwrap();
    s.stage(&b)
        .bind(&i, &thread_axis("threadIdx.x").unwrap())
        .unwrap();
    let dev = build_opencl(&s, &[a, b], "expmax");
    let src = dev.inspect_source("cl").unwrap();
    assert!(
        src.contains("#pragma OPENCL EXTENSION cl_khr_fp64 : enable"),
        "{src}"
    );
    assert!(src.contains("__global double* restrict B"), "{src}");
    assert!(src.contains("fmax(exp(A["), "{src}");
}

#[test]
fn cuda_source_module() {
    let (s, args) = matmul();
    let m = driver::build(&s, &args, "cuda", "matmul").unwrap();
    let imports = m.imports();
    assert_eq!(imports.len(), 1);
    assert_eq!(imports[0].kind(), "cuda");
    let src = imports[0].inspect_source("cu").unwrap();
    assert!(
        src.contains(
            "extern \"C\" __global__ void matmul_kernel0(const float* __restrict__ A, const \
             float* __restrict__ B, float* __restrict__ C) {"
        ),
        "{src}"
    );
    assert!(src.contains("((int)blockIdx.y)") && src.contains("((int)threadIdx.x)"));
    assert!(imports[0]
        .get_function("matmul_kernel0", false)
        .unwrap()
        .is_none());
}

#[test]
fn target_host() {
    let (s, args) = vadd();
    let m =
        driver::build_with_host(&s, &args, "opencl", Some("llvm -opt-level=2"), "vadd").unwrap();
    assert_eq!(m.kind(), "llvm");
    assert_eq!(m.imports()[0].kind(), "opencl");
    let e = driver::build_with_host(&s, &args, "opencl", Some("c"), "vadd")
        .unwrap_err()
        .to_string();
    assert!(e.contains("target_host `c` cannot launch kernels"), "{e}");
    let e = driver::build_with_host(&s, &args, "opencl", Some("cuda"), "vadd")
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a host target"), "{e}");
}

#[test]
fn unbound_loops_are_reported() {
    let n = PrimExpr::i32(1024);
    let a = placeholder(std::slice::from_ref(&n), DataType::float(32), "A");
    let b = compute(std::slice::from_ref(&n), |i| a.at_vars(i) * 2.0, "B");
    let s = create_schedule(&[b.op().clone()]);
    let e = driver::build(&s, &[a.clone(), b.clone()], "opencl", "scale")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("loop `i` is not bound to a thread") && e.contains("Did you forget to bind?"),
        "{e}"
    );
    // One stage bound, its producer not: the producer's loop runs on the host.
    let c = compute(std::slice::from_ref(&n), |i| b.at_vars(i) + 1.0, "C");
    let s = create_schedule(&[c.op().clone()]);
    let (o, i) = s.stage(&c).split(&c.axis(0), 64).unwrap();
    s.stage(&c)
        .bind(&o, &thread_axis("blockIdx.x").unwrap())
        .unwrap();
    s.stage(&c)
        .bind(&i, &thread_axis("threadIdx.x").unwrap())
        .unwrap();
    let e = driver::build(&s, &[a, c], "opencl", "two")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("loop `i` is not bound to a thread (blockIdx/threadIdx), so `B` would be"),
        "{e}"
    );
}

#[test]
fn kernels_may_not_allocate_global_memory() {
    let n = PrimExpr::i32(256);
    let a = placeholder(std::slice::from_ref(&n), DataType::float(32), "A");
    let b = compute(std::slice::from_ref(&n), |i| a.at_vars(i) * 2.0, "B");
    let c = compute(std::slice::from_ref(&n), |i| b.at_vars(i) + 1.0, "C");
    let s = create_schedule(&[c.op().clone()]);
    let (o, i) = s.stage(&c).split(&c.axis(0), 64).unwrap();
    s.stage(&c)
        .bind(&o, &thread_axis("blockIdx.x").unwrap())
        .unwrap();
    s.stage(&c)
        .bind(&i, &thread_axis("threadIdx.x").unwrap())
        .unwrap();
    s.stage(&b).compute_at(&s.stage(&c), &i).unwrap();
    let e = driver::build(&s, &[a.clone(), c.clone()], "opencl", "two")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("allocates `B") && e.contains("global memory"),
        "{e}"
    );
    // In private memory it works.
    s.stage(&b).set_scope("local").unwrap();
    let dev = build_opencl(&s, &[a, c], "two");
    let src = dev.inspect_source("cl").unwrap();
    assert!(src.contains("float B[1];"), "{src}");
}

#[test]
fn shared_memory_tiles_and_barriers() {
    let (s, args) = device_common::matmul_shared(64);
    let dev = build_opencl(&s, &args, "mm");
    let src = dev.inspect_source("cl").unwrap();
    let (ty, tx) = ("((int)get_local_id(1))", "((int)get_local_id(0))");
    let expected = [
        "  __local float A_shared[64];\n  __local float B_shared[64];\n".to_string(),
        "  for (int k_outer = 0; k_outer < 8; ++k_outer) {\n    barrier(CLK_LOCAL_MEM_FENCE);\n    \
         A_shared["
            .to_string(),
        format!("B_shared[(({ty} * 8) + {tx})] = B["),
        "    barrier(CLK_LOCAL_MEM_FENCE);\n    for (int k_inner = 0; k_inner < 8; ++k_inner) {"
            .to_string(),
        format!("(A_shared[(({ty} * 8) + k_inner)] * B_shared[((k_inner * 8) + {tx})])"),
    ];
    for e in expected {
        assert!(src.contains(&e), "missing {e:?} in\n{src}");
    }
    assert_eq!(src.matches("barrier(").count(), 2, "{src}");
    let f = &functions(&dev)[0];
    assert_eq!(
        f.launch_param_tags,
        ["blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"]
    );
    // The same kernel for CUDA.
    let m = driver::build(&s, &args, "cuda", "mm").unwrap();
    let cu = m.imports()[0].inspect_source("cu").unwrap();
    assert!(cu.contains("  __shared__ float A_shared[64];"), "{cu}");
    assert_eq!(cu.matches("__syncthreads();").count(), 2, "{cu}");
}

#[test]
fn two_root_stages_are_two_kernels_with_a_device_buffer_between() {
    let n = PrimExpr::i32(1000);
    let a = placeholder(std::slice::from_ref(&n), DataType::float(32), "A");
    let b = compute(std::slice::from_ref(&n), |i| a.at_vars(i) * 2.0, "B");
    let c = compute(std::slice::from_ref(&n), |i| b.at_vars(i) + 1.0, "C");
    let s = create_schedule(&[c.op().clone()]);
    for t in [&b, &c] {
        let (o, i) = s.stage(t).split(&t.axis(0), 128).unwrap();
        s.stage(t)
            .bind(&o, &thread_axis("blockIdx.x").unwrap())
            .unwrap();
        s.stage(t)
            .bind(&i, &thread_axis("threadIdx.x").unwrap())
            .unwrap();
    }
    let args = [a, c];
    let host = driver::lower(&s, &args, "two", true).unwrap();
    let split = split_host_device(4, "opencl")
        .run(host, &PassContext::default())
        .unwrap();
    let text = split.lookup("two").unwrap().to_string();
    assert!(text.contains(r#"T.call_packed("two_kernel0", "#), "{text}");
    assert!(text.contains(r#"T.call_packed("two_kernel1", "#), "{text}");
    // The intermediate buffer is allocated by the host, on the device.
    let lowered = kiln_tir::transform::lower_tvm_builtin()
        .run(split, &PassContext::default())
        .unwrap();
    let text = lowered.lookup("two").unwrap().to_string();
    assert!(
        text.contains("T.TVMBackendAllocWorkspace(4, 0, T.int64(4000)"),
        "{text}"
    );
    let dev = build_opencl(&s, &args, "two");
    let f = functions(&dev);
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].name, "two_kernel0");
    assert_eq!(f[1].name, "two_kernel1");
    assert_eq!(f[1].arg_types, vec![DataType::handle(); 2]);
}

#[test]
fn int64_indices_are_long() {
    let n = PrimExpr::i64(300);
    let a = placeholder(std::slice::from_ref(&n), DataType::float(32), "A");
    let b = compute(std::slice::from_ref(&n), |i| a.at_vars(i) + 1.0, "B");
    let s = create_schedule(&[b.op().clone()]);
    let (o, i) = s.stage(&b).split(&b.axis(0), 64).unwrap();
    s.stage(&b)
        .bind(&o, &thread_axis("blockIdx.x").unwrap())
        .unwrap();
    s.stage(&b)
        .bind(&i, &thread_axis("threadIdx.x").unwrap())
        .unwrap();
    let dev = build_opencl(&s, &[a, b], "wide");
    let src = dev.inspect_source("cl").unwrap();
    assert!(
        src.contains("((long)(((int)get_group_id(0)))) * 64L"),
        "{src}"
    );
    assert!(src.contains("300L"), "{src}");
}

#[test]
fn names_of_opencl_builtins_are_renamed() {
    let n = PrimExpr::i32(64);
    let a = placeholder(std::slice::from_ref(&n), DataType::float(32), "min");
    let b = compute(
        std::slice::from_ref(&n),
        |i| kiln_tir::min(a.at_vars(i), PrimExpr::f32(0.0)),
        "local",
    );
    let s = create_schedule(&[b.op().clone()]);
    s.stage(&b)
        .bind(&b.axis(0), &thread_axis("threadIdx.x").unwrap())
        .unwrap();
    let dev = build_opencl(&s, &[a, b], "names");
    let src = dev.inspect_source("cl").unwrap();
    assert!(
        src.contains("(__global const float* restrict min_, __global float* restrict local_)"),
        "{src}"
    );
    assert!(src.contains("fmin(min_["), "{src}");
}
