//! The graph executor factory: executors from `default(device)`, its other functions, its
//! serialized form, and the whole path of seed 001 without TVM: C kernels compiled to an object
//! file, a factory over them, `export_library` to one `.so`, `load_module`, run.
// Factories from parts and export_library need the `compiler` feature.
#![cfg(feature = "compiler")]

mod graph_executor_support;
mod module_support;

use graph_executor_support::*;
use kiln_ffi::{Array, Device, Map};
use kiln_runtime::graph_executor::{GraphExecutorFactory, StaticLibrary};
use kiln_runtime::module::{export_library, load_module, ExportOptions, Module};
use kiln_runtime::tensor::Tensor;
use kiln_testing::error::expect_err;
use module_support::Scratch;
use std::path::PathBuf;
use std::process::Command;

fn weights() -> Vec<(String, Tensor)> {
    let inputs = mlp_inputs();
    vec![
        ("w".to_string(), inputs[1].clone()),
        ("b".to_string(), inputs[2].clone()),
    ]
}

fn run_executor(exec: &Module, params: &[(String, Tensor)]) {
    let x = Tensor::from_slice(&random(32), &[4, 8]).unwrap();
    let r = Tensor::from_slice(&random(64), &[4, 16]).unwrap();
    let set = exec.function("set_input").unwrap();
    set.call_any(&["x".into(), x.clone().into()]).unwrap();
    set.call_any(&["r".into(), r.clone().into()]).unwrap();
    let get = exec.function("get_output").unwrap();
    for i in 0..2i64 {
        let out: Tensor = get.call_any(&[i.into()]).unwrap().try_as().unwrap();
        out.copy_from(&poisoned(&[4, 8])).unwrap();
    }
    exec.function("run").unwrap().call_any(&[]).unwrap();
    let all = [x, params[0].1.clone(), params[1].1.clone(), r];
    let (lo, hi) = mlp_reference(&all);
    let out = |i: i64| -> Vec<f32> {
        let t: Tensor = get.call_any(&[i.into()]).unwrap().try_as().unwrap();
        t.to_vec().unwrap()
    };
    assert_close(&out(0), &lo);
    assert_close(&out(1), &hi);
}

fn create(lib: &Module, params: Vec<(String, Tensor)>) -> Module {
    GraphExecutorFactory::create(MLP_GRAPH, lib, params, "default").unwrap()
}

#[test]
fn default_makes_executors_with_the_params_set() {
    let (lib, _) = fake_lib();
    let params = weights();
    let factory = create(&lib, params.clone());
    assert_eq!(factory.kind(), "GraphExecutorFactory");
    let default = factory.function("default").unwrap();
    for _ in 0..2 {
        let exec: Module = default.invoke((Device::cpu(0),)).unwrap();
        assert_eq!(exec.kind(), "GraphExecutor");
        run_executor(&exec, &params);
    }
    let json: String = factory
        .function("get_graph_json")
        .unwrap()
        .invoke(())
        .unwrap();
    assert_eq!(json, MLP_GRAPH);
    let names: Array = factory.function("list_params").unwrap().invoke(()).unwrap();
    assert_eq!(names.to_vec::<String>().unwrap(), ["b", "w"]);
    let map: Map = factory
        .function("get_graph_params")
        .unwrap()
        .invoke(())
        .unwrap();
    let w: Tensor = map.get("w").unwrap().try_as().unwrap();
    assert!(w.same_as(&params[0].1));
    let got: Module = factory.function("get_lib").unwrap().invoke(()).unwrap();
    assert!(got.0.same_as(&lib.0));
    let bare: Module = factory
        .function("remove_params")
        .unwrap()
        .invoke(())
        .unwrap();
    let names: Array = bare.function("list_params").unwrap().invoke(()).unwrap();
    assert!(names.is_empty());
    let dbg: Module = factory
        .function("debug_create")
        .unwrap()
        .invoke(("default", Device::cpu(0)))
        .unwrap();
    run_executor(&dbg, &params);

    // Bad calls.
    let e = default.call_any(&[]).unwrap_err();
    assert!(
        e.message().contains("at least one device"),
        "{}",
        e.message()
    );
    let e = default.call_any(&["cpu".into()]).unwrap_err();
    assert!(e.message().contains("must be a device"), "{}", e.message());
    let e = factory
        .function("debug_create")
        .unwrap()
        .call_any(&["main".into(), Device::cpu(0).into()])
        .unwrap_err();
    assert!(e.message().contains("\"default\""), "{}", e.message());
    assert!(factory.get_function("main", false).unwrap().is_none());
}

#[test]
fn params_must_fit_the_graph() {
    let (lib, _) = fake_lib();
    let x = Tensor::from_slice(&[0f32; 32], &[4, 8]).unwrap();
    let e = expect_err(
        GraphExecutorFactory::create(MLP_GRAPH, &lib, vec![("q".into(), x.clone())], "default"),
        "KeyError",
        "",
    );
    assert!(e.message().contains("\"q\" is not an input") && e.message().contains("x, w, b, r"));
    let e = GraphExecutorFactory::create(MLP_GRAPH, &lib, vec![("w".into(), x)], "default")
        .unwrap_err();
    assert!(
        e.message().contains("param \"w\" is [4, 8] float32"),
        "{}",
        e.message()
    );
    let e = GraphExecutorFactory::create("{", &lib, vec![], "default").unwrap_err();
    assert!(e.message().starts_with("graph JSON"), "{}", e.message());
    let e = GraphExecutorFactory::create(MLP_GRAPH, &lib, vec![], "").unwrap_err();
    assert!(e.message().contains("module name"), "{}", e.message());
}

#[test]
fn serialized_form_round_trips_and_is_checked() {
    let (lib, _) = fake_lib();
    let params = weights();
    let factory = create(&lib, params.clone());
    let bytes = factory.save_to_bytes().unwrap();
    let back = GraphExecutorFactory::load_from_bytes(&bytes).unwrap();
    let node = back.downcast_node::<GraphExecutorFactory>().unwrap();
    assert_eq!(node.graph_json(), MLP_GRAPH);
    assert_eq!(node.module_name(), "default");
    assert_eq!(
        node.params()["w"].to_vec::<f32>().unwrap(),
        params[0].1.to_vec::<f32>().unwrap()
    );
    // Without its library the factory says so; with it, it runs.
    let e = back
        .function("default")
        .unwrap()
        .call_any(&[Device::cpu(0).into()])
        .unwrap_err();
    assert!(e.message().contains("no library"), "{}", e.message());
    back.import(&lib).unwrap();
    let exec: Module = back
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap();
    run_executor(&exec, &params);
    // Through the registered loader too.
    let again = kiln_runtime::module::load_from_bytes("GraphExecutorFactory", &bytes).unwrap();
    assert_eq!(again.kind(), "GraphExecutorFactory");
    // Every truncation is an error with a byte offset, never a crash.
    for cut in (0..bytes.len()).step_by(7) {
        let e = GraphExecutorFactory::load_from_bytes(&bytes[..cut]).unwrap_err();
        assert!(
            e.message().contains("byte offset"),
            "{cut}: {}",
            e.message()
        );
    }
    let mut long = bytes.clone();
    long.push(1);
    assert!(GraphExecutorFactory::load_from_bytes(&long)
        .unwrap_err()
        .message()
        .contains("unread bytes"));
}

#[test]
fn functions_outlive_the_factory_safely() {
    let (lib, _) = fake_lib();
    let params = weights();
    let factory = create(&lib, params.clone());
    let default = factory.function("default").unwrap();
    let exec: Module = default.invoke((Device::cpu(0),)).unwrap();
    drop(factory);
    // The executor keeps the library.
    exec.function("run").unwrap().call_any(&[]).unwrap();
    // So does `default`: `load_module(path)["default"](dev)` drops the factory before the
    // call, and works in TVM.
    let later: Module = default.invoke((Device::cpu(0),)).unwrap();
    run_executor(&later, &params);
    drop(default);
    let get_lib = create(&lib, weights()).function("get_lib").unwrap();
    let kept: Module = get_lib.invoke(()).unwrap();
    assert!(kept.0.same_as(&lib.0));
}

#[test]
fn executors_from_one_factory_run_concurrently() {
    let (lib, calls) = fake_lib();
    let params = weights();
    let factory = create(&lib, params.clone());
    let default = factory.function("default").unwrap();
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (default, params) = (default.clone(), params.clone());
            std::thread::spawn(move || {
                let exec: Module = default.invoke((Device::cpu(0),)).unwrap();
                for _ in 0..20 {
                    run_executor(&exec, &params);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 6 * 20 * 5);
}

/// Compiles `kernels.c` into an object file.
fn kernels_object(dir: &Scratch) -> PathBuf {
    let c = dir.path("kernels.c");
    std::fs::write(&c, KERNELS_C).unwrap();
    let o = dir.path("kernels.o");
    let out = Command::new("cc")
        .args(["-c", "-fPIC", "-O2", "-o"])
        .arg(&o)
        .arg(&c)
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    o
}

#[test]
fn export_library_packs_factory_params_and_kernels_into_one_so() {
    let dir = Scratch::new("graph-export");
    let names = KERNEL_NAMES.iter().map(|s| s.to_string()).collect();
    let lib = StaticLibrary::load(kernels_object(&dir), names).unwrap();
    assert_eq!(lib.kind(), "static_library");
    assert!(lib.implements_function("dense", false));
    let params = weights();
    let factory = create(&lib, params.clone());
    // A static library cannot run: creating an executor says what to do.
    let e = factory
        .function("default")
        .unwrap()
        .call_any(&[Device::cpu(0).into()])
        .unwrap_err();
    assert!(
        e.message().contains("export the factory"),
        "{}",
        e.message()
    );

    let so = dir.path("deploy.so");
    export_library(&factory, &so, &ExportOptions::default()).unwrap();
    drop(factory);
    let loaded = load_module(&so).unwrap();
    assert_eq!(loaded.kind(), "GraphExecutorFactory");
    assert_eq!(loaded.imports()[0].kind(), "library");
    let default = loaded.function("default").unwrap();
    let execs: Vec<Module> = (0..3)
        .map(|_| default.invoke((Device::cpu(0),)).unwrap())
        .collect();
    let threads: Vec<_> = execs
        .into_iter()
        .map(|exec| {
            let params = params.clone();
            std::thread::spawn(move || {
                for _ in 0..20 {
                    run_executor(&exec, &params);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Kernel errors from C come back naming the node.
    let json = MLP_GRAPH.replace("\"func_name\": \"relu1d\"", "\"func_name\": \"fail\"");
    let lib2: Module = loaded.imports()[0].clone();
    let f = GraphExecutorFactory::create(&json, &lib2, vec![], "default").unwrap();
    let exec: Module = f
        .function("default")
        .unwrap()
        .invoke((Device::cpu(0),))
        .unwrap();
    let e = expect_err(
        exec.function("run").unwrap().call_any(&[]),
        "ValueError",
        "",
    );
    assert!(
        e.message().contains("always fails") && e.message().contains("fused_relu_flat"),
        "{}",
        e.message()
    );
}
