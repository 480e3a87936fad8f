//! Row-major index arithmetic for reference loops.

/// The element count of `shape`.
pub fn numel(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// The row-major strides of `shape`, in elements.
pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The row-major coordinates of linear index `lin` in `shape`.
pub fn unravel(mut lin: i64, shape: &[i64]) -> Vec<i64> {
    let mut out = vec![0i64; shape.len()];
    for d in (0..shape.len()).rev() {
        out[d] = lin % shape[d].max(1);
        lin /= shape[d].max(1);
    }
    out
}

/// The linear index of coordinates `idx` in `shape`.
pub fn ravel(idx: &[i64], shape: &[i64]) -> i64 {
    idx.iter().zip(strides(shape)).map(|(i, s)| i * s).sum()
}

/// The linear index into an operand of shape `s` (right-aligned, size-1 axes broadcast) of
/// output coordinates `idx`.
pub fn bcast_index(idx: &[i64], s: &[i64]) -> i64 {
    let off = idx.len() - s.len();
    let c: Vec<i64> = s
        .iter()
        .enumerate()
        .map(|(d, &n)| if n == 1 { 0 } else { idx[d + off] })
        .collect();
    ravel(&c, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let shape = [2, 3, 4];
        assert_eq!(strides(&shape), vec![12, 4, 1]);
        for lin in 0..24 {
            assert_eq!(ravel(&unravel(lin, &shape), &shape), lin);
        }
        assert_eq!(bcast_index(&[1, 2, 3], &[1, 4]), 3);
    }
}
