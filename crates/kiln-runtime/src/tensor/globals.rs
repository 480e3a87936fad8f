//! Global functions on tensors, for C and Python (`runtime.Tensor*`):
//!
//! | name | arguments | result |
//! | --- | --- | --- |
//! | `runtime.TensorEmpty` | shape (`ffi.Shape`, array of ints or int), dtype, device (None: cpu) | new tensor |
//! | `runtime.TensorCopyFromBytes` | tensor, bytes (exactly `nbytes`, row-major) | None |
//! | `runtime.TensorCopyToBytes` | tensor | bytes (row-major) |
//! | `runtime.TensorCopyFromTo` | source tensor, destination tensor | None |
//! | `runtime.TensorView` | tensor, shape, dtype (None: same) | view sharing the data |
//! | `runtime.TensorToDevice` | tensor, device | compact copy on the device |
//! | `runtime.TensorFromDLTensor` | tensor or `DLTensor*` | the tensor (a `DLTensor*` becomes a non-owning view) |
//! | `runtime.TensorIsContiguous` | tensor | bool |

use super::Tensor;
use kiln_ffi::abi::type_index as ti;
use kiln_ffi::any::AnyView;
use kiln_ffi::{
    register_global, register_global_packed, Any, Array, Bytes, DataType, Device, Error, Result,
    Shape,
};

/// Reads a shape argument: an `ffi.Shape`, an array of ints, or one int.
fn shape_arg(v: &Any, what: &str) -> Result<Vec<i64>> {
    match v.type_index() {
        ti::SHAPE => Ok(v.try_as::<Shape>()?.as_slice().to_vec()),
        ti::ARRAY => v
            .try_as::<Array>()?
            .to_vec::<i64>()
            .map_err(|e| e.context(format!("{what}: shape"))),
        ti::INT => Ok(vec![v.try_as::<i64>()?]),
        _ => Err(Error::type_error(format!(
            "{what}: expected a shape (ffi.Shape or a list of ints) but got `{}`",
            v.view().type_name()
        ))),
    }
}

register_global!("runtime.TensorEmpty", |shape: Any,
                                         dtype: DataType,
                                         device: Option<Device>|
 -> Result<Tensor> {
    let shape = shape_arg(&shape, "runtime.TensorEmpty")?;
    Tensor::empty(&shape, dtype, device.unwrap_or(Device::cpu(0)))
});

// Packed so the bytes are read in place rather than copied into a Vec first.
register_global_packed!("runtime.TensorCopyFromBytes", |args: &[AnyView<'_>]| {
    let sig = ["ffi.Tensor".to_string(), "bytes".to_string()];
    if args.len() != 2 {
        return Err(kiln_ffi::function::arity_error(
            "runtime.TensorCopyFromBytes",
            &sig,
            args.len(),
        ));
    }
    let t: Tensor = args[0].try_as().map_err(|_| {
        kiln_ffi::function::arg_type_error("runtime.TensorCopyFromBytes", &sig, 0, &args[0])
    })?;
    let bytes = args[1].bytes_bytes().ok_or_else(|| {
        kiln_ffi::function::arg_type_error("runtime.TensorCopyFromBytes", &sig, 1, &args[1])
    })?;
    t.copy_from_bytes(bytes)?;
    Ok(Any::none())
});

register_global!("runtime.TensorCopyToBytes", |t: Tensor| -> Result<Bytes> {
    Ok(Bytes::from_bytes(&t.to_bytes()?))
});

register_global!("runtime.TensorCopyFromTo", |src: Tensor,
                                              dst: Tensor|
 -> Result<()> {
    dst.copy_from(&src)
});

register_global!("runtime.TensorView", |t: Tensor,
                                        shape: Any,
                                        dtype: Option<DataType>|
 -> Result<Tensor> {
    let shape = shape_arg(&shape, "runtime.TensorView")?;
    t.view(&shape, dtype.unwrap_or(t.dtype()))
});

register_global!("runtime.TensorToDevice", |t: Tensor,
                                            device: Device|
 -> Result<Tensor> {
    t.to_device(device)
});

register_global!("runtime.TensorFromDLTensor", |t: Tensor| t);

register_global!("runtime.TensorIsContiguous", |t: Tensor| t.is_contiguous());
