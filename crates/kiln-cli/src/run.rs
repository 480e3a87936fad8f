//! `kiln run`: load a deployable library, create its executor (the graph executor, or the
//! virtual machine for a model with run-time control flow) on the CPU (on the
//! OpenCL device for a library compiled for `opencl`), set the inputs
//! (from `.npy` files, or random with a printed seed), run, and write `output_K.npy` files.

use crate::npy;
use kiln_ffi::dtype::code;
use kiln_ffi::{DataType, Device};
use kiln_runtime::executor::Executor;
use kiln_runtime::graph_executor::{GraphExecutor, GraphExecutorFactory, GraphExecutorModule};
use kiln_runtime::module::{load_module, Module};
use kiln_runtime::tensor::Tensor;
use kiln_runtime::vm::{VirtualMachine, VirtualMachineModule, VmFactory};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::MutexGuard;

/// The options of `kiln run`.
pub struct RunArgs {
    /// The compiled library.
    pub library: PathBuf,
    /// `--input name=file.npy` flags.
    pub inputs: Vec<String>,
    /// Where to write the outputs.
    pub output_dir: PathBuf,
    /// The seed of random inputs (default: from the clock).
    pub seed: Option<u64>,
}

/// Loads `path` and returns its factory module (a graph executor or VM factory: the root or
/// one of its imports, searched depth first).
pub fn load_factory(path: &Path) -> Result<Module, String> {
    if !path.exists() {
        return Err(format!("{} does not exist", path.display()));
    }
    let m = load_module(path).map_err(|e| crate::load_error(path, &e))?;
    find_factory(&m).ok_or_else(|| {
        format!(
            "{} holds no graph executor or VM factory (its root module is {:?}); was it made \
             by `kiln compile`?",
            path.display(),
            m.kind()
        )
    })
}

/// The first factory module in `m`'s import tree.
fn find_factory(m: &Module) -> Option<Module> {
    if m.downcast_node::<GraphExecutorFactory>().is_some()
        || m.downcast_node::<VmFactory>().is_some()
    {
        return Some(m.clone());
    }
    m.imports().iter().find_map(find_factory)
}

/// The device a library's graph runs on: `opencl(0)` when its import tree holds an OpenCL
/// module (a model compiled with `--target opencl`), else `cpu(0)`.
pub fn library_device(m: &Module) -> Device {
    fn has_kind(m: &Module, kind: &str) -> bool {
        m.kind() == kind || m.imports().iter().any(|i| has_kind(i, kind))
    }
    if has_kind(m, "opencl") {
        Device::new(kiln_ffi::device::device_type::OPENCL, 0)
    } else {
        Device::cpu(0)
    }
}

/// A new executor module on the library's device ([`library_device`]): the factory's executor
/// function (`default`) called with that device, as Python's `lib["default"](dev)` and the C
/// example do. A library for a device that this machine lacks is an error saying so.
pub fn create_executor(factory: &Module) -> Result<Module, String> {
    let name = match (
        factory.downcast_node::<GraphExecutorFactory>(),
        factory.downcast_node::<VmFactory>(),
    ) {
        (Some(f), _) => f.module_name().to_string(),
        (None, Some(f)) => f.module_name().to_string(),
        (None, None) => return Err("not a graph executor or VM factory".into()),
    };
    let dev = library_device(factory);
    if !kiln_runtime::device::device_exists(dev) {
        return Err(format!(
            "the library runs on {dev}, which this machine does not have (no such device is \
             present)"
        ));
    }
    let exec = factory
        .function(&name)
        .and_then(|func| kiln_ffi::call!(func, dev))
        .and_then(|any| any.try_as::<Module>())
        .map_err(|e| format!("cannot create the executor ({name}({dev})): {e}"))?;
    if exec.downcast_node::<GraphExecutorModule>().is_none()
        && exec.downcast_node::<VirtualMachineModule>().is_none()
    {
        return Err(format!(
            "{name}({dev}) returned a {:?} module, not an executor",
            exec.kind()
        ));
    }
    Ok(exec)
}

/// A locked executor of either kind.
pub enum Locked<'a> {
    /// The graph executor of a static model.
    Graph(MutexGuard<'a, GraphExecutor>),
    /// The virtual machine of a model with run-time control flow.
    Vm(MutexGuard<'a, VirtualMachine>),
}

impl Deref for Locked<'_> {
    type Target = dyn Executor;

    fn deref(&self) -> &(dyn Executor + 'static) {
        match self {
            Locked::Graph(g) => &**g,
            Locked::Vm(v) => &**v,
        }
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut (dyn Executor + 'static) {
        match self {
            Locked::Graph(g) => &mut **g,
            Locked::Vm(v) => &mut **v,
        }
    }
}

/// The executor inside an executor module made by [`create_executor`].
pub fn lock(exec: &Module) -> Locked<'_> {
    match exec.downcast_node::<GraphExecutorModule>() {
        Some(g) => Locked::Graph(g.lock()),
        None => Locked::Vm(
            exec.downcast_node::<VirtualMachineModule>()
                .expect("create_executor returns an executor module")
                .lock(),
        ),
    }
}

/// The names of the runtime inputs (graph inputs that are not params).
pub fn runtime_inputs(factory: &Module) -> Vec<String> {
    if let Some(f) = factory.downcast_node::<VmFactory>() {
        return f.code().inputs.iter().map(|s| s.name.clone()).collect();
    }
    let f = factory
        .downcast_node::<GraphExecutorFactory>()
        .expect("a factory module");
    let g = f.graph();
    g.arg_nodes
        .iter()
        .map(|&n| g.nodes[n].name.clone())
        .filter(|n| !f.params().contains_key(n))
        .collect()
}

/// Parses `name=file.npy`.
pub fn parse_input_flag(flag: &str) -> Result<(String, PathBuf), String> {
    match flag.split_once('=') {
        Some((n, f)) if !n.is_empty() && !f.is_empty() => Ok((n.to_string(), f.into())),
        _ => Err(format!("bad --input {flag:?}: expected name=file.npy")),
    }
}

/// A small deterministic generator (SplitMix64) for random inputs.
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A random CPU tensor: floats uniform in [-1, 1), integers in [0, 10), bools 0 or 1.
pub fn random_tensor(shape: &[i64], dtype: DataType, rng: &mut SplitMix) -> Result<Tensor, String> {
    let n: i64 = shape.iter().product();
    let values: Vec<f64> = (0..n.max(0))
        .map(|_| {
            let u = rng.next_f64();
            match dtype.code() {
                code::FLOAT | code::BFLOAT => u * 2.0 - 1.0,
                code::BOOL => (u * 2.0).floor(),
                _ => (u * 10.0).floor(),
            }
        })
        .collect();
    Tensor::from_f64s(&values, shape, dtype, Device::cpu(0)).map_err(|e| e.to_string())
}

/// Sets the runtime inputs of `exec`: from `given` (name, file) where named, random elsewhere.
/// A name that is not an input, a param, a wrong shape or dtype are errors naming the input.
pub fn set_inputs(
    factory: &Module,
    exec: &mut dyn Executor,
    given: &[(String, PathBuf)],
    seed: Option<u64>,
) -> Result<(), String> {
    let names = runtime_inputs(factory);
    for (name, file) in given {
        if !names.contains(name) {
            return Err(format!(
                "--input {name}={}: the model has no input named {name:?} (inputs: {})",
                file.display(),
                names.join(", ")
            ));
        }
    }
    let mut rng = None;
    for name in &names {
        let index = exec
            .require_input(name, "kiln run")
            .map_err(|e| e.to_string())?;
        let (shape, dtype) = exec.input_info(index).map_err(|e| e.to_string())?;
        let (shape, dtype) = (shape.to_vec(), dtype);
        let t = match given.iter().find(|(n, _)| n == name) {
            Some((_, file)) => {
                let t = npy::read(file)?;
                let fits = t.ndim() == shape.len()
                    && t.shape().iter().zip(&shape).all(|(&g, &w)| w < 0 || g == w);
                if !fits || t.dtype() != dtype {
                    return Err(format!(
                        "input {name:?} from {}: the file holds {} {:?} but the model expects \
                         {dtype} {shape:?}",
                        file.display(),
                        t.dtype(),
                        t.shape()
                    ));
                }
                t
            }
            None if shape.iter().any(|&d| d < 0) => {
                return Err(format!(
                    "input {name:?} has the shape {shape:?}, where -1 is known only at run \
                     time: give it with --input {name}=FILE.npy"
                ))
            }
            None => {
                let rng = rng.get_or_insert_with(|| {
                    let s = seed.unwrap_or_else(clock_seed);
                    println!("random inputs, seed {s} (repeat with --seed {s})");
                    SplitMix(s)
                });
                random_tensor(&shape, dtype, rng)?
            }
        };
        exec.set_input(index, &t)
            .map_err(|e| format!("cannot set input {name:?}: {e}"))?;
    }
    Ok(())
}

/// A seed from the clock.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 % 1_000_000_007)
        .unwrap_or(1)
}

/// Runs `kiln run`.
pub fn run(args: &RunArgs) -> Result<(), String> {
    let given = args
        .inputs
        .iter()
        .map(|f| parse_input_flag(f))
        .collect::<Result<Vec<_>, _>>()?;
    let factory = load_factory(&args.library)?;
    let exec_module = create_executor(&factory)?;
    let mut exec = lock(&exec_module);
    set_inputs(&factory, &mut *exec, &given, args.seed)?;
    exec.run().map_err(|e| format!("the run failed: {e}"))?;
    std::fs::create_dir_all(&args.output_dir)
        .map_err(|e| format!("cannot create {}: {e}", args.output_dir.display()))?;
    for k in 0..exec.num_outputs() {
        let t = exec
            .get_output(k)
            .and_then(|t| t.to_device(Device::cpu(0)))
            .map_err(|e| format!("cannot read output {k}: {e}"))?;
        let path = args.output_dir.join(format!("output_{k}.npy"));
        npy::write(&path, &t)?;
        println!("{}: {} {:?}", path.display(), t.dtype(), t.shape());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_random() {
        assert!(parse_input_flag("x=a.npy").is_ok());
        assert!(parse_input_flag("x").is_err());
        assert!(parse_input_flag("=a.npy").is_err());
        let mut r = SplitMix(7);
        let t = random_tensor(&[4, 2], DataType::float(32), &mut r).unwrap();
        assert!(t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|v| (-1.0..1.0).contains(v)));
        let a = random_tensor(&[3], DataType::int(64), &mut SplitMix(1)).unwrap();
        let b = random_tensor(&[3], DataType::int(64), &mut SplitMix(1)).unwrap();
        assert_eq!(a.to_vec::<i64>().unwrap(), b.to_vec::<i64>().unwrap());
    }
}
