//! The whole pass list on a small model: conv2d + bias + batch_norm + relu + max_pool +
//! dense + bias + softmax.

use super::fuse_ops::fused_groups;
use super::*;
use crate::ir::{Expr, Function, IRModule, Type, Var};
use crate::op::mk;
use std::sync::Mutex;

fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| 0.5 + scale * (i % 7) as f32).collect()
}

fn model() -> IRModule {
    let x = Var::new("x", Type::f32(&[1, 3, 8, 8]));
    let c = |v: Vec<f32>, s: &[i64]| Expr::const_f32(&v, s);
    let conv = mk(
        "nn.conv2d",
        vec![x.expr(), c(ramp(4 * 3 * 9, 0.1), &[4, 3, 3, 3])],
        &[("padding", [1, 1].into())],
    );
    let bias = mk("nn.bias_add", vec![conv, c(ramp(4, 0.2), &[4])], &[]);
    let bn = mk(
        "nn.batch_norm",
        vec![
            bias,
            c(ramp(4, 0.3), &[4]),
            c(ramp(4, 0.1), &[4]),
            c(ramp(4, 0.05), &[4]),
            c(ramp(4, 0.4), &[4]),
        ],
        &[],
    );
    let relu = mk("nn.relu", vec![Expr::get_item(bn, 0)], &[]);
    let pool = mk(
        "nn.max_pool2d",
        vec![relu],
        &[("pool_size", [2, 2].into()), ("strides", [2, 2].into())],
    );
    let flat = mk("nn.batch_flatten", vec![pool], &[]);
    let dense = mk(
        "nn.dense",
        vec![flat, c(ramp(10 * 64, 0.01), &[10, 64])],
        &[],
    );
    let out = mk(
        "nn.softmax",
        vec![mk("nn.bias_add", vec![dense, c(ramp(10, 0.1), &[10])], &[])],
        &[],
    );
    IRModule::from_main(Function::new(vec![x], out))
}

#[test]
fn small_model_through_all_passes() {
    let printed = std::sync::Arc::new(Mutex::new(Vec::new()));
    let p2 = printed.clone();
    let ctx = PassContext::with_opt_level(3).print_all(Some(std::sync::Arc::new(
        move |name: &str, _m: &dyn std::fmt::Display| p2.lock().unwrap().push(name.to_string()),
    )));
    let out = default_pipeline().run(model(), &ctx).unwrap();
    let main = out.main().unwrap();
    assert_eq!(
        fused_groups(&main),
        vec![
            // The convolution and the pooling in channel blocks (ConvertBlockedLayout); the
            // flatten reads NCHW back.
            "fused_nn_conv2d_add_add_nn_relu",
            "fused_nn_max_pool2d",
            "fused_layout_transform_nn_batch_flatten",
            // 10 units on 8 lanes: the product computes 10 columns (a masked last vector)
            // and takes the bias.
            "fused_nn_dense_add",
            "fused_nn_softmax",
        ],
        "{out}"
    );
    assert_eq!(main.body().ty().unwrap(), Type::f32(&[1, 10]));
    let names = printed.lock().unwrap().clone();
    assert_eq!(names.first().map(String::as_str), Some("InferType"));
    assert_eq!(names.last().map(String::as_str), Some("FuseOps"));
    let text = out.to_string();
    assert!(text.contains("Primitive=1"), "{text}");
    assert!(
        !text.contains("batch_norm") && !text.contains("bias_add"),
        "{text}"
    );
}

#[test]
fn disabled_passes_are_skipped() {
    let ctx = PassContext::with_opt_level(3)
        .disable("SimplifyInference")
        .disable("FuseOps");
    let out = default_pipeline().run(model(), &ctx).unwrap();
    let text = out.to_string();
    assert!(text.contains("nn.batch_norm"), "{text}");
    assert!(!text.contains("Primitive"), "{text}");
}

#[test]
fn printer_is_relay_like() {
    let m = infer_type().apply(model()).unwrap();
    let text = m.to_string();
    assert!(
        text.starts_with(
            "def @main(%x: Tensor[(1, 3, 8, 8), float32]) -> Tensor[(1, 10), float32] {"
        ),
        "{text}"
    );
    assert!(
        text.contains("%0 = nn.conv2d(%x, meta[Constant][0] /* ty=Tensor[(4, 3, 3, 3), float32] */, strides=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1, data_layout=\"NCHW\", kernel_layout=\"OIHW\", out_layout=\"\", out_dtype=\"\") /* ty=Tensor[(1, 4, 8, 8), float32] */;"),
        "{text}"
    );
}
