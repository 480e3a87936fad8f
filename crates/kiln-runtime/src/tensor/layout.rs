//! Shape arithmetic shared by tensors and device copies: element counts and byte sizes with
//! checked arithmetic, compact strides, contiguity.

use kiln_ffi::abi::DLTensor;
use kiln_ffi::{DataType, Error, Result};

/// Largest number of dimensions Kiln accepts (far above any real tensor; keeps a corrupt `ndim`
/// from turning into a huge allocation).
pub const MAX_NDIM: usize = 1024;

/// Number of elements of `shape`, or a `ValueError` for a negative dimension or an overflow.
pub fn checked_numel(shape: &[i64]) -> Result<usize> {
    let mut n: usize = 1;
    for (i, &d) in shape.iter().enumerate() {
        let d = usize::try_from(d).map_err(|_| {
            Error::value_error(format!(
                "shape {shape:?} has a negative dimension {d} at axis {i}"
            ))
        })?;
        n = n.checked_mul(d).ok_or_else(|| {
            Error::value_error(format!(
                "shape {shape:?} has too many elements (the count overflows 64 bits)"
            ))
        })?;
    }
    Ok(n)
}

/// Bytes taken by `numel` elements of `dtype` (each rounded up to whole bytes, as TVM does:
/// sub-byte types take one byte per element, see `kiln_ffi::dtype`), or a `ValueError` on
/// overflow or a dtype without size.
pub fn checked_nbytes(numel: usize, dtype: DataType) -> Result<usize> {
    let bytes_per_elem = dtype.bytes();
    if bytes_per_elem == 0 {
        return Err(Error::value_error(format!(
            "data type `{dtype}` has no size; a tensor needs bits > 0 and lanes > 0"
        )));
    }
    numel
        .checked_mul(bytes_per_elem)
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| {
            Error::value_error(format!(
                "{numel} elements of `{dtype}` do not fit in memory (the byte size overflows)"
            ))
        })
}

/// Row-major strides (in elements) of a compact tensor of `shape`.
pub fn compact_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc = acc.wrapping_mul(shape[i].max(1));
    }
    strides
}

/// True when `strides` (None: compact) describe the row-major layout of `shape`. Dimensions of
/// size 1 may have any stride, and a tensor without elements is always contiguous (as in
/// TVM-FFI, NumPy and PyTorch).
pub fn is_contiguous(shape: &[i64], strides: Option<&[i64]>) -> bool {
    let Some(strides) = strides else {
        return true;
    };
    if shape.contains(&0) {
        return true;
    }
    let mut expected: i64 = 1;
    for (&dim, &stride) in shape.iter().zip(strides).rev() {
        if dim == 1 {
            continue;
        }
        if stride != expected {
            return false;
        }
        expected = expected.wrapping_mul(dim);
    }
    true
}

/// The shape and strides of a DLTensor as slices.
///
/// # Safety
/// `t.shape` (and `t.strides` when not NULL) must point to `t.ndim` values alive for `'a`.
pub unsafe fn dims<'a>(t: &DLTensor) -> (&'a [i64], Option<&'a [i64]>) {
    let n = usize::try_from(t.ndim).unwrap_or(0);
    if n == 0 || t.shape.is_null() {
        return (&[], None);
    }
    // SAFETY: the caller guarantees `n` shape values (and strides, when not NULL) alive for 'a.
    let shape = unsafe { std::slice::from_raw_parts(t.shape, n) };
    // SAFETY: as above.
    let strides =
        (!t.strides.is_null()).then(|| unsafe { std::slice::from_raw_parts(t.strides, n) });
    (shape, strides)
}

/// Checks the metadata of a DLTensor that comes from outside (DLPack, a `DLTensor*` argument):
/// ndim in range, shape present, no negative dimension, sizes that fit. `what` names the tensor.
///
/// # Safety
/// When `ndim > 0`, `shape` (and `strides` when not NULL) must point to `ndim` readable values.
pub unsafe fn validate(t: &DLTensor, what: &str) -> Result<usize> {
    let ndim = usize::try_from(t.ndim)
        .ok()
        .filter(|&n| n <= MAX_NDIM)
        .ok_or_else(|| {
            Error::value_error(format!(
                "{what}: ndim {} is out of range [0, {MAX_NDIM}]",
                t.ndim
            ))
        })?;
    if ndim > 0 && t.shape.is_null() {
        return Err(Error::value_error(format!(
            "{what}: shape is NULL for a tensor with {ndim} dimensions"
        )));
    }
    // SAFETY: ndim is in range and shape non-NULL (checked above); the caller guarantees the
    // values are readable.
    let (shape, _) = unsafe { dims(t) };
    let numel = checked_numel(shape).map_err(|e| e.context(what))?;
    let nbytes = checked_nbytes(numel, DataType(t.dtype)).map_err(|e| e.context(what))?;
    if nbytes > 0 && t.data.is_null() {
        return Err(Error::value_error(format!(
            "{what}: data is NULL for a tensor of {nbytes} bytes"
        )));
    }
    Ok(numel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numel_and_nbytes_are_checked() {
        assert_eq!(checked_numel(&[]).unwrap(), 1);
        assert_eq!(checked_numel(&[2, 3, 4]).unwrap(), 24);
        assert_eq!(checked_numel(&[2, 0, 4]).unwrap(), 0);
        let e = checked_numel(&[2, -1]).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("axis 1"), "{}", e.message());
        assert!(checked_numel(&[i64::MAX, i64::MAX]).is_err());
        assert_eq!(checked_nbytes(10, DataType::float(32)).unwrap(), 40);
        // Sub-byte elements take a byte each (uint1, int4, float4_e2m1fn).
        assert_eq!(checked_nbytes(10, DataType::new(1, 1, 1)).unwrap(), 10);
        assert_eq!(checked_nbytes(10, DataType::int(4)).unwrap(), 10);
        assert_eq!(checked_nbytes(3, DataType::new(17, 4, 1)).unwrap(), 3);
        assert_eq!(
            checked_nbytes(3, DataType::float(32).with_lanes(4)).unwrap(),
            48
        );
        assert!(checked_nbytes(usize::MAX / 2, DataType::float(32)).is_err());
        assert!(checked_nbytes(1, DataType::void()).is_err());
    }

    #[test]
    fn strides_and_contiguity() {
        assert_eq!(compact_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(compact_strides(&[]), Vec::<i64>::new());
        assert!(is_contiguous(&[2, 3], None));
        assert!(is_contiguous(&[2, 3], Some(&[3, 1])));
        assert!(!is_contiguous(&[2, 3], Some(&[1, 2])));
        assert!(is_contiguous(&[1, 3], Some(&[99, 1])));
        assert!(is_contiguous(&[0, 3], Some(&[7, 7])));
    }
}
