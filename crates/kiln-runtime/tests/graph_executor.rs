//! The graph executor over a library whose kernels are Rust closures (`graph_executor_support`):
//! results, storage sharing, inputs and outputs (copy and zero copy), params, errors, the debug
//! mode, the module interface, and several executors running at once.

mod graph_executor_support;

use graph_executor_support::*;
#[cfg(feature = "compiler")]
use kiln_ffi::Map;
use kiln_ffi::{Any, DataType, Device, Function};
#[cfg(feature = "compiler")]
use kiln_runtime::graph_executor::save_params;
use kiln_runtime::graph_executor::{Graph, GraphExecutor, GraphExecutorModule};
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor;
use kiln_testing::error::expect_err;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn executor() -> GraphExecutor {
    GraphExecutor::from_json(MLP_GRAPH, fake_lib().0, &[Device::cpu(0)]).unwrap()
}

fn set_all(g: &mut GraphExecutor, inputs: &[Tensor]) {
    for (i, t) in inputs.iter().enumerate() {
        g.set_input(i, t).unwrap();
    }
}

fn check_outputs(g: &GraphExecutor, inputs: &[Tensor]) {
    let (lo, hi) = mlp_reference(inputs);
    assert_close(&g.get_output(0).unwrap().to_vec::<f32>().unwrap(), &lo);
    assert_close(&g.get_output(1).unwrap().to_vec::<f32>().unwrap(), &hi);
}

#[test]
fn runs_the_graph_and_matches_the_reference() {
    let (lib, calls) = fake_lib();
    let mut g = GraphExecutor::from_json(MLP_GRAPH, lib, &[Device::cpu(0)]).unwrap();
    assert_eq!((g.num_inputs(), g.num_outputs()), (4, 2));
    for round in 0..3 {
        let inputs = mlp_inputs();
        set_all(&mut g, &inputs);
        g.get_output(0)
            .unwrap()
            .copy_from(&poisoned(&[4, 8]))
            .unwrap();
        g.get_output(1)
            .unwrap()
            .copy_from(&poisoned(&[4, 8]))
            .unwrap();
        g.run().unwrap();
        check_outputs(&g, &inputs);
        assert_eq!(calls.load(Ordering::Relaxed), 5 * (round + 1));
    }
}

#[test]
fn entries_with_one_storage_id_share_memory() {
    let g = executor();
    // 7 storage ids for 10 entries: 4 inputs (32+128+16+64 floats) + 64 + 64 + 32 floats.
    assert_eq!(g.storage_bytes(), 4 * (32 + 128 + 16 + 64 + 64 + 64 + 32));
    let graph = Graph::parse(MLP_GRAPH).unwrap();
    assert_eq!(graph.num_entries(), 10);
    // Output 0 (entry 7) reuses the relu's storage (entry 5), output 1 the add's (entry 6).
    assert_eq!(graph.storage_ids[7], graph.storage_ids[5]);
}

#[test]
fn inputs_by_name_and_index_with_clear_errors() {
    let mut g = executor();
    assert_eq!(g.input_index("w"), Some(1));
    assert_eq!(g.input_index("nope"), None);
    assert_eq!(g.input_name(3).unwrap(), "r");
    let (shape, dtype) = g.input_info(0).unwrap();
    assert_eq!((shape, dtype), (&[4i64, 8][..], DataType::float(32)));
    assert_eq!(g.output_info(1).unwrap().0, &[4, 8]);
    let w = Tensor::from_slice(&random(128), &[16, 8]).unwrap();
    g.set_input_by_name("w", &w).unwrap();
    assert_eq!(
        g.get_input(1).unwrap().to_vec::<f32>().unwrap(),
        w.to_vec::<f32>().unwrap()
    );

    let e = expect_err(
        g.set_input_by_name("x", &w),
        "ValueError",
        "input \"x\" (#0)",
    );
    assert!(e.message().contains("[4, 8]") && e.message().contains("[16, 8]"));
    let ints = Tensor::from_slice(&[0i32; 32], &[4, 8]).unwrap();
    let e = expect_err(g.set_input(0, &ints), "TypeError", "");
    assert!(e.message().contains("float32") && e.message().contains("int32"));
    expect_err(g.set_input(9, &w), "IndexError", "4 inputs (x, w, b, r)");
    let e = expect_err(g.set_input_by_name("weights", &w), "KeyError", "");
    assert!(e.message().contains("\"weights\""));
    assert_eq!(g.get_output(2).unwrap_err().kind(), "IndexError");
}

#[test]
fn zero_copy_inputs_and_outputs() {
    let mut g = executor();
    let inputs = mlp_inputs();
    set_all(&mut g, &inputs);
    let x = Tensor::from_slice(&random(32), &[4, 8]).unwrap();
    g.set_input_zero_copy(0, &x).unwrap();
    assert_eq!(g.get_input(0).unwrap().raw_data(), x.raw_data());
    let out = poisoned(&[4, 8]);
    g.set_output_zero_copy(0, &out).unwrap();
    g.run().unwrap();
    let mut now = inputs.clone();
    now[0] = x.clone();
    assert_close(&out.to_vec::<f32>().unwrap(), &mlp_reference(&now).0);
    // Writing into the bound tensor is seen by the next run, without set_input.
    let x2 = random(32);
    x.copy_from_slice(&x2).unwrap();
    g.run().unwrap();
    now[0] = Tensor::from_slice(&x2, &[4, 8]).unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &mlp_reference(&now).0);
    // set_input goes back to the executor's own memory.
    g.set_input(0, &inputs[0]).unwrap();
    assert_ne!(g.get_input(0).unwrap().raw_data(), x.raw_data());
    g.run().unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &mlp_reference(&inputs).0);

    // Misaligned, wrongly shaped and non-contiguous tensors are refused.
    let big = Tensor::from_slice(&random(33), &[33]).unwrap();
    let e = g.set_input_zero_copy(0, &big).unwrap_err();
    assert!(
        e.message().contains("expected shape [4, 8]"),
        "{}",
        e.message()
    );
    let raw = Tensor::from_slice(&[0f32; 40], &[40]).unwrap();
    // SAFETY: `raw` holds 40 floats, enough for the 4x8 view 4 bytes in, and outlives `unaligned`;
    // the view copies its shape.
    let unaligned = unsafe {
        let mut dl = *raw.dl_tensor();
        dl.byte_offset = 4;
        let shape = [4i64, 8];
        dl.shape = shape.as_ptr() as *mut i64;
        dl.ndim = 2;
        dl.strides = std::ptr::null_mut();
        Tensor::from_dltensor_borrowed(&dl).unwrap()
    };
    let e = g.set_input_zero_copy(0, &unaligned).unwrap_err();
    assert!(
        e.message().contains("aligned to 64 bytes"),
        "{}",
        e.message()
    );
    // ... but copying from it is fine.
    g.set_input(0, &unaligned).unwrap();
}

#[test]
fn copy_outputs_into_caller_tensors() {
    let mut g = executor();
    let inputs = mlp_inputs();
    set_all(&mut g, &inputs);
    g.run().unwrap();
    let out = poisoned(&[4, 8]);
    g.copy_output_to(1, &out).unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &mlp_reference(&inputs).1);
    let e = g.copy_output_to(1, &poisoned(&[8, 4])).unwrap_err();
    assert!(e.message().contains("output #1"), "{}", e.message());
}

// Writing params needs the `compiler` feature.
#[cfg(feature = "compiler")]
#[test]
fn params_load_and_share() {
    let inputs = mlp_inputs();
    let bytes =
        save_params([("w", &inputs[1]), ("b", &inputs[2]), ("unused", &inputs[0])]).unwrap();
    let mut a = executor();
    assert_eq!(
        a.load_params(&bytes).unwrap(),
        2,
        "unknown names are skipped"
    );
    a.set_input(0, &inputs[0]).unwrap();
    a.set_input(3, &inputs[3]).unwrap();
    a.run().unwrap();
    check_outputs(&a, &inputs);

    let mut b = executor();
    assert_eq!(b.share_params(&a, &bytes).unwrap(), 2);
    assert_eq!(
        b.get_input(1).unwrap().raw_data(),
        a.get_input(1).unwrap().raw_data()
    );
    assert_ne!(
        b.get_input(0).unwrap().raw_data(),
        a.get_input(0).unwrap().raw_data()
    );
    b.set_input(0, &inputs[0]).unwrap();
    b.set_input(3, &inputs[3]).unwrap();
    b.run().unwrap();
    check_outputs(&b, &inputs);

    let bad = save_params([("w", &inputs[0])]).unwrap();
    let e = a.load_params(&bad).unwrap_err();
    assert!(e.message().contains("param \"w\""), "{}", e.message());
    let e = a.load_params(&bytes[..bytes.len() - 3]).unwrap_err();
    assert!(e.message().contains("byte offset"), "{}", e.message());
}

/// Each mutation of the test graph and a piece of the error it must give.
#[test]
fn malformed_graphs_give_errors_that_name_the_place() {
    let cases: &[(&str, &str, &str)] = &[
        ("\"nodes\": [", "\"nodes\": [[", "invalid JSON"),
        ("\"arg_nodes\"", "\"arg_nodez\"", "no `arg_nodes`"),
        (
            "[0, 1, 2, 3, 4, 5, 4, 5, 6, 4]",
            "[0, 1, 2, 3, 4, 5, 4, 5, 6, 40]",
            "storage_id[9] = 40",
        ),
        (
            "[0, 1, 2, 3, 4, 5, 4, 5, 6, 4]",
            "[0, 1, 2, 3, 4, -5, 4, 5, 6, 4]",
            "storage_id[5] = -5",
        ),
        (
            "[0, 1, 2, 3, 4, 5, 4, 5, 6, 4]",
            "[0, 1, 2, 3, 4, 5, 4, 5, 6]",
            "storage_id has 9 items",
        ),
        (
            "\"op\": \"tvm_op\", \"name\": \"fused_relu\"",
            "\"op\": \"conv\", \"name\": \"fused_relu\"",
            "nodes[5] (\"fused_relu\"): unknown op \"conv\"",
        ),
        (
            "[[4, 0, 0]]",
            "[[6, 0, 0]]",
            "nodes[5] (\"fused_relu\"): input #0 refers to node 6",
        ),
        (
            "[[7, 1, 0]]",
            "[[7, 2, 0]]",
            "reads output 2 of nodes[7] (\"fused_split\"), which has 2 outputs",
        ),
        (
            "\"num_inputs\": \"2\"",
            "\"num_inputs\": \"3\"",
            "nodes[6] (\"fused_add\"): attrs.num_inputs is 3",
        ),
        (
            "\"num_outputs\": \"2\"",
            "\"num_outputs\": \"1\"",
            "nodes[7] (\"fused_split\"): node_row_ptr",
        ),
        (
            "\"func_name\": \"relu\",",
            "",
            "nodes[5] (\"fused_relu\"): attrs has no `func_name`",
        ),
        (
            "\"num_inputs\": \"1\", \"num_outputs\": \"1\", \"flatten_data\": \"1\"",
            "\"num_inputs\": \"one\", \"num_outputs\": \"1\"",
            "nodes[8] (\"fused_relu_flat\"): attrs.num_inputs must be an integer",
        ),
        (
            "\"float32\", \"float32\"]]",
            "\"float32\", \"floaty\"]]",
            "attrs.dltype[9]: unknown data type \"floaty\"",
        ),
        (
            "[4, 8], [16, 8]",
            "[4, -8], [16, 8]",
            "attrs.shape[0] must hold non-negative integers",
        ),
        (
            "\"arg_nodes\": [0, 1, 2, 3]",
            "\"arg_nodes\": [0, 1, 2, 4]",
            "arg_nodes[3] is nodes[4] (\"fused_dense\")",
        ),
        (
            "\"arg_nodes\": [0, 1, 2, 3]",
            "\"arg_nodes\": [0, 1, 2, 30]",
            "arg_nodes[3] is node 30",
        ),
        (
            "\"name\": \"w\"",
            "\"name\": \"x\"",
            "two inputs are named \"x\"",
        ),
        (
            "[[7, 0, 0], [8, 0, 0]]",
            "[[7, 0, 0], [9, 0, 0]]",
            "heads[1] refers to node 9",
        ),
        (
            "[0, 1, 2, 3, 4, 5, 6, 7, 9, 10]",
            "[0, 1, 2, 3, 4, 5, 6, 7, 9]",
            "node_row_ptr has 9 items",
        ),
        (
            "[[0, 0, 0], [1, 0, 0], [2, 0, 0]]",
            "[[0, 0, 0], [1], [2, 0, 0]]",
            "nodes[4] (\"fused_dense\"): inputs[1] must be [node_id, index]",
        ),
        (
            "\"device_index\": [\"list_int\", [1,",
            "\"device_index\": [\"list_int\", [0,",
            "attrs.device_index[0] must be a DLPack device type",
        ),
        (
            "\"shape\": [\"list_shape\"",
            "\"shape\": [\"list_int\"",
            "attrs.shape must be [\"list_shape\", [...]]",
        ),
    ];
    for (from, to, want) in cases {
        assert!(MLP_GRAPH.contains(from), "the test graph has no {from:?}");
        let text = MLP_GRAPH.replacen(from, to, 1);
        let e = GraphExecutor::from_json(&text, fake_lib().0, &[Device::cpu(0)]).unwrap_err();
        assert_eq!(e.kind(), "ValueError", "{want}: {}", e.message());
        assert!(
            e.message().contains(want),
            "wanted {want:?} in: {}",
            e.message()
        );
    }
    for text in ["", "[]", "{}", "{\"nodes\": 3}", "null"] {
        let e = GraphExecutor::from_json(text, fake_lib().0, &[Device::cpu(0)]).unwrap_err();
        assert!(e.message().starts_with("graph JSON: "), "{}", e.message());
    }
}

#[test]
fn a_function_missing_from_the_library_names_the_node() {
    let text = MLP_GRAPH.replace("\"func_name\": \"add\"", "\"func_name\": \"add_v2\"");
    let e = expect_err(
        GraphExecutor::from_json(&text, fake_lib().0, &[Device::cpu(0)]),
        "AttributeError",
        "",
    );
    assert!(
        e.message()
            .contains("nodes[6] (\"fused_add\") calls `add_v2`"),
        "{}",
        e.message()
    );
    assert!(e.message().contains("kiln_test.kernels"), "{}", e.message());
    let e = GraphExecutor::from_json(MLP_GRAPH, fake_lib().0, &[]).unwrap_err();
    assert!(e.message().contains("at least one device"));
    let e = GraphExecutor::from_json(MLP_GRAPH, fake_lib().0, &[Device::new(42, 0)]).unwrap_err();
    assert!(e.message().contains("42"), "{}", e.message());
}

#[test]
fn a_failing_kernel_names_the_node_and_the_executor_stays_usable() {
    let text = MLP_GRAPH.replace("\"func_name\": \"relu1d\"", "\"func_name\": \"fail\"");
    let mut g = GraphExecutor::from_json(&text, fake_lib().0, &[Device::cpu(0)]).unwrap();
    set_all(&mut g, &mlp_inputs());
    for _ in 0..2 {
        let e = expect_err(g.run(), "ValueError", "always fails");
        assert!(
            e.message()
                .contains("nodes[8] (\"fused_relu_flat\") (function `fail`)"),
            "{}",
            e.message()
        );
    }
    // A kernel that gets the wrong arguments (flatten_data off for relu1d) fails the same way.
    let text = MLP_GRAPH.replace("\"flatten_data\": \"1\"", "\"flatten_data\": \"0\"");
    let mut g = GraphExecutor::from_json(&text, fake_lib().0, &[Device::cpu(0)]).unwrap();
    let e = g.run().unwrap_err();
    assert!(e.message().contains("1-D"), "{}", e.message());
}

#[test]
fn nop_and_copy_nodes() {
    let graph = r#"{
      "nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "tvm_op", "name": "copy", "inputs": [[0, 0, 0]],
         "attrs": {"func_name": "__copy", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}},
        {"op": "tvm_op", "name": "nothing", "inputs": [[1, 0, 0]],
         "attrs": {"func_name": "__nop", "num_inputs": "1", "num_outputs": "0", "flatten_data": "0"}}
      ],
      "arg_nodes": [0], "heads": [[1, 0, 0], [0, 0]], "node_row_ptr": [0, 1, 2, 2],
      "attrs": {"shape": ["list_shape", [[3], [3]]], "dltype": ["list_str", ["int64", "int64"]],
                "storage_id": ["list_int", [0, 1]]}
    }"#;
    let mut g = GraphExecutor::from_json(graph, fake_lib().0, &[Device::cpu(0)]).unwrap();
    g.set_input(0, &Tensor::from_slice(&[5i64, -6, 7], &[3]).unwrap())
        .unwrap();
    g.run().unwrap();
    assert_eq!(
        g.get_output(0).unwrap().to_vec::<i64>().unwrap(),
        [5, -6, 7]
    );
    // An input can be an output directly.
    assert_eq!(
        g.get_output(1).unwrap().to_vec::<i64>().unwrap(),
        [5, -6, 7]
    );
    let bad = graph.replace("[[3], [3]]", "[[3], [4]]");
    let e = GraphExecutor::from_json(&bad, fake_lib().0, &[Device::cpu(0)]).unwrap_err();
    assert!(
        e.message().contains("nodes[1] (\"copy\") is a `__copy`"),
        "{}",
        e.message()
    );
}

#[test]
fn debug_mode_times_every_node() {
    let mut g = executor();
    let inputs = mlp_inputs();
    set_all(&mut g, &inputs);
    let times = g.run_individual(3, 2, 0).unwrap();
    assert_eq!(times.len(), 9);
    assert!(times[..4].iter().all(|&t| t == 0.0));
    assert!(times[4..].iter().all(|&t| t > 0.0), "{times:?}");
    let p = g.profile(2, 1, 1).unwrap();
    assert_eq!(p.rows.len(), 5);
    let pct: f64 = p.rows.iter().map(|r| r.percent).sum();
    assert!((pct - 100.0).abs() < 1e-6, "{pct}");
    let table = p.to_string();
    for name in [
        "fused_dense",
        "fused_split",
        "relu1d",
        "Total",
        "Time (us)",
        "[4, 16] float32",
    ] {
        assert!(table.contains(name), "{name} not in\n{table}");
    }
    assert_eq!(g.run_individual(0, 1, 0).unwrap_err().kind(), "ValueError");
    // The outputs after the profile are still right.
    check_outputs(&g, &inputs);
    let outs = g.debug_get_node_output(7).unwrap();
    assert_eq!(outs.len(), 2);
    assert_close(&outs[0].to_vec::<f32>().unwrap(), &mlp_reference(&inputs).0);
    assert_eq!(
        g.debug_get_node_output(99).unwrap_err().kind(),
        "IndexError"
    );
}

fn call(m: &Module, name: &str, args: &[Any]) -> kiln_ffi::Result<Any> {
    m.function(name)?.call_any(args)
}

// Writing params needs the `compiler` feature.
#[cfg(feature = "compiler")]
#[test]
fn module_interface_uses_tvms_names() {
    let exec = GraphExecutorModule::new_module(executor());
    assert_eq!(exec.kind(), "GraphExecutor");
    let inputs = mlp_inputs();
    for (i, (name, _)) in MLP_INPUTS.iter().enumerate() {
        let key: Any = if i % 2 == 0 {
            (*name).into()
        } else {
            (i as i64).into()
        };
        call(&exec, "set_input", &[key, inputs[i].clone().into()]).unwrap();
    }
    call(&exec, "run", &[]).unwrap();
    let out: Tensor = call(&exec, "get_output", &[0i64.into()])
        .unwrap()
        .try_as()
        .unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &mlp_reference(&inputs).0);
    let into = poisoned(&[4, 8]);
    call(&exec, "get_output", &[1i64.into(), into.clone().into()]).unwrap();
    assert_close(&into.to_vec::<f32>().unwrap(), &mlp_reference(&inputs).1);
    let n = |f: &str| call(&exec, f, &[]).unwrap().try_as::<i64>().unwrap();
    assert_eq!((n("get_num_inputs"), n("get_num_outputs")), (4, 2));
    let idx = |s: &str| {
        call(&exec, "get_input_index", &[s.into()])
            .unwrap()
            .try_as::<i64>()
            .unwrap()
    };
    assert_eq!((idx("r"), idx("zzz")), (3, -1));
    let info: Map = call(&exec, "get_input_info", &[])
        .unwrap()
        .try_as()
        .unwrap();
    let shapes: Map = info.get("shape").unwrap().try_as().unwrap();
    let w: kiln_ffi::Shape = shapes.get("w").unwrap().try_as().unwrap();
    assert_eq!(w.as_slice(), &[16, 8]);
    let prof: Map = call(&exec, "profile", &[1i64.into()])
        .unwrap()
        .try_as()
        .unwrap();
    let table: String = prof.get("table").unwrap().try_as().unwrap();
    assert!(table.contains("fused_add"), "{table}");

    // Wrong argument counts and types are TypeErrors that name the function.
    let e = expect_err(call(&exec, "set_input", &["x".into()]), "TypeError", "");
    assert!(
        e.message()
            .contains("GraphExecutor.set_input(key, value) takes 2 arguments but got 1"),
        "{}",
        e.message()
    );
    let e = call(&exec, "run", &[1i64.into()]).unwrap_err();
    assert!(e.message().contains("takes 0 arguments"), "{}", e.message());
    let e = call(&exec, "set_input", &["x".into(), 3i64.into()]).unwrap_err();
    assert!(
        e.message().contains("argument #1 must be a tensor"),
        "{}",
        e.message()
    );
    let e = call(
        &exec,
        "set_input",
        &[1.5f64.into(), inputs[0].clone().into()],
    )
    .unwrap_err();
    assert!(
        e.message().contains("input name or index"),
        "{}",
        e.message()
    );
    expect_err(
        call(&exec, "get_output", &[(-1i64).into()]),
        "IndexError",
        "",
    );
    let e = call(
        &exec,
        "share_params",
        &[
            Module::new(FakeLib {
                calls: Default::default(),
            })
            .into(),
            Any::from(&b""[..]),
        ],
    )
    .unwrap_err();
    assert!(e.message().contains("kiln_test.kernels"), "{}", e.message());
    assert!(exec.get_function("no_such", false).unwrap().is_none());

    // share_params through the module interface.
    let other = GraphExecutorModule::new_module(executor());
    let bytes = save_params([("w", &inputs[1])]).unwrap();
    call(
        &other,
        "share_params",
        &[exec.clone().into(), Any::from(bytes.clone())],
    )
    .unwrap();
    let a: Tensor = call(&exec, "get_input", &["w".into()])
        .unwrap()
        .try_as()
        .unwrap();
    let b: Tensor = call(&other, "get_input", &[1i64.into()])
        .unwrap()
        .try_as()
        .unwrap();
    assert_eq!(a.raw_data(), b.raw_data());
    call(
        &exec,
        "share_params",
        &[exec.clone().into(), Any::from(bytes)],
    )
    .unwrap();
}

#[test]
fn several_executors_over_one_library_run_concurrently() {
    let (lib, calls) = fake_lib();
    let graph = Arc::new(Graph::parse(MLP_GRAPH).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (lib, graph) = (lib.clone(), graph.clone());
            std::thread::spawn(move || {
                let mut g = GraphExecutor::new(graph, lib, &[Device::cpu(0)]).unwrap();
                for _ in 0..25 {
                    let inputs = mlp_inputs();
                    set_all(&mut g, &inputs);
                    g.run().unwrap();
                    check_outputs(&g, &inputs);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(calls.load(Ordering::Relaxed), 8 * 25 * 5);
}

#[test]
fn one_executor_module_shared_by_threads_serializes_calls() {
    let exec = GraphExecutorModule::new_module(executor());
    let inputs = mlp_inputs();
    for (i, t) in inputs.iter().enumerate() {
        call(&exec, "set_input", &[(i as i64).into(), t.clone().into()]).unwrap();
    }
    let run: Function = exec.function("run").unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let run = run.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    run.call_any(&[]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let node = exec.downcast_node::<GraphExecutorModule>().unwrap();
    check_outputs(&node.lock(), &inputs);
}

#[test]
fn graph_json_round_trips() {
    let g = Graph::parse(MLP_GRAPH).unwrap();
    let again = Graph::parse(&g.to_json()).unwrap();
    assert_eq!(g, again);
    assert_eq!(g.input_names(), ["x", "w", "b", "r"]);
    assert!(g.nodes[8].param.as_ref().unwrap().flatten_data);
}
