//! `AlterOpLayout`: operators whose schedules want another layout get it. On CPUs a
//! convolution loads a vector of output channels per weight read, so `nn.conv2d` with an `OIHW`
//! kernel gets `layout_transform(weight, "OIHW", "OIHW{b}o")` and `kernel_layout="OIHW{b}o"`,
//! `b` being 16 (one AVX-512 vector) or 8 when that divides the output channels per group;
//! without groups the last block may be padded with zero filters (1000 classes: 63 blocks of
//! 16), `channels` keeping the true count.
//! Constant weights are packed at compile time by the `FoldConstant` that follows; depthwise
//! convolutions (one output channel per group) keep `OIHW`.

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::attrs::with_attr;
use crate::ir::visit::rewrite_function_orig;
use crate::ir::{AttrValue, Expr};
use crate::op::{attr, mk};
use kiln_ffi::Result;

/// The block for a convolution with `opg` output channels per group, if any: 16 or 8 when it
/// divides them; without groups also 16 (or 8 below 12 channels) with the last block padded.
fn block(opg: i64, groups: i64) -> Option<i64> {
    let exact = [16, 8].into_iter().find(|b| opg % b == 0);
    match exact {
        Some(b) if !(b == 8 && groups == 1 && opg > 32) => Some(b),
        _ if groups == 1 && opg >= 12 => Some(16),
        _ if groups == 1 && opg >= 4 => Some(8),
        other => other,
    }
}

fn alter(orig: &Expr, e: &Expr) -> Result<Option<Expr>> {
    if e.op_name() != Some("nn.conv2d") || e.attrs().str("kernel_layout")? != "OIHW" {
        return Ok(None);
    }
    let w_ty = orig.args()[1].ty()?;
    let w = w_ty.shape();
    let groups = e.attrs().int("groups")?;
    if w.len() != 4 || groups < 1 || w[0] % groups != 0 {
        return Ok(None);
    }
    let Some(b) = block(w[0] / groups, groups) else {
        return Ok(None);
    };
    let layout = format!("OIHW{b}o");
    let packed = mk(
        "layout_transform",
        vec![e.args()[1].clone()],
        &[
            ("src_layout", attr("OIHW")),
            ("dst_layout", attr(layout.as_str())),
        ],
    );
    let call_attrs = &e.as_call().expect("a call").attrs;
    let attrs = with_attr(call_attrs, "kernel_layout", AttrValue::Str(layout));
    let attrs = with_attr(&attrs, "channels", AttrValue::Int(w[0]));
    Ok(Some(Expr::call_raw(
        Expr::op("nn.conv2d"),
        vec![e.args()[0].clone(), packed],
        attrs,
    )))
}

/// The pass (opt level 3, as in TVM).
pub fn alter_op_layout() -> Pass {
    function_pass("AlterOpLayout", 3, |f, _| {
        let f = infer_function(&f)?;
        let out = rewrite_function_orig(&f, |orig, e| {
            Ok(alter(orig, e)?.unwrap_or_else(|| e.clone()))
        })?;
        infer_function(&out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Function, IRModule, Type, Var};
    use crate::transform::{fold_constant, PassContext};

    #[test]
    fn packs_conv_kernels_and_folds_them() {
        let x = Var::new("x", Type::f32(&[1, 4, 8, 8]));
        let vals: Vec<f32> = (0..32 * 4 * 9).map(|v| v as f32).collect();
        let w = Expr::const_f32(&vals, &[32, 4, 3, 3]);
        let dw = Expr::const_f32(&vals[..36], &[4, 1, 3, 3]);
        let conv = mk("nn.conv2d", vec![x.expr(), w], &[]);
        let depthwise = mk("nn.conv2d", vec![x.expr(), dw], &[("groups", attr(4))]);
        let body = Expr::tuple(vec![conv, depthwise]);
        let m = IRModule::from_main(Function::new(vec![x], body));
        let ctx = PassContext::with_opt_level(3);
        let m = alter_op_layout().run(m, &ctx).unwrap();
        let m = fold_constant().run(m, &ctx).unwrap();
        let main = m.main().unwrap();
        let fields = crate::ir::visit::children(main.body());
        let packed = &fields[0];
        assert_eq!(packed.attrs().str("kernel_layout").unwrap(), "OIHW16o");
        let pw = packed.args()[1].as_constant().expect("folded weight");
        assert_eq!(pw.shape(), &[2, 4, 3, 3, 16]);
        assert_eq!(packed.ty().unwrap(), Type::f32(&[1, 32, 6, 6]));
        assert_eq!(fields[1].attrs().str("kernel_layout").unwrap(), "OIHW");
    }
}
