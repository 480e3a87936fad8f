//! Dense (fully connected): `out = data · weightᵀ (+ bias)`.

use super::{compute_tagged, consts, invalid, product_dtype_of, read_as, shape_nd};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::{reduce_axis_n, sum, Tensor};

/// `out[m, n] = sum_k data[m, k] * weight[n, k] (+ bias[n])` for `data` `[M, K]`, `weight`
/// `[N, K]` and `bias` `[N]`; an integer `weight` under float `data` is converted on each read
/// ([`super::product_dtype`]). The product is named `dense` and tagged [`tag::DENSE`]; with a
/// bias the output is a broadcast add (`dense_bias`, tagged [`tag::BROADCAST`]) reading it.
pub fn dense(data: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let [m, k]: [i64; 2] = shape_nd(data, 2, "dense")?.try_into().expect("2-D");
    if weight.ndim() == 3 {
        return dense_packed(data, weight, None, bias);
    }
    let [n, k2]: [i64; 2] = shape_nd(weight, 2, "dense")?.try_into().expect("2-D");
    if k != k2 {
        return Err(invalid(
            "dense",
            format!("data has {k} features, weight {k2}"),
        ));
    }
    let dt = product_dtype_of(data, weight, "dense")?;
    let rk = reduce_axis_n(k, "k");
    let (d, w) = (data.clone(), weight.clone());
    let prod = compute_tagged(
        &consts(&[m, n]),
        |i| {
            sum(
                read_as(&d, &[i[0].to_expr(), rk.expr()], dt)
                    * read_as(&w, &[i[1].to_expr(), rk.expr()], dt),
                std::slice::from_ref(&rk),
            )
        },
        "dense",
        tag::DENSE,
    )?;
    with_bias(prod, bias, m, n)
}

/// The `[m, n]` output of `prod` (`[m, n]`, or wider over padded columns): plus `bias` (`[n]`)
/// along the columns when there is one (a broadcast stage named `dense_bias`), else `prod`
/// itself, or a copy of its first `n` columns named `dense_columns`.
fn with_bias(prod: Tensor, bias: Option<&Tensor>, m: i64, n: i64) -> Result<Tensor> {
    let Some(bias) = bias else {
        if prod.shape()[1].as_int() == Some(n) {
            return Ok(prod);
        }
        return compute_tagged(
            &consts(&[m, n]),
            |i| prod.at_vars(i),
            "dense_columns",
            tag::INJECTIVE,
        );
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

/// [`dense`] with a packed weight `[ceil(N/b), K, b]` (layout `NK{b}n`, zeros past `N`): `out[m,
/// n] = sum_k data[m, k] * weight[n / b, k, n % b]`, so `b` outputs load one vector of weights.
/// `units` is `N` (default: all packed rows).
///
/// The product covers every packed column: past `N` it is the zeros' product, and the output
/// (the bias add, else a copy named `dense_columns`) reads its first `N` columns. A last
/// partial block is then a whole register tile like the others, only its stores cut short,
/// where a product of `N` columns took a guard on every multiply-add of that block (a
/// [160, 256] x [256, 97] product spent 29% of its time on its one last column).
pub fn dense_packed(
    data: &Tensor,
    weight: &Tensor,
    units: Option<i64>,
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    let [m, k]: [i64; 2] = shape_nd(data, 2, "dense")?.try_into().expect("2-D");
    let [nb, k2, b]: [i64; 3] = shape_nd(weight, 3, "dense")?.try_into().expect("3-D");
    let n = units.unwrap_or(nb * b);
    if k != k2 || b < 1 || n < 1 || (n + b - 1) / b != nb {
        return Err(invalid(
            "dense",
            format!("data [{m}, {k}] and packed weight [{nb}, {k2}, {b}] for {n} units do not fit"),
        ));
    }
    let dt = product_dtype_of(data, weight, "dense")?;
    let rk = reduce_axis_n(k, "k");
    let (d, w) = (data.clone(), weight.clone());
    let prod = compute_tagged(
        &consts(&[m, nb * b]),
        |i| {
            let j = i[1].to_expr();
            sum(
                read_as(&d, &[i[0].to_expr(), rk.expr()], dt)
                    * read_as(
                        &w,
                        &[
                            kiln_tir::floordiv(&j, b),
                            rk.expr(),
                            kiln_tir::floormod(&j, b),
                        ],
                        dt,
                    ),
                std::slice::from_ref(&rk),
            )
        },
        "dense",
        tag::DENSE,
    )?;
    with_bias(prod, bias, m, n)
}
