//! What every executor of a compiled model offers (the graph executor for static graphs, the
//! virtual machine for programs with run-time control flow and shapes), and the module
//! functions built on it once, so C, Python and the CLI drive either by the same names:
//!
//! | function | arguments | result |
//! | --- | --- | --- |
//! | `set_input` | name or index, tensor | None (copies) |
//! | `set_input_zero_copy` | name or index, tensor (`ffi.Tensor`, 64-byte aligned) | None |
//! | `get_input` | name or index | the input's tensor |
//! | `get_output` | index [, out] | the output's tensor (overwritten by the next run); with `out`, copies into it |
//! | `get_num_inputs` / `get_num_outputs` | | int |
//! | `get_input_index` | name | index, or -1 |
//! | `get_input_name` | index | name |
//! | `get_input_info` | | `{"shape": {name: shape}, "dtype": {name: dtype}}` |
//! | `get_output_info` | | `{"shape": [shape...], "dtype": [dtype...]}` (-1: a dimension known at run time) |
//! | `run` | | None |
//! | `run_from_inputs` | device type, device id, (name or index, tensor)... | outputs copied to that device |

use crate::tensor::Tensor;
use kiln_ffi::abi::type_index;
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Any, AnyView, Array, DataType, Device, Error, Map, Result, Shape};
use std::sync::{Arc, Mutex, MutexGuard};

/// An executor of a compiled model: inputs in, `run`, outputs out.
pub trait Executor: Send + 'static {
    /// Number of inputs.
    fn num_inputs(&self) -> usize;
    /// Number of outputs.
    fn num_outputs(&self) -> usize;
    /// The index of the input named `name`.
    fn input_index(&self, name: &str) -> Option<usize>;
    /// The index of the input named `name`, or a `KeyError` (for `what`) listing the inputs.
    fn require_input(&self, name: &str, what: &str) -> Result<usize>;
    /// The name of input `index`.
    fn input_name(&self, index: usize) -> Result<&str>;
    /// Shape and dtype of input `index`.
    fn input_info(&self, index: usize) -> Result<(&[i64], DataType)>;
    /// Shape and dtype of output `index` (-1 for a dimension known only at run time).
    fn output_info(&self, index: usize) -> Result<(&[i64], DataType)>;
    /// Copies `value` into input `index`.
    fn set_input(&mut self, index: usize, value: &Tensor) -> Result<()>;
    /// Makes input `index` use `value`'s memory (no copy).
    fn set_input_zero_copy(&mut self, index: usize, value: &Tensor) -> Result<()>;
    /// The tensor of input `index`.
    fn get_input(&self, index: usize) -> Result<Tensor>;
    /// The tensor of output `index` after the last run.
    fn get_output(&self, index: usize) -> Result<Tensor>;
    /// Copies output `index` into `out`.
    fn copy_output_to(&self, index: usize, out: &Tensor) -> Result<()>;
    /// Runs the model once.
    fn run(&mut self) -> Result<()>;
}

/// Locks an executor (other calls on it wait).
pub(crate) fn lock<E: ?Sized>(exec: &Mutex<E>) -> MutexGuard<'_, E> {
    exec.lock().recover()
}

/// Checks the argument count of `kind.name(sig)`.
pub(crate) fn check_arity(
    kind: &str,
    name: &str,
    sig: &str,
    args: &[AnyView<'_>],
    min: usize,
    max: usize,
) -> Result<()> {
    if args.len() < min || args.len() > max {
        let want = if min == max {
            format!("{min}")
        } else if max == usize::MAX {
            format!("at least {min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(Error::type_error(format!(
            "{kind}.{name}({sig}) takes {want} arguments but got {}",
            args.len()
        )));
    }
    Ok(())
}

/// The error for argument `index` of `kind.name`, which must be `what`.
pub(crate) fn arg_error(
    kind: &str,
    name: &str,
    index: usize,
    what: &str,
    got: &AnyView<'_>,
) -> Error {
    Error::type_error(format!(
        "{kind}.{name}: argument #{index} must be {what}, not `{}`",
        got.type_name()
    ))
}

/// A string argument.
pub(crate) fn str_arg(v: &AnyView<'_>) -> Option<String> {
    v.str_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// A non-negative index argument.
pub(crate) fn index_arg(kind: &str, name: &str, i: usize, v: &AnyView<'_>) -> Result<usize> {
    let n: i64 = v
        .try_as()
        .map_err(|_| arg_error(kind, name, i, "an int (an index)", v))?;
    usize::try_from(n)
        .map_err(|_| Error::index_error(format!("{kind}.{name}: index {n} is negative")))
}

/// An input given by name or index.
pub(crate) fn input_arg(
    exec: &dyn Executor,
    kind: &str,
    name: &str,
    i: usize,
    v: &AnyView<'_>,
) -> Result<usize> {
    match str_arg(v) {
        Some(s) => exec.require_input(&s, name),
        None if v.type_index() == type_index::INT => index_arg(kind, name, i, v),
        None => Err(arg_error(kind, name, i, "an input name or index", v)),
    }
}

/// A tensor argument.
pub(crate) fn tensor_arg(kind: &str, name: &str, i: usize, v: &AnyView<'_>) -> Result<Tensor> {
    v.try_as::<Tensor>()
        .map_err(|_| arg_error(kind, name, i, "a tensor", v))
}

/// A tensor argument the executor keeps (an owned `ffi.Tensor`, not a borrowed `DLTensor*`).
pub(crate) fn kept_tensor_arg(kind: &str, name: &str, i: usize, v: &AnyView<'_>) -> Result<Tensor> {
    if v.type_index() == type_index::DL_TENSOR_PTR {
        return Err(Error::type_error(format!(
            "{kind}.{name}: a borrowed DLTensor* cannot be kept; pass an ffi.Tensor"
        )));
    }
    tensor_arg(kind, name, i, v)
}

/// A module function's body over a locked-by-call executor.
pub(crate) type Body<E> = fn(&Arc<Mutex<E>>, &[AnyView<'_>]) -> Result<Any>;

/// The body of a common executor function: over any executor, whose module kind (for
/// messages) comes with the call.
pub(crate) type CommonBody = fn(&Mutex<dyn Executor>, &str, &[AnyView<'_>]) -> Result<Any>;

/// The body of the common executor function `name` (see the module docs), if it is one.
pub(crate) fn common_body(name: &str) -> Option<CommonBody> {
    let f: CommonBody = match name {
        "set_input" => |e, kind, a| {
            check_arity(kind, "set_input", "key, value", a, 2, 2)?;
            let mut x = lock(e);
            let i = input_arg(&*x, kind, "set_input", 0, &a[0])?;
            x.set_input(i, &tensor_arg(kind, "set_input", 1, &a[1])?)?;
            Ok(Any::none())
        },
        "set_input_zero_copy" => |e, kind, a| {
            let n = "set_input_zero_copy";
            check_arity(kind, n, "key, value", a, 2, 2)?;
            let t = kept_tensor_arg(kind, n, 1, &a[1])?;
            let mut x = lock(e);
            let i = input_arg(&*x, kind, n, 0, &a[0])?;
            x.set_input_zero_copy(i, &t)?;
            Ok(Any::none())
        },
        "get_input" => |e, kind, a| {
            check_arity(kind, "get_input", "key", a, 1, 1)?;
            let x = lock(e);
            let i = input_arg(&*x, kind, "get_input", 0, &a[0])?;
            Ok(x.get_input(i)?.into())
        },
        "get_output" => |e, kind, a| {
            check_arity(kind, "get_output", "index, out=None", a, 1, 2)?;
            let i = index_arg(kind, "get_output", 0, &a[0])?;
            let x = lock(e);
            match a.get(1).filter(|v| !v.is_none()) {
                Some(out) => {
                    x.copy_output_to(i, &tensor_arg(kind, "get_output", 1, out)?)?;
                    Ok(Any::none())
                }
                None => Ok(x.get_output(i)?.into()),
            }
        },
        "get_num_inputs" => |e, kind, a| {
            check_arity(kind, "get_num_inputs", "", a, 0, 0)?;
            Ok((lock(e).num_inputs() as i64).into())
        },
        "get_num_outputs" => |e, kind, a| {
            check_arity(kind, "get_num_outputs", "", a, 0, 0)?;
            Ok((lock(e).num_outputs() as i64).into())
        },
        "get_input_index" => |e, kind, a| {
            check_arity(kind, "get_input_index", "name", a, 1, 1)?;
            let name = str_arg(&a[0])
                .ok_or_else(|| arg_error(kind, "get_input_index", 0, "a str", &a[0]))?;
            Ok(lock(e).input_index(&name).map_or(-1, |i| i as i64).into())
        },
        "get_input_name" => |e, kind, a| {
            check_arity(kind, "get_input_name", "index", a, 1, 1)?;
            let i = index_arg(kind, "get_input_name", 0, &a[0])?;
            Ok(lock(e).input_name(i)?.into())
        },
        "get_input_info" => |e, kind, a| {
            check_arity(kind, "get_input_info", "", a, 0, 0)?;
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
        "get_output_info" => |e, kind, a| {
            check_arity(kind, "get_output_info", "", a, 0, 0)?;
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
        "run" => |e, kind, a| {
            check_arity(kind, "run", "", a, 0, 0)?;
            lock(e).run()?;
            Ok(Any::none())
        },
        "run_from_inputs" => |e, kind, a| {
            let n = "run_from_inputs";
            let sig = "device_type, device_id, key0, value0, ...";
            check_arity(kind, n, sig, a, 2, usize::MAX)?;
            if a.len() % 2 != 0 {
                return Err(Error::type_error(format!(
                    "{}.{n}({sig}) takes key-value pairs after the device",
                    kind
                )));
            }
            let host = Device::new(
                a[0].try_as()
                    .map_err(|_| arg_error(kind, n, 0, "an int", &a[0]))?,
                a[1].try_as()
                    .map_err(|_| arg_error(kind, n, 1, "an int", &a[1]))?,
            );
            let mut x = lock(e);
            for k in (2..a.len()).step_by(2) {
                let i = input_arg(&*x, kind, n, k, &a[k])?;
                x.set_input(i, &tensor_arg(kind, n, k + 1, &a[k + 1])?)?;
            }
            x.run()?;
            let outs = (0..x.num_outputs())
                .map(|i| Ok(Any::from(x.get_output(i)?.to_device(host)?)))
                .collect::<Result<Vec<_>>>()?;
            Ok(Array::new(outs).0.into())
        },
        _ => return None,
    };
    Some(f)
}
