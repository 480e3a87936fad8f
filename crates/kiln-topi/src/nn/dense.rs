//! Dense (fully connected): `out = data · weightᵀ (+ bias)`.

use super::{compute_tagged, consts, invalid, shape_nd, tag};
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};

/// `out[m, n] = sum_k data[m, k] * weight[n, k] (+ bias[n])` for `data` `[M, K]`, `weight`
/// `[N, K]` and `bias` `[N]`. The product is named `dense` and tagged [`tag::DENSE`]; with a
/// bias the output is a broadcast add (`dense_bias`, tagged [`tag::BROADCAST`]) reading it.
pub fn dense(data: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let [m, k]: [i64; 2] = shape_nd(data, 2, "dense")?.try_into().expect("2-D");
    let [n, k2]: [i64; 2] = shape_nd(weight, 2, "dense")?.try_into().expect("2-D");
    if k != k2 {
        return Err(invalid(
            "dense",
            format!("data has {k} features, weight {k2}"),
        ));
    }
    let rk = reduce_axis_n(k, "k");
    let (d, w) = (data.clone(), weight.clone());
    let prod = compute_tagged(
        &consts(&[m, n]),
        |i| {
            sum(
                d.at(&[i[0].to_expr(), rk.expr()]) * w.at(&[i[1].to_expr(), rk.expr()]),
                std::slice::from_ref(&rk),
            )
        },
        "dense",
        tag::DENSE,
    )?;
    let Some(bias) = bias else {
        return Ok(prod);
    };
    let bs = shape_nd(bias, 1, "dense")?;
    if bs[0] != n {
        return Err(invalid(
            "dense",
            format!("bias has {} entries, output {n} columns", bs[0]),
        ));
    }
    let b = bias.clone();
    compute_tagged(
        &consts(&[m, n]),
        |i| prod.at_vars(i) + b.at(&[i[1].to_expr()]),
        "dense_bias",
        tag::BROADCAST,
    )
}
