//! The executor as a module (kind `GraphExecutor`, as TVM's), so C, Python and other runtimes
//! drive it by function name. Each executor sits behind a mutex: one call at a time per
//! executor; executors do not share state, so several run concurrently.
//!
//! | function | arguments | result |
//! | --- | --- | --- |
//! | `set_input` | name or index, tensor | None (copies) |
//! | `set_input_zero_copy` | name or index, tensor (`ffi.Tensor`, 64-byte aligned) | None |
//! | `set_output_zero_copy` | index, tensor | None |
//! | `get_input` | name or index | the input's tensor |
//! | `get_output` | index [, out] | the output's tensor (overwritten by the next run); with `out`, copies into it |
//! | `get_num_inputs` / `get_num_outputs` | | int |
//! | `get_input_index` | name | index, or -1 |
//! | `get_input_name` | index | name |
//! | `get_input_info` | | `{"shape": {name: shape}, "dtype": {name: dtype}}` |
//! | `get_output_info` | | `{"shape": [shape...], "dtype": [dtype...]}` |
//! | `run` | | None |
//! | `run_from_inputs` | device type, device id, (name or index, tensor)... | outputs copied to that device |
//! | `load_params` | params bytes | None |
//! | `share_params` | other `GraphExecutor` module, params bytes | None |
//! | `run_individual` | number, repeat, min_repeat_ms | mean seconds per node (0 for inputs) |
//! | `profile` | [number, repeat, min_repeat_ms] | `{"table": str, "total_us": float, "rows": [{"node", "name", "func_name", "time_us", "percent", "shape"}]}` |
//! | `debug_get_node_output` | node index or name | copies of the node's outputs |

use super::executor::GraphExecutor;
use crate::module::{Module, ModuleNode};
use crate::tensor::Tensor;
use kiln_ffi::abi::type_index;
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Any, AnyView, Array, Device, Error, Function, Map, Result, Shape};
use std::sync::{Arc, Mutex, MutexGuard};

/// The module kind of executors.
pub const KIND: &str = "GraphExecutor";

/// The module node of an executor.
pub struct GraphExecutorModule {
    exec: Arc<Mutex<GraphExecutor>>,
}

impl GraphExecutorModule {
    /// Wraps an executor in a module.
    pub fn new_module(exec: GraphExecutor) -> Module {
        Module::new(GraphExecutorModule {
            exec: Arc::new(Mutex::new(exec)),
        })
    }

    /// The executor (locked: other calls on this executor wait).
    pub fn lock(&self) -> MutexGuard<'_, GraphExecutor> {
        self.exec.lock().recover()
    }
}

fn lock(exec: &Mutex<GraphExecutor>) -> MutexGuard<'_, GraphExecutor> {
    exec.lock().recover()
}

fn check_arity(name: &str, sig: &str, args: &[AnyView<'_>], min: usize, max: usize) -> Result<()> {
    if args.len() < min || args.len() > max {
        let want = if min == max {
            format!("{min}")
        } else if max == usize::MAX {
            format!("at least {min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(Error::type_error(format!(
            "GraphExecutor.{name}({sig}) takes {want} arguments but got {}",
            args.len()
        )));
    }
    Ok(())
}

fn arg_error(name: &str, index: usize, what: &str, got: &AnyView<'_>) -> Error {
    Error::type_error(format!(
        "GraphExecutor.{name}: argument #{index} must be {what}, not `{}`",
        got.type_name()
    ))
}

fn str_arg(v: &AnyView<'_>) -> Option<String> {
    v.str_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

fn index_arg(name: &str, i: usize, v: &AnyView<'_>) -> Result<usize> {
    let n: i64 = v
        .try_as()
        .map_err(|_| arg_error(name, i, "an int (an index)", v))?;
    usize::try_from(n)
        .map_err(|_| Error::index_error(format!("GraphExecutor.{name}: index {n} is negative")))
}

/// An input given by name or index.
fn input_arg(exec: &GraphExecutor, name: &str, i: usize, v: &AnyView<'_>) -> Result<usize> {
    match str_arg(v) {
        Some(s) => exec.require_input(&s, name),
        None if v.type_index() == type_index::INT => index_arg(name, i, v),
        None => Err(arg_error(name, i, "an input name or index", v)),
    }
}

fn tensor_arg(name: &str, i: usize, v: &AnyView<'_>) -> Result<Tensor> {
    v.try_as::<Tensor>()
        .map_err(|_| arg_error(name, i, "a tensor", v))
}

fn u32_arg(name: &str, i: usize, v: &AnyView<'_>) -> Result<u32> {
    v.try_as::<u32>()
        .map_err(|_| arg_error(name, i, "a non-negative int", v))
}

fn bytes_arg<'a>(name: &str, i: usize, v: &AnyView<'a>) -> Result<&'a [u8]> {
    v.bytes_bytes()
        .or_else(|| v.str_bytes())
        .ok_or_else(|| arg_error(name, i, "bytes (a params file)", v))
}

type Body = fn(&Arc<Mutex<GraphExecutor>>, &[AnyView<'_>]) -> Result<Any>;

fn body(name: &str) -> Option<Body> {
    let f: Body = match name {
        "set_input" => |e, a| {
            check_arity("set_input", "key, value", a, 2, 2)?;
            let mut x = lock(e);
            let i = input_arg(&x, "set_input", 0, &a[0])?;
            x.set_input(i, &tensor_arg("set_input", 1, &a[1])?)?;
            Ok(Any::none())
        },
        "set_input_zero_copy" => |e, a| {
            let n = "set_input_zero_copy";
            check_arity(n, "key, value", a, 2, 2)?;
            if a[1].type_index() == type_index::DL_TENSOR_PTR {
                return Err(Error::type_error(format!(
                    "GraphExecutor.{n}: a borrowed DLTensor* cannot be kept; pass an ffi.Tensor"
                )));
            }
            let mut x = lock(e);
            let i = input_arg(&x, n, 0, &a[0])?;
            x.set_input_zero_copy(i, &tensor_arg(n, 1, &a[1])?)?;
            Ok(Any::none())
        },
        "set_output_zero_copy" => |e, a| {
            let n = "set_output_zero_copy";
            check_arity(n, "index, value", a, 2, 2)?;
            if a[1].type_index() == type_index::DL_TENSOR_PTR {
                return Err(Error::type_error(format!(
                    "GraphExecutor.{n}: a borrowed DLTensor* cannot be kept; pass an ffi.Tensor"
                )));
            }
            let i = index_arg(n, 0, &a[0])?;
            lock(e).set_output_zero_copy(i, &tensor_arg(n, 1, &a[1])?)?;
            Ok(Any::none())
        },
        "get_input" => |e, a| {
            check_arity("get_input", "key", a, 1, 1)?;
            let x = lock(e);
            let i = input_arg(&x, "get_input", 0, &a[0])?;
            Ok(x.get_input(i)?.into())
        },
        "get_output" => |e, a| {
            check_arity("get_output", "index, out=None", a, 1, 2)?;
            let i = index_arg("get_output", 0, &a[0])?;
            let x = lock(e);
            match a.get(1).filter(|v| !v.is_none()) {
                Some(out) => {
                    x.copy_output_to(i, &tensor_arg("get_output", 1, out)?)?;
                    Ok(Any::none())
                }
                None => Ok(x.get_output(i)?.into()),
            }
        },
        "get_num_inputs" => |e, a| {
            check_arity("get_num_inputs", "", a, 0, 0)?;
            Ok((lock(e).num_inputs() as i64).into())
        },
        "get_num_outputs" => |e, a| {
            check_arity("get_num_outputs", "", a, 0, 0)?;
            Ok((lock(e).num_outputs() as i64).into())
        },
        "get_input_index" => |e, a| {
            check_arity("get_input_index", "name", a, 1, 1)?;
            let name =
                str_arg(&a[0]).ok_or_else(|| arg_error("get_input_index", 0, "a str", &a[0]))?;
            Ok(lock(e).input_index(&name).map_or(-1, |i| i as i64).into())
        },
        "get_input_name" => |e, a| {
            check_arity("get_input_name", "index", a, 1, 1)?;
            let i = index_arg("get_input_name", 0, &a[0])?;
            Ok(lock(e).input_name(i)?.into())
        },
        "get_input_info" => |e, a| {
            check_arity("get_input_info", "", a, 0, 0)?;
            let x = lock(e);
            let mut shapes = Vec::new();
            let mut dtypes = Vec::new();
            for i in 0..x.num_inputs() {
                let name = x.input_name(i)?.to_string();
                let (shape, dtype) = x.input_info(i)?;
                shapes.push((Any::from(name.clone()), Any::from(Shape::new(shape).0)));
                dtypes.push((Any::from(name), Any::from(dtype.to_string())));
            }
            Ok(Map::new([
                (Any::from("shape"), Any::from(Map::new(shapes).0)),
                (Any::from("dtype"), Any::from(Map::new(dtypes).0)),
            ])
            .0
            .into())
        },
        "get_output_info" => |e, a| {
            check_arity("get_output_info", "", a, 0, 0)?;
            let x = lock(e);
            let mut shapes = Vec::new();
            let mut dtypes = Vec::new();
            for i in 0..x.num_outputs() {
                let (shape, dtype) = x.output_info(i)?;
                shapes.push(Any::from(Shape::new(shape).0));
                dtypes.push(Any::from(dtype.to_string()));
            }
            Ok(Map::new([
                (Any::from("shape"), Any::from(Array::new(shapes).0)),
                (Any::from("dtype"), Any::from(Array::new(dtypes).0)),
            ])
            .0
            .into())
        },
        "run" => |e, a| {
            check_arity("run", "", a, 0, 0)?;
            lock(e).run()?;
            Ok(Any::none())
        },
        "run_from_inputs" => |e, a| {
            let n = "run_from_inputs";
            let sig = "device_type, device_id, key0, value0, ...";
            check_arity(n, sig, a, 2, usize::MAX)?;
            if a.len() % 2 != 0 {
                return Err(Error::type_error(format!(
                    "GraphExecutor.{n}({sig}) takes key-value pairs after the device"
                )));
            }
            let host = Device::new(
                a[0].try_as()
                    .map_err(|_| arg_error(n, 0, "an int", &a[0]))?,
                a[1].try_as()
                    .map_err(|_| arg_error(n, 1, "an int", &a[1]))?,
            );
            let mut x = lock(e);
            for k in (2..a.len()).step_by(2) {
                let i = input_arg(&x, n, k, &a[k])?;
                x.set_input(i, &tensor_arg(n, k + 1, &a[k + 1])?)?;
            }
            x.run()?;
            let outs = (0..x.num_outputs())
                .map(|i| Ok(Any::from(x.get_output(i)?.to_device(host)?)))
                .collect::<Result<Vec<_>>>()?;
            Ok(Array::new(outs).0.into())
        },
        "load_params" => |e, a| {
            check_arity("load_params", "params", a, 1, 1)?;
            let bytes = bytes_arg("load_params", 0, &a[0])?;
            lock(e).load_params(bytes)?;
            Ok(Any::none())
        },
        "share_params" => |e, a| {
            let n = "share_params";
            check_arity(n, "other, params", a, 2, 2)?;
            let other: Module = a[0]
                .try_as()
                .map_err(|_| arg_error(n, 0, "a GraphExecutor module", &a[0]))?;
            let other = other
                .downcast_node::<GraphExecutorModule>()
                .ok_or_else(|| {
                    Error::type_error(format!(
                        "GraphExecutor.{n}: argument #0 is a module of kind `{}`, not `{KIND}`",
                        other.kind()
                    ))
                })?;
            let bytes = bytes_arg(n, 1, &a[1])?;
            if Arc::ptr_eq(&other.exec, e) {
                return Ok(Any::none()); // an executor already shares with itself
            }
            let names = super::params::load_param_names(bytes)?;
            let tensors = lock(&other.exec).inputs_named(&names)?;
            lock(e).bind_shared(tensors)?;
            Ok(Any::none())
        },
        "run_individual" => |e, a| {
            let n = "run_individual";
            check_arity(n, "number, repeat, min_repeat_ms", a, 3, 3)?;
            let times = lock(e).run_individual(
                u32_arg(n, 0, &a[0])?,
                u32_arg(n, 1, &a[1])?,
                u32_arg(n, 2, &a[2])?,
            )?;
            Ok(times.into_iter().collect::<Array>().0.into())
        },
        "profile" => |e, a| {
            let n = "profile";
            check_arity(n, "number=10, repeat=1, min_repeat_ms=0", a, 0, 3)?;
            let get = |i: usize, default: u32| a.get(i).map_or(Ok(default), |v| u32_arg(n, i, v));
            let p = lock(e).profile(get(0, 10)?, get(1, 1)?, get(2, 0)?)?;
            let rows: Array = p
                .rows
                .iter()
                .map(|r| {
                    let shape = r
                        .outputs
                        .iter()
                        .map(|(s, d)| format!("{s:?} {d}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    Any::from(
                        Map::new([
                            (Any::from("node"), Any::from(r.node as i64)),
                            (Any::from("name"), Any::from(r.name.clone())),
                            (Any::from("func_name"), Any::from(r.func_name.clone())),
                            (Any::from("time_us"), Any::from(r.seconds * 1e6)),
                            (Any::from("percent"), Any::from(r.percent)),
                            (Any::from("shape"), Any::from(shape)),
                        ])
                        .0,
                    )
                })
                .collect();
            Ok(Map::new([
                (Any::from("table"), Any::from(p.to_string())),
                (Any::from("total_us"), Any::from(p.total_seconds * 1e6)),
                (Any::from("rows"), Any::from(rows.0)),
            ])
            .0
            .into())
        },
        "debug_get_node_output" => |e, a| {
            let n = "debug_get_node_output";
            check_arity(n, "node", a, 1, 1)?;
            let mut x = lock(e);
            let nid = match str_arg(&a[0]) {
                Some(s) => x
                    .graph()
                    .nodes
                    .iter()
                    .position(|node| node.name == s)
                    .ok_or_else(|| {
                        Error::key_error(format!("GraphExecutor.{n}: no node is named {s:?}"))
                    })?,
                None => index_arg(n, 0, &a[0])?,
            };
            let outs = x.debug_get_node_output(nid)?;
            Ok(outs.into_iter().collect::<Array>().0.into())
        },
        _ => return None,
    };
    Some(f)
}

impl ModuleNode for GraphExecutorModule {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let Some(f) = body(name) else {
            return Ok(None);
        };
        let exec = self.exec.clone();
        Ok(Some(Function::from_packed(move |args| f(&exec, args))))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
