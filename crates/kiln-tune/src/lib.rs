//! Kiln's tuner: measures schedule choices per distinct heavy layer of a model on the target
//! CPU and writes the best into a tuning-records file that compiling with those records reads
//! (`kiln tune` / `kiln compile --tuning-records`, `kiln.tune.tune` / `kiln.onnx.compile(...,
//! tuning_records=...)` in Python).
//!
//! The layers are the convolutions and matrix products by constant weights of the optimized
//! graph with their elementwise epilogues (what fusion puts in their kernels), distinct by
//! operators, argument types and attributes. Each is built alone (random
//! weights of its shape) and timed, first with the heuristics, then knob by knob
//! ([`kiln_topi::tuning`]: the kernel of a 1x1 convolution, register tiles, the channels a
//! pass), each knob's choices tried with the others at their best so far; a knob that only a
//! choice reveals (the tile of the kernel a 1x1 convolution switched to) is tried next. A
//! choice must be 3% faster than the best so far, and the winner 3% faster than the heuristics
//! measured again, or the layer keeps the heuristics. The file holds, per layer,
//! the knobs of its workloads, the best time and the heuristic's; layers already in it are
//! not tuned again, so an interrupted tuning resumes. Records are keyed by the CPU they were
//! measured on; compiling for another CPU ignores them. Candidates run in this process, or on
//! the CPU of an RPC server ([`Runner::Remote`]), timed by its time evaluator.

mod globals;
pub use globals::link_globals;

use kiln_graph::ir::{Expr, Function, IRModule, Var};
use kiln_graph::transform::PassContext;
use kiln_runtime::tensor::Tensor;
use kiln_topi::tuning::{Asked, Config, Scope};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What to tune and where.
pub struct TuneOptions {
    /// The tuning-records file (read first when it exists, then rewritten after each layer).
    pub records: PathBuf,
    /// The target string.
    pub target: String,
    /// Static shapes of inputs with symbolic dimensions.
    pub input_shapes: kiln_onnx::InputShapes,
    /// Values of symbolic dimensions (`seq` -> `[16, 64]`): the layers of every shape the
    /// library will hold.
    pub dims: kiln_onnx::DimValues,
    /// Timed runs per candidate (the median counts).
    pub runs: u32,
    /// Where candidates run: this process, or a remote device through Kiln's RPC.
    pub runner: Runner,
}

/// What [`tune`] reports as it goes.
pub enum Event<'a> {
    /// The distinct layers found, those already in the records, and the CPU key.
    Start {
        /// Distinct heavy layers of the model.
        layers: usize,
        /// Of those, already in the records file.
        tuned_before: usize,
        /// The CPU the records are keyed by.
        cpu: &'a str,
    },
    /// A layer is about to be tuned.
    Layer(&'a str),
    /// A layer was tuned (and the records file rewritten).
    Tuned(&'a LayerReport),
}

/// The result of tuning one layer.
#[derive(Clone, Debug)]
pub struct LayerReport {
    /// The layer's signature (its key in the records file).
    pub signature: String,
    /// Its time with the heuristics, in milliseconds.
    pub heuristic_ms: f64,
    /// Its time with the best knobs found (the heuristic's when none won).
    pub ms: f64,
    /// The knobs recorded, by workload key.
    pub records: BTreeMap<String, Config>,
}

/// Where candidate layers are timed.
pub enum Runner {
    /// In this process, on this machine's CPU.
    Local,
    /// On the CPU of an RPC server (`kiln rpc server`, or Apache TVM's): each candidate's
    /// library is uploaded, loaded there and timed by its time evaluator.
    Remote(kiln_rpc::Session),
}

/// The runner of `--rpc-server HOST:PORT` or `--rpc-tracker HOST:PORT` (with `key`), else the
/// local one.
pub fn runner(server: Option<&str>, tracker: Option<&str>, key: &str) -> Result<Runner, String> {
    if let Some(addr) = server {
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| format!("--rpc-server {addr:?} is not host:port"))?;
        let s = kiln_rpc::connect(host, port, key)
            .map_err(|e| format!("cannot reach the RPC server {addr}: {e}"))?;
        return Ok(Runner::Remote(s));
    }
    if let Some(addr) = tracker {
        let s = kiln_rpc::tracker::connect_via_tracker(addr, key)
            .map_err(|e| format!("no RPC server for key {key:?} from the tracker {addr}: {e}"))?;
        return Ok(Runner::Remote(s));
    }
    Ok(Runner::Local)
}

/// What the records of one CPU are keyed by: the target's CPU name and its features.
pub fn cpu_key(target: &str) -> Result<String, String> {
    let t = kiln_codegen::target::Target::parse(target).map_err(|e| e.to_string())?;
    let cpu = t.cpu_desc();
    let features: Vec<&str> = cpu.features.iter().map(String::as_str).collect();
    Ok(format!("{} [{}]", cpu.cpu, features.join(" ")))
}

/// The records of a tuning file for `target`'s CPU: workload key -> knobs, over every layer;
/// empty (with a note on stderr) when the file was tuned on another CPU.
pub fn load_records(path: &Path, target: &str) -> Result<BTreeMap<String, Config>, String> {
    let file = read_file(path)?;
    let want = cpu_key(target)?;
    if file.get("cpu").and_then(Value::as_str) != Some(want.as_str()) {
        eprintln!(
            "kiln: {} was tuned on another CPU ({}); compiling with the heuristics",
            path.display(),
            file.get("cpu").and_then(Value::as_str).unwrap_or("unknown")
        );
        return Ok(BTreeMap::new());
    }
    let mut out = BTreeMap::new();
    let layers = file.get("layers").and_then(Value::as_object);
    for layer in layers.into_iter().flat_map(|l| l.values()) {
        let records = layer.get("records").and_then(Value::as_object);
        for (key, knobs) in records.into_iter().flatten() {
            out.insert(key.clone(), config_of(knobs, path)?);
        }
    }
    Ok(out)
}

/// A record's knobs as a [`Config`], or an error naming the file.
fn config_of(v: &Value, path: &Path) -> Result<Config, String> {
    let bad = || {
        format!(
            "{}: a record's knobs must be an object of integers",
            path.display()
        )
    };
    let mut c = Config::new();
    for (k, x) in v.as_object().ok_or_else(bad)? {
        c.insert(k.clone(), x.as_i64().ok_or_else(bad)?);
    }
    Ok(c)
}

/// The parsed records file (`{}` when it does not exist).
fn read_file(path: &Path) -> Result<Value, String> {
    if !path.exists() {
        return Ok(json!({}));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a tuning-records file: {e}", path.display()))?;
    if !v.is_object() {
        return Err(format!(
            "{} is not a tuning-records file: not a JSON object",
            path.display()
        ));
    }
    Ok(v)
}

/// A heavy layer: its signature and the one-layer module that times it, with its inputs.
struct Layer {
    signature: String,
    module: IRModule,
    inputs: Vec<(String, Tensor)>,
}

/// Whether `e` calls an elementwise or broadcast operator (what fusion puts in a product's
/// epilogue).
fn is_epilogue(e: &Expr) -> bool {
    e.op_name()
        .and_then(|n| kiln_graph::op::get(n).ok())
        .is_some_and(|d| d.pattern <= kiln_graph::op::OpPattern::Broadcast)
}

/// The convolutions and products by constant weights of `main`, each with the chain of
/// elementwise operators that reads it alone and keeps its shape (bias, activation, residual
/// add: the epilogue fusion puts in its kernel, which changes what its tiles cost), one per
/// signature. The chain's other operands stay constants, or become inputs.
fn layers(main: &Function) -> Result<Vec<Layer>, String> {
    let order = kiln_graph::ir::visit::post_order(main.body());
    let mut users: std::collections::HashMap<usize, Vec<Expr>> = Default::default();
    for e in &order {
        if e.op_name().is_some() {
            for a in e.args() {
                users.entry(a.key()).or_default().push(e.clone());
            }
        }
    }
    let ty_of = |e: &Expr| e.ty().map_err(|err| err.to_string());
    let mut out: Vec<Layer> = Vec::new();
    for e in &order {
        let Some(op) = e.op_name() else { continue };
        if !matches!(op, "nn.conv2d" | "nn.matmul" | "nn.dense") {
            continue;
        }
        let args = e.args();
        let Some(w) = args[1].as_constant() else {
            continue;
        };
        let data_ty = ty_of(&args[0])?;
        let Some((shape, dtype)) = data_ty.as_tensor() else {
            continue;
        };
        let attrs = e.as_call().expect("a call").attrs.clone();
        let mut signature = format!("{op} {data_ty} {} {attrs:?}", ty_of(&args[1])?);
        let x = Var::new("x", data_ty.clone());
        let mut params = vec![x.clone()];
        let mut inputs = vec![("x".to_string(), pseudo_random(shape, dtype)?)];
        let weight = Expr::constant(pseudo_random(w.shape(), w.dtype())?);
        let mut body = Expr::call_raw(Expr::op(op), vec![x.expr(), weight], attrs);
        let out_ty = ty_of(e)?;
        let mut cur = e.clone();
        loop {
            let next = match users.get(&cur.key()).map(Vec::as_slice) {
                Some([u]) if is_epilogue(u) && ty_of(u)? == out_ty => u.clone(),
                _ => break,
            };
            let mut new_args = Vec::new();
            for a in next.args() {
                if a.key() == cur.key() {
                    new_args.push(body.clone());
                } else if a.as_constant().is_some() {
                    new_args.push(a.clone());
                } else {
                    let t = ty_of(a)?;
                    let Some((s, d)) = t.as_tensor() else { break };
                    let name = format!("p{}", params.len());
                    let v = Var::new(&name, t.clone());
                    inputs.push((name, pseudo_random(s, d)?));
                    new_args.push(v.expr());
                    params.push(v);
                }
            }
            if new_args.len() != next.args().len() {
                break;
            }
            let call = next.as_call().expect("a call");
            body = Expr::call_raw(call.op.clone(), new_args, call.attrs.clone());
            signature.push_str(&format!(" + {}", next.op_name().unwrap_or("?")));
            cur = next;
        }
        if out.iter().any(|l| l.signature == signature) {
            continue;
        }
        let module = IRModule::from_main(Function::new(params, body));
        out.push(Layer {
            signature,
            module,
            inputs,
        });
    }
    Ok(out)
}

/// Deterministic pseudo-random values (a linear congruential generator; timing needs no
/// statistics) of `shape` and `dtype`.
fn pseudo_random(shape: &[i64], dtype: kiln_ffi::DataType) -> Result<Tensor, String> {
    let n: i64 = shape.iter().product();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let values: Vec<f64> = (0..n.max(0))
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
        })
        .collect();
    let values: Vec<f64> = if dtype.code() == kiln_ffi::dtype::code::FLOAT {
        values
    } else {
        values.iter().map(|v| (v * 100.0).round()).collect()
    };
    kiln_graph::op::eval::make(&values, &kiln_graph::ir::Type::tensor(shape, dtype))
        .map_err(|e| e.to_string())
}

/// Builds `layer` under `scope` and times it on `runner`: the median of `runs` runs after two
/// warm-up runs, and the knobs the build asked.
fn measure(
    layer: &Layer,
    target: &str,
    scope: Scope,
    runs: u32,
    runner: &Runner,
) -> Result<(f64, Asked), String> {
    let active = scope.enter();
    let factory = kiln_graph::build::build_with(
        &layer.module,
        target,
        Vec::new(),
        &PassContext::with_opt_level(3),
    )
    .map_err(|e| format!("building {}: {e}", layer.signature))?;
    let asked = active.asked();
    drop(active);
    let ms = match runner {
        Runner::Local => time_locally(&factory, &layer.inputs, runs)?,
        Runner::Remote(session) => time_remotely(session, &factory, &layer.inputs, runs)
            .map_err(|e| format!("timing {} on the RPC server: {e}", layer.signature))?,
    };
    Ok((ms, asked))
}

/// The median of `runs` runs of `factory`'s executor on `inputs`, after two warm-up runs,
/// timed by the runtime's time evaluator (as [`time_remotely`] on a server).
fn time_locally(
    factory: &kiln_runtime::module::Module,
    inputs: &[(String, Tensor)],
    runs: u32,
) -> Result<f64, String> {
    use kiln_ffi::{Any, AnyView, Device};
    use kiln_runtime::graph_executor::GraphExecutorFactory;
    let f = factory
        .downcast_node::<GraphExecutorFactory>()
        .ok_or("a layer did not build into a graph executor factory")?;
    let exec: kiln_runtime::module::Module = factory
        .function(f.module_name())
        .and_then(|func| kiln_ffi::call!(func, Device::cpu(0)))
        .and_then(|any| any.try_as())
        .map_err(|e| format!("cannot create the layer's executor: {e}"))?;
    let function = |name: &str| {
        exec.get_function(name, false)
            .ok()
            .flatten()
            .ok_or(format!("the layer's executor has no `{name}`"))
    };
    let set_input = function("set_input")?;
    for (name, x) in inputs {
        set_input
            .call_any(&[Any::from(name.as_str()), Any::from(x.clone())])
            .map_err(|e| format!("setting the layer's input {name}: {e}"))?;
    }
    let run = function("run")?;
    // One warm-up run here, one in the time evaluator.
    run.call_any(&[])
        .map_err(|e| format!("a warm-up run failed: {e}"))?;
    let options = kiln_runtime::time_evaluator::TimeEvaluatorOptions {
        number: 1,
        repeat: runs.max(1),
        ..Default::default()
    };
    let no_args: [AnyView<'_>; 0] = [];
    let secs =
        kiln_runtime::time_evaluator::measure(&run, &no_args, Device::cpu(0), &options, None)
            .map_err(|e| format!("a timed run failed: {e}"))?;
    Ok(median(&secs) * 1e3)
}

/// The median of `v` (not empty).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// [`time_locally`] on the server of `session`: the library exported, uploaded and loaded
/// there, its executor's `run` timed by the server's time evaluator (`runs` measurements of
/// at least 10 ms each).
fn time_remotely(
    session: &kiln_rpc::Session,
    factory: &kiln_runtime::module::Module,
    inputs: &[(String, Tensor)],
    runs: u32,
) -> kiln_ffi::Result<f64> {
    use kiln_ffi::Any;
    let path = std::env::temp_dir().join(format!("kiln-tune-{}.so", std::process::id()));
    kiln_runtime::module::export_library(factory, &path, &Default::default())?;
    let uploaded = session.upload(&path, Some("kiln_tune_layer.so"));
    let _ = std::fs::remove_file(&path);
    uploaded?;
    let lib = session.load_module("kiln_tune_layer.so")?;
    let dev = session.cpu(0)?;
    let exec: kiln_runtime::module::Module = lib
        .get_function("default", false)?
        .ok_or_else(|| kiln_ffi::Error::value_error("the library has no `default` executor"))?
        .call_any(&[Any::from(dev)])?
        .try_as()?;
    let set_input = exec
        .get_function("set_input", false)?
        .ok_or_else(|| kiln_ffi::Error::value_error("the executor has no `set_input`"))?;
    for (name, x) in inputs {
        let remote_x = session.empty(x.shape(), x.dtype(), dev)?;
        remote_x.copy_from(x)?;
        set_input.call_any(&[Any::from(name.as_str()), Any::from(remote_x)])?;
    }
    let options = kiln_runtime::time_evaluator::TimeEvaluatorOptions {
        number: 1,
        repeat: runs.max(1),
        min_repeat_ms: 10,
        ..Default::default()
    };
    let timer = session.time_evaluator(Some(&exec), "run", dev, &options)?;
    let bytes: kiln_ffi::Bytes = timer.call_any(&[])?.try_as()?;
    let secs: Vec<f64> = bytes
        .as_bytes()
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    if secs.is_empty() {
        return Err(kiln_ffi::Error::value_error(
            "the time evaluator returned no times",
        ));
    }
    Ok(median(&secs) * 1e3)
}

/// How much faster a candidate must be than the best so far to replace it (and the best than
/// the heuristics, measured again, to be recorded): 3%, above run-to-run noise.
const MARGIN: f64 = 0.97;

/// The best knobs for `layer`: `(records by workload key, best ms, heuristic ms)`.
fn tune_layer(
    layer: &Layer,
    target: &str,
    runs: u32,
    runner: &Runner,
) -> Result<(BTreeMap<String, Config>, f64, f64), String> {
    let with = |c: &Config| Scope {
        candidate: Some(c.clone()),
        ..Scope::default()
    };
    let mut best = Config::new();
    let (mut base_ms, mut asked) = measure(layer, target, with(&best), runs, runner)?;
    let mut best_ms = base_ms;
    let mut best_asked = asked.clone();
    let mut done: Vec<String> = Vec::new();
    // Knob by knob, in the order they appear; later knobs may appear with a choice.
    while let Some((name, choices)) = asked
        .values()
        .flat_map(|k| k.iter())
        .find(|(n, _)| !done.contains(n))
        .map(|(n, c)| (n.clone(), c.clone()))
    {
        done.push(name.clone());
        for v in choices {
            let mut c = best.clone();
            c.insert(name.clone(), v);
            if best.get(&name) == Some(&v) {
                continue;
            }
            let (ms, a) = measure(layer, target, with(&c), runs, runner)?;
            if ms < best_ms * MARGIN {
                (best, best_ms, best_asked) = (c, ms, a.clone());
            }
            for (k, knobs) in a {
                asked.entry(k).or_default().extend(knobs);
            }
        }
    }
    // Confirmed against the heuristics once more, so that noise does not pick a schedule.
    if !best.is_empty() {
        let (again, _) = measure(layer, target, with(&best), runs, runner)?;
        let (base_again, _) = measure(layer, target, with(&Config::new()), runs, runner)?;
        if again >= base_again * MARGIN {
            return Ok((BTreeMap::new(), base_ms, base_ms));
        }
        (best_ms, base_ms) = (again, base_again);
    }
    // Each workload of the best build keeps the knobs it asked.
    let records = best_asked
        .into_iter()
        .map(|(key, knobs)| {
            let c: Config = knobs
                .keys()
                .filter_map(|n| best.get(n).map(|v| (n.clone(), *v)))
                .collect();
            (key, c)
        })
        .filter(|(_, c)| !c.is_empty())
        .collect();
    Ok((records, best_ms, base_ms))
}

/// Tunes the distinct heavy layers of `model` that `opts.records` does not hold yet, on
/// `opts.runner`, rewriting the records file after each layer; `on_event` hears of the start,
/// each layer and its result, and stops the tuning with its error. Returns the layers tuned
/// now.
pub fn tune(
    model: &kiln_onnx::Model,
    opts: &TuneOptions,
    on_event: &mut dyn FnMut(Event) -> Result<(), String>,
) -> Result<Vec<LayerReport>, String> {
    let cpu = cpu_key(&opts.target)?;
    let mut file = read_file(&opts.records)?;
    if file
        .get("cpu")
        .is_some_and(|c| c.as_str() != Some(cpu.as_str()))
    {
        return Err(format!(
            "{} holds records of another CPU ({}); tune into another file",
            opts.records.display(),
            file["cpu"]
        ));
    }
    // The graphs compiled for the model: one, or a program's segments (run-time control flow,
    // several shapes); their distinct layers are tuned.
    let graphs =
        match kiln_onnx::convert(model, &opts.input_shapes, &opts.dims, &Default::default())
            .map_err(|e| e.to_string())?
        {
            kiln_onnx::Converted::Graph(m, params) => vec![(m, params)],
            kiln_onnx::Converted::Program(p) => {
                p.segments.into_iter().map(|m| (m, Vec::new())).collect()
            }
        };
    let targets = [opts.target.as_str()];
    let ctx = kiln_graph::build::target_pass_context(&PassContext::with_opt_level(3), &targets)
        .map_err(|e| e.to_string())?
        .disable("AlterOpLayout")
        .disable("FuseOps");
    let mut all: Vec<Layer> = Vec::new();
    for (module, params) in graphs {
        let (module, _) =
            kiln_graph::build::optimize_with(&module, params, &ctx).map_err(|e| e.to_string())?;
        let main = module.main().map_err(|e| e.to_string())?;
        for layer in layers(&main)? {
            if !all.iter().any(|l| l.signature == layer.signature) {
                all.push(layer);
            }
        }
    }
    let mut known = file
        .get("layers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let todo: Vec<&Layer> = all
        .iter()
        .filter(|l| !known.contains_key(&l.signature))
        .collect();
    on_event(Event::Start {
        layers: all.len(),
        tuned_before: all.len() - todo.len(),
        cpu: &cpu,
    })?;
    let mut reports = Vec::new();
    for layer in todo {
        on_event(Event::Layer(&layer.signature))?;
        let (records, ms, base) = tune_layer(layer, &opts.target, opts.runs, &opts.runner)?;
        let recs: Map<String, Value> = records.iter().map(|(k, c)| (k.clone(), json!(c))).collect();
        known.insert(
            layer.signature.clone(),
            json!({"records": recs, "ms": ms, "heuristic_ms": base}),
        );
        // Written after every layer: an interrupted tuning keeps what it measured.
        file = json!({"cpu": cpu, "layers": known});
        write_file(&opts.records, &file)?;
        let report = LayerReport {
            signature: layer.signature.clone(),
            heuristic_ms: base,
            ms,
            records,
        };
        on_event(Event::Tuned(&report))?;
        reports.push(report);
    }
    // Each tuned layer rewrote the file; a model with nothing left to tune leaves it as it
    // was (or creates it, empty, for its CPU).
    if !opts.records.exists() {
        file = json!({"cpu": cpu, "layers": known});
        write_file(&opts.records, &file)?;
    }
    Ok(reports)
}

/// Writes `v` at `path` through a temporary file beside it.
fn write_file(path: &Path, v: &Value) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
