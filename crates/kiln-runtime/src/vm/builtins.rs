//! The runtime builtins a VM program calls (`Call` instructions, global functions
//! `vm.builtin.<name>`): the scalar bookkeeping of run-time loops and the lists that collect a
//! loop's scan outputs. Scalars live on the CPU; lists are `ffi.Array`s of tensors.
//!
//! | builtin | arguments | result |
//! | --- | --- | --- |
//! | `int64_scalar` | v | int64 scalar `v` |
//! | `bool_scalar` | v | bool scalar `v != 0` |
//! | `loop_continue` | i, max, cond | bool scalar `i < max && cond` |
//! | `add_one` | i (int64 scalar) | `i + 1` |
//! | `list_new` | | an empty list |
//! | `list_append` | list, x | the list with a copy of `x` appended |
//! | `shape_is` | tensors..., then per tensor its rank and dims | bool scalar: every tensor has its shape (a dim of -1 matches any) |
//! | `list_stack` | list, dtype code, bits, lanes, dims... | the items stacked on a new first axis (`[0, dims...]` for none; a dim of -1 is the first item's, 0 for none) |

use crate::tensor::Tensor;
use kiln_ffi::{register_global, Any, Array, DataType, Device, Error, Result};

/// The value of a one-element tensor.
pub(super) fn scalar(t: &Tensor, what: &str) -> Result<f64> {
    if t.numel() != 1 {
        return Err(Error::value_error(format!(
            "{what} must hold one element, it has shape {:?}",
            t.shape()
        )));
    }
    Ok(t.to_f64_vec()?[0])
}

fn int64_scalar(v: i64) -> Result<Tensor> {
    Tensor::from_slice(&[v], &[])
}

fn bool_scalar(v: bool) -> Result<Tensor> {
    let t = Tensor::empty(&[], DataType::bool(), Device::cpu(0))?;
    t.copy_from_bytes(&[v as u8])?;
    Ok(t)
}

register_global!("vm.builtin.int64_scalar", |v: i64| -> Result<Tensor> {
    int64_scalar(v)
});

register_global!("vm.builtin.bool_scalar", |v: i64| -> Result<Tensor> {
    bool_scalar(v != 0)
});

register_global!("vm.builtin.loop_continue", |i: Tensor,
                                              max: Tensor,
                                              cond: Tensor|
 -> Result<Tensor> {
    // The trip count compares as an integer (a float would round 2^63 - 1).
    let i = int_scalar(&i, "the iteration number")?;
    let max = int_scalar(&max, "the Loop's trip count M")?;
    let c = scalar(&cond, "the Loop's condition")? != 0.0;
    bool_scalar(i < max && c)
});

/// An integer scalar read exactly (int64 and int32 tensors), else through f64.
fn int_scalar(t: &Tensor, what: &str) -> Result<i64> {
    if t.numel() == 1 && t.dtype() == DataType::int(64) {
        return Ok(t.to_vec::<i64>()?[0]);
    }
    Ok(scalar(t, what)? as i64)
}

register_global!("vm.builtin.add_one", |i: Tensor| -> Result<Tensor> {
    int64_scalar(int_scalar(&i, "the iteration number")? + 1)
});

register_global!("vm.builtin.list_new", || -> Array {
    Array::new(Vec::new())
});

register_global!("vm.builtin.list_append", |list: Array,
                                            x: Tensor|
 -> Result<Array> {
    // A copy: x is a segment's output memory, which the next iteration overwrites.
    let copy = Tensor::empty(x.shape(), x.dtype(), x.device())?;
    copy.copy_from(&x)?;
    let mut items: Vec<Any> = list.iter().map(Any::from).collect();
    items.push(copy.into());
    Ok(Array::new(items))
});

kiln_ffi::register_global_packed!("vm.builtin.list_stack", |args: &[kiln_ffi::AnyView<
    '_,
>]|
 -> Result<Any> {
    let what = "vm.builtin.list_stack(list, code, bits, lanes, dims...)";
    if args.len() < 4 {
        return Err(Error::type_error(format!("{what}: too few arguments")));
    }
    let list: Array = args[0].try_as()?;
    let ints = args[1..]
        .iter()
        .map(|a| a.try_as::<i64>())
        .collect::<Result<Vec<i64>>>()?;
    let (code, bits, lanes) = (ints[0], ints[1], ints[2]);
    let dtype = DataType::new(
        u8::try_from(code).map_err(|_| Error::value_error(format!("{what}: code {code}")))?,
        u8::try_from(bits).map_err(|_| Error::value_error(format!("{what}: bits {bits}")))?,
        u16::try_from(lanes).map_err(|_| Error::value_error(format!("{what}: lanes {lanes}")))?,
    );
    // Declared extents of -1 are the first item's (0 without items); the others must agree.
    let mut dims = ints[3..].to_vec();
    let mut bytes = Vec::new();
    let mut device = Device::cpu(0);
    for (k, item) in list.iter().enumerate() {
        let t: Tensor = item.try_as()?;
        let fits = t.shape().len() == dims.len()
            && t.shape()
                .iter()
                .zip(&dims)
                .all(|(&a, &b)| b == -1 || a == b);
        if k == 0 && fits {
            dims = t.shape().to_vec();
        }
        if !fits || t.dtype() != dtype {
            return Err(Error::value_error(format!(
                "scan output of iteration {k} is {} {:?}, but the loop's body declares {dtype} \
                     {dims:?}",
                t.dtype(),
                t.shape()
            )));
        }
        device = t.device();
        bytes.extend_from_slice(&t.to_bytes()?);
    }
    let mut shape = vec![list.len() as i64];
    shape.extend(dims.iter().map(|&d| d.max(0)));
    let out = Tensor::empty(&shape, dtype, Device::cpu(0))?;
    out.copy_from_bytes(&bytes)?;
    Ok(out.to_device(device)?.into())
});

kiln_ffi::register_global_packed!(
    "vm.builtin.shape_is",
    |args: &[kiln_ffi::AnyView<'_>]| -> Result<Any> {
        // The tensors come first; the integers (rank, dims... per tensor) after them.
        let n = args
            .iter()
            .position(|a| a.try_as::<Tensor>().is_err())
            .unwrap_or(args.len());
        let ints = args[n..]
            .iter()
            .map(|a| a.try_as::<i64>())
            .collect::<Result<Vec<i64>>>()?;
        let mut at = 0;
        let mut all = true;
        for a in &args[..n] {
            let t: Tensor = a.try_as()?;
            let rank = *ints.get(at).ok_or_else(|| {
                Error::value_error("vm.builtin.shape_is: fewer shapes than tensors")
            })? as usize;
            let dims = ints
                .get(at + 1..at + 1 + rank)
                .ok_or_else(|| Error::value_error("vm.builtin.shape_is: a shape is cut short"))?;
            all &= t.ndim() == rank && t.shape().iter().zip(dims).all(|(&d, &w)| w == -1 || d == w);
            at += 1 + rank;
        }
        Ok(bool_scalar(all)?.into())
    }
);
