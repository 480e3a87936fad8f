//! Naive reference kernels: the plain loops that compiled kernels are checked against. All
//! tensors are row-major `f32` slices.

/// The matmul of `a` (n x l) and `b` (l x m): an n x m result.
pub fn matmul(a: &[f32], b: &[f32], n: usize, m: usize, l: usize) -> Vec<f32> {
    let mut want = vec![0f32; n * m];
    for i in 0..n {
        for j in 0..m {
            let mut acc = 0f32;
            for k in 0..l {
                acc += a[i * l + k] * b[k * m + j];
            }
            want[i * m + j] = acc;
        }
    }
    want
}

/// The 2-D convolution of CHW `data` with OIHW `weight`, stride 1, zero padding `pad` on every
/// side, output the input's height and width (a `kh` x `kw` kernel with `pad = (k - 1) / 2`);
/// `dims` = (ci, h, w, co, kh, kw, pad). The result is `co` x `h` x `w`.
pub fn conv2d_chw(
    data: &[f32],
    weight: &[f32],
    dims: (i64, i64, i64, i64, i64, i64, i64),
) -> Vec<f32> {
    let (ci, h, w, co, kh, kw, pad) = dims;
    let mut want = vec![0f32; (co * h * w) as usize];
    for f in 0..co {
        for y in 0..h {
            for x in 0..w {
                let mut acc = 0f32;
                for r in 0..ci {
                    for dy in 0..kh {
                        for dx in 0..kw {
                            let (iy, ix) = (y + dy - pad, x + dx - pad);
                            if iy >= 0 && iy < h && ix >= 0 && ix < w {
                                acc += data[((r * h + iy) * w + ix) as usize]
                                    * weight[(((f * ci + r) * kh + dy) * kw + dx) as usize];
                            }
                        }
                    }
                }
                want[((f * h + y) * w + x) as usize] = acc;
            }
        }
    }
    want
}

/// The softmax of each row of the `n` x `m` input (the row maximum subtracted first).
pub fn softmax_rows(x: &[f32], n: usize, m: usize) -> Vec<f32> {
    let mut want = vec![0f32; n * m];
    for i in 0..n {
        let row = &x[i * m..(i + 1) * m];
        let mx = row.iter().cloned().fold(f32::MIN, f32::max);
        let ex: Vec<f32> = row.iter().map(|v| (v - mx).exp()).collect();
        let tot: f32 = ex.iter().sum();
        for j in 0..m {
            want[i * m + j] = ex[j] / tot;
        }
    }
    want
}

/// The sum of squares of each row of the `n` x `m` input.
pub fn row_sum_squares(x: &[f32], n: usize, m: usize) -> Vec<f32> {
    (0..n)
        .map(|i| x[i * m..(i + 1) * m].iter().map(|v| v * v).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_cases() {
        // [[1, 2], [3, 4]] x identity.
        assert_eq!(
            matmul(&[1., 2., 3., 4.], &[1., 0., 0., 1.], 2, 2, 2),
            vec![1., 2., 3., 4.]
        );
        // A 1x1 kernel of weight 2 doubles the input.
        let d = [1., 2., 3., 4.];
        assert_eq!(
            conv2d_chw(&d, &[2.], (1, 2, 2, 1, 1, 1, 0)),
            vec![2., 4., 6., 8.]
        );
        let s = softmax_rows(&[0., 0., 1., 1.], 2, 2);
        assert_eq!(s, vec![0.5; 4]);
    }
}
