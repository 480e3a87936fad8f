//! Dense of `uint8` data by `int8` weights with `int32` results through four-byte dot products
//! ([`kiln_tir::op::DOT4_U8S8`], VNNI's `vpdpbusd` where the CPU has it): the integer kernel of
//! quantized matrix products.

use super::{compute_tagged, consts, invalid, shape_nd};
use crate::tag;
use kiln_ffi::{DataType, Result};
use kiln_te::{reduce_axis_n, sum, Tensor};
use kiln_tir::{op, PrimExpr};

/// The packed weight of [`dense_dot4`] for an `int8` weight `w` given as `[N, K]` values (read
/// by `at(n, k)`, so either storage order works): `[ceil(N/b), ceil(K/4), b]` int32, element
/// `[n / b, k / 4, n % b]` holding bytes `w[n, 4 (k/4) + j]` in byte `j`, zeros past `N` and `K`.
pub fn pack_dot4_weight(n: i64, k: i64, b: i64, at: impl Fn(i64, i64) -> i8) -> Vec<i32> {
    let (nb, kq) = ((n + b - 1) / b, (k + 3) / 4);
    let mut out = vec![0i32; (nb * kq * b) as usize];
    for row in 0..n {
        for kk in 0..k {
            let byte = at(row, kk) as u8 as u32;
            let i = ((row / b) * kq + kk / 4) * b + row % b;
            let v = out[i as usize] as u32 | (byte << (8 * (kk % 4)));
            out[i as usize] = v as i32;
        }
    }
    out
}

/// `out[m, n] = sum_k data[m, k] * w[n, k]` in int32 for `data` `[M, K]` `uint8` (`K` a
/// multiple of 4) and `weight` the int32 packing of `int8` `w` by [`pack_dot4_weight`]
/// (`[ceil(N/b), K/4, b]`); `units` is `N`. Each step of the reduction reads four bytes of a
/// row of `data` as one int32 and takes [`op::dot4_u8s8`] with a packed weight element, so a
/// vector of `b` columns is one `vpdpbusd`. Named `dense` and tagged [`tag::DENSE`]: the
/// x86 dense schedule tiles it like the float kernel.
pub fn dense_dot4(data: &Tensor, weight: &Tensor, units: i64) -> Result<Tensor> {
    let [m, k]: [i64; 2] = shape_nd(data, 2, "dense_dot4")?.try_into().expect("2-D");
    let [nb, kq, b]: [i64; 3] = shape_nd(weight, 3, "dense_dot4")?.try_into().expect("3-D");
    if data.dtype() != DataType::uint(8) || weight.dtype() != DataType::int(32) {
        return Err(invalid(
            "dense_dot4",
            format!(
                "data must be uint8 and the packed weight int32, got {} and {}",
                data.dtype(),
                weight.dtype()
            ),
        ));
    }
    if k % 4 != 0 || k / 4 != kq || b < 1 || units < 1 || (units + b - 1) / b != nb {
        return Err(invalid(
            "dense_dot4",
            format!(
                "data [{m}, {k}] and packed weight [{nb}, {kq}, {b}] for {units} units do not fit"
            ),
        ));
    }
    let i32t = DataType::int(32);
    let rk = reduce_axis_n(kq, "k");
    let (d, w) = (data.clone(), weight.clone());
    compute_tagged(
        &consts(&[m, units]),
        |i| {
            let row = i[0].to_expr();
            // Four consecutive bytes of the row as one int32, byte j in bits 8j.. .
            let word = (0..4)
                .map(|j| {
                    let byte = d.at(&[row.clone(), rk.expr() * 4 + j]).cast(i32t);
                    if j == 0 {
                        byte
                    } else {
                        op::shift_left(byte, PrimExpr::i32(8 * j))
                    }
                })
                .reduce(op::bitwise_or)
                .expect("four bytes");
            let j = i[1].to_expr();
            let wv = w.at(&[
                kiln_tir::floordiv(&j, b),
                rk.expr(),
                kiln_tir::floormod(&j, b),
            ]);
            sum(op::dot4_u8s8(word, wv), std::slice::from_ref(&rk))
        },
        "dense",
        tag::DENSE,
    )
}
