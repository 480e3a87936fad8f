//! The executor as a module (kind `GraphExecutor`, as TVM's), so C, Python and other runtimes
//! drive it by function name. Each executor sits behind a mutex: one call at a time per
//! executor; executors do not share state, so several run concurrently.
//!
//! The functions every executor has (`set_input`, `run`, `get_output`, ...) are
//! [`crate::executor`]'s; the graph executor adds:
//!
//! | function | arguments | result |
//! | --- | --- | --- |
//! | `set_output_zero_copy` | index, tensor | None |
//! | `load_params` | params bytes | None |
//! | `share_params` | other `GraphExecutor` module, params bytes | None |
//! | `run_individual` | number, repeat, min_repeat_ms | mean seconds per node (0 for inputs) |
//! | `profile` | [number, repeat, min_repeat_ms] | `{"table": str, "total_us": float, "rows": [{"node", "name", "func_name", "time_us", "percent", "shape"}]}` |
//! | `debug_get_node_output` | node index or name | copies of the node's outputs |

use super::executor::GraphExecutor;
use crate::executor::{
    arg_error, check_arity, common_body, index_arg, kept_tensor_arg, lock, str_arg, Body,
};
use crate::module::{Module, ModuleNode};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Any, AnyView, Array, Error, Function, Map, Result};
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

fn u32_arg(name: &str, i: usize, v: &AnyView<'_>) -> Result<u32> {
    v.try_as::<u32>()
        .map_err(|_| arg_error(KIND, name, i, "a non-negative int", v))
}

fn bytes_arg<'a>(name: &str, i: usize, v: &AnyView<'a>) -> Result<&'a [u8]> {
    v.bytes_bytes()
        .or_else(|| v.str_bytes())
        .ok_or_else(|| arg_error(KIND, name, i, "bytes (a params file)", v))
}

/// The body of a function only the graph executor has.
fn body(name: &str) -> Option<Body<GraphExecutor>> {
    let f: Body<GraphExecutor> = match name {
        "set_output_zero_copy" => |e, a| {
            let n = "set_output_zero_copy";
            check_arity(KIND, n, "index, value", a, 2, 2)?;
            let t = kept_tensor_arg(KIND, n, 1, &a[1])?;
            let i = index_arg(KIND, n, 0, &a[0])?;
            lock(e).set_output_zero_copy(i, &t)?;
            Ok(Any::none())
        },
        "load_params" => |e, a| {
            check_arity(KIND, "load_params", "params", a, 1, 1)?;
            let bytes = bytes_arg("load_params", 0, &a[0])?;
            lock(e).load_params(bytes)?;
            Ok(Any::none())
        },
        "share_params" => |e, a| {
            let n = "share_params";
            check_arity(KIND, n, "other, params", a, 2, 2)?;
            let other: Module = a[0]
                .try_as()
                .map_err(|_| arg_error(KIND, n, 0, "a GraphExecutor module", &a[0]))?;
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
            check_arity(KIND, n, "number, repeat, min_repeat_ms", a, 3, 3)?;
            let times = lock(e).run_individual(
                u32_arg(n, 0, &a[0])?,
                u32_arg(n, 1, &a[1])?,
                u32_arg(n, 2, &a[2])?,
            )?;
            Ok(times.into_iter().collect::<Array>().0.into())
        },
        "profile" => |e, a| {
            let n = "profile";
            check_arity(KIND, n, "number=10, repeat=1, min_repeat_ms=0", a, 0, 3)?;
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
            check_arity(KIND, n, "node", a, 1, 1)?;
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
                None => index_arg(KIND, n, 0, &a[0])?,
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
        let exec = self.exec.clone();
        if let Some(f) = common_body(name) {
            return Ok(Some(Function::from_packed(move |args| {
                f(&*exec, KIND, args)
            })));
        }
        let Some(f) = body(name) else {
            return Ok(None);
        };
        Ok(Some(Function::from_packed(move |args| f(&exec, args))))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
