//! `kiln inspect`: describe a compiled library (module kinds, functions, import tree; for a
//! graph executor factory its inputs, outputs, node count and params) or an ONNX model (opset,
//! inputs, outputs, op counts, and the graph IR after the default pipeline, fusion included).

use crate::compile::human_size;
use kiln_graph::transform::PassContext;
use kiln_runtime::graph_executor::GraphExecutorFactory;
use kiln_runtime::module::{load_module, Module};
use kiln_runtime::vm::VmFactory;
use std::path::Path;

/// Runs `kiln inspect` on `path`: an ONNX model if it ends in `.onnx`, a library otherwise.
pub fn run(path: &Path, input_shapes: &[String], opt_level: u8) -> Result<(), String> {
    if !path.exists() {
        return Err(format!("{} does not exist", path.display()));
    }
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        inspect_onnx(path, input_shapes, opt_level)
    } else {
        println!("{}", path.display());
        // Read from the file first, so a library this CPU cannot run still shows what it needs.
        print_target_records(path)?;
        let m = load_module(path).map_err(|e| crate::load_error(path, &e))?;
        print_module(&m, 0);
        Ok(())
    }
}

/// Prints the library's target records (what each code variant needs of the CPU) and which
/// variant runs on this machine; nothing for a library without records (Apache TVM's).
fn print_target_records(path: &Path) -> Result<(), String> {
    use kiln_runtime::module::target_record::{parse_section, select, TARGET_RECORD_SECTION};
    // A file whose section cannot be read is reported by the load that follows.
    let Ok(Some(bytes)) = kiln_runtime::module::elf::section_of_file(path, TARGET_RECORD_SECTION)
    else {
        return Ok(());
    };
    let records = parse_section(&bytes)
        .map_err(|e| format!("{}: section {TARGET_RECORD_SECTION}: {e}", path.display()))?;
    let chosen = select(&records).ok();
    println!("code variants ({}):", records.len());
    for (i, r) in records.iter().enumerate() {
        let tag = if r.variant.is_empty() {
            "default"
        } else {
            &r.variant
        };
        let here = if chosen == Some(i) {
            "  <- runs on this machine"
        } else {
            ""
        };
        println!("  {tag}: {} (CPU {}, {}){here}", r.target, r.cpu, r.triple);
        println!("    features: {}", r.features.join(" "));
    }
    if chosen.is_none() {
        println!(
            "  (none runs on this machine: {})",
            kiln_runtime::cpu::host_cpu_brand()
        );
    }
    Ok(())
}

/// Prints `m` and its imports, indented by depth.
fn print_module(m: &Module, depth: usize) {
    let pad = "  ".repeat(depth);
    println!("{pad}module {:?}", m.kind());
    let mut names = m.function_names();
    if !names.is_empty() {
        names.sort();
        let what = if m.kind() == "library" {
            "functions"
        } else {
            "kernels"
        };
        println!("{pad}  {what} ({}): {}", names.len(), names.join(", "));
    }
    if let Some(f) = m.downcast_node::<GraphExecutorFactory>() {
        print_factory(f, &pad);
    }
    if let Some(f) = m.downcast_node::<VmFactory>() {
        print_vm_factory(f, &pad);
    }
    print_placement(m, &pad);
    let imports = m.imports();
    if !imports.is_empty() {
        println!("{pad}  imports:");
        for i in &imports {
            print_module(i, depth + 2);
        }
    }
}

/// For a host library importing device modules (a build for `opencl` or `cuda`): where each
/// of its functions runs, on the device (launching kernels `NAME_kernelK`) or on the host.
fn print_placement(m: &Module, pad: &str) {
    let devices: Vec<Module> = m
        .imports()
        .into_iter()
        .filter(|i| matches!(i.kind().as_str(), "opencl" | "cuda"))
        .collect();
    if devices.is_empty() {
        return;
    }
    let kinds: Vec<String> = devices.iter().map(|d| format!("{:?}", d.kind())).collect();
    let kernels: Vec<String> = devices.iter().flat_map(|d| d.function_names()).collect();
    println!("{pad}  placement (device module {}):", kinds.join(", "));
    let mut names = m.function_names();
    names.sort();
    for name in names {
        let n = kernels
            .iter()
            .filter(|k| {
                k.strip_prefix(name.as_str())
                    .and_then(|rest| rest.strip_prefix("_kernel"))
                    .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
            })
            .count();
        if n > 0 {
            let s = if n == 1 { "" } else { "s" };
            println!("{pad}    {name}: device ({n} kernel{s})");
        } else {
            println!("{pad}    {name}: host");
        }
    }
}

/// Prints a factory's inputs, outputs, nodes and params.
fn print_factory(f: &GraphExecutorFactory, pad: &str) {
    let g = f.graph();
    let params = f.params();
    println!(
        "{pad}  graph executor factory (executor function {:?})",
        f.module_name()
    );
    println!("{pad}  inputs:");
    for &n in &g.arg_nodes {
        let name = &g.nodes[n].name;
        if params.contains_key(name) {
            continue;
        }
        let eid = g.entry_id(n, 0);
        println!("{pad}    {name}: {} {:?}", g.dtypes[eid], g.shapes[eid]);
    }
    println!("{pad}  outputs:");
    for (k, h) in g.heads.iter().enumerate() {
        let eid = g.entry_id(h.node_id, h.index);
        println!(
            "{pad}    output_{k} ({}): {} {:?}",
            g.nodes[h.node_id].name, g.dtypes[eid], g.shapes[eid]
        );
    }
    let ops = g.nodes.iter().filter(|n| !n.is_input()).count();
    println!("{pad}  nodes: {} ({ops} operator calls)", g.nodes.len());
    let bytes: usize = params.values().map(|t| t.nbytes()).sum();
    println!(
        "{pad}  params: {} ({})",
        params.len(),
        human_size(bytes as u64)
    );
}

/// Prints a VM factory's program and the size of each of its segments.
fn print_vm_factory(f: &VmFactory, pad: &str) {
    println!(
        "{pad}  VM factory (executor function {:?}): control flow decided at run time",
        f.module_name()
    );
    println!("{pad}  program:");
    for line in f.code().to_string().lines() {
        println!("{pad}    {line}");
    }
    for (k, s) in f.segments().iter().enumerate() {
        let g = &s.graph;
        let ops = g.nodes.iter().filter(|n| !n.is_input()).count();
        let bytes: usize = s.params.values().map(|t| t.nbytes()).sum();
        println!(
            "{pad}  segment {k}: {} input(s), {} output(s), {ops} operator calls, params {}",
            s.runtime_inputs().len(),
            g.heads.len(),
            human_size(bytes as u64)
        );
    }
}

/// Prints an ONNX model's summary and, when it converts, its graph after optimization.
fn inspect_onnx(path: &Path, input_shapes: &[String], opt_level: u8) -> Result<(), String> {
    let model = kiln_onnx::load_model(path).map_err(|e| e.to_string())?;
    println!("{} (ONNX IR version {})", path.display(), model.ir_version);
    if !model.producer.is_empty() {
        println!("producer: {}", model.producer);
    }
    let opsets: Vec<String> = model
        .opsets
        .iter()
        .map(|(d, v)| format!("{}={v}", if d.is_empty() { "ai.onnx" } else { d }))
        .collect();
    println!("opset: {} ({})", model.opset(), opsets.join(", "));
    let describe = |v: &kiln_onnx::ValueInfo| {
        let dtype = v
            .dtype
            .map(|d| d.to_string())
            .unwrap_or_else(|| format!("elem_type {}", v.elem_type));
        let dims = match &v.dims {
            Some(d) => format!(
                "[{}]",
                d.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "(rank unknown)".into(),
        };
        format!("{}: {dtype} {dims}", v.name)
    };
    println!("inputs:");
    for v in &model.graph.inputs {
        if model.graph.initializer(&v.name).is_none() {
            println!("  {}", describe(v));
        }
    }
    println!("outputs:");
    for v in &model.graph.outputs {
        println!("  {}", describe(v));
    }
    println!(
        "nodes: {}, initializers: {}",
        model.graph.nodes.len(),
        model.graph.initializers().len()
    );
    println!("op counts:");
    for (op, n) in model.graph.op_counts() {
        println!("  {op:<24} {n}");
    }
    let shapes = kiln_onnx::parse_input_shape_flags(input_shapes)
        .map_err(|e| format!("bad --input-shape: {e}"))?;
    if let Ok(Some(p)) = kiln_onnx::from_onnx_program(&model, &shapes, &Default::default()) {
        println!(
            "\ncontrol flow decided at run time: a program for the virtual machine over {} \
             static segment(s):\n{}",
            p.segments.len(),
            p.code
        );
        for (k, m) in p.segments.iter().enumerate() {
            println!("\nsegment {k} (as converted):\n{m}");
        }
        return Ok(());
    }
    let converted = kiln_onnx::from_onnx(&model, &shapes)
        .map_err(|e| e.to_string())
        .and_then(|(m, params)| {
            // As `kiln compile` does by default: weights bound as constants, then the pipeline
            // with layouts for the host CPU.
            let cpu =
                kiln_graph::build::layout_cpu(&["llvm -mcpu=native"]).map_err(|e| e.to_string())?;
            let ctx = PassContext::with_opt_level(opt_level as i64).with_cpu(cpu);
            kiln_graph::build::optimize_with(&m, params, &ctx)
                .map(|(m, _)| m)
                .map_err(|e| e.to_string())
        });
    match converted {
        Ok(m) => println!(
            "\ngraph after the default pipeline (-O{opt_level}, host CPU, weights bound as \
             constants):\n{m}"
        ),
        Err(e) => println!("\n(no Kiln graph: the conversion failed: {e})"),
    }
    Ok(())
}
