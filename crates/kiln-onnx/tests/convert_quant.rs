//! The quantization converters on models built in Rust: over constant inputs every node folds
//! at import, so the folded values are checked against naive loops (round half to even,
//! saturation, per-axis and blocked parameters, DynamicQuantizeLinear's range); run-time
//! inputs give the output types; bad attributes and parameters get errors naming them.

mod proto_common;

use kiln_onnx::proto::{
    attribute_proto::AttributeType, tensor_proto::DataType as PType, AttributeProto, GraphProto,
    NodeProto, TensorProto, ValueInfoProto,
};
use kiln_onnx::{from_onnx, from_proto};
use proto_common::{int_attr, model_proto, typed_value_info, untyped};

/// A tensor of ONNX type `ty` holding `v` (floats in `float_data`, integers in `int32_data`).
fn tensor(name: &str, ty: PType, dims: &[i64], v: &[f64]) -> TensorProto {
    let mut t = TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(ty as i32),
        ..Default::default()
    };
    match ty {
        PType::Float => t.float_data = v.iter().map(|&x| x as f32).collect(),
        _ => t.int32_data = v.iter().map(|&x| x as i32).collect(),
    }
    t
}

fn node(op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    proto_common::node(op, &format!("{op}_0"), inputs, &["y"], attrs)
}

/// A `Constant` node producing `t` under its name.
fn constant(t: TensorProto) -> NodeProto {
    let name = t.name.clone().unwrap_or_default();
    NodeProto {
        op_type: Some("Constant".into()),
        output: vec![name],
        attribute: vec![AttributeProto {
            name: Some("value".into()),
            r#type: Some(AttributeType::Tensor as i32),
            t: Some(t),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn input(name: &str, ty: PType, dims: &[i64]) -> ValueInfoProto {
    typed_value_info(name, ty, dims)
}

/// A model of `nodes` after one `Constant` node per tensor of `consts` (constants rather than
/// initializers, which would become parameters when they hold floats).
fn model(
    opset: i64,
    nodes: Vec<NodeProto>,
    consts: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
) -> kiln_onnx::Model {
    let mut all: Vec<NodeProto> = consts.into_iter().map(constant).collect();
    all.extend(nodes);
    let graph = GraphProto {
        name: Some("g".into()),
        node: all,
        input: inputs,
        output: vec![untyped("y")],
        ..Default::default()
    };
    let m = model_proto(10, "", opset, graph);
    from_proto(&m, "<test>".into()).unwrap()
}

/// The folded output of a model whose inputs are all constants: dtype name, shape, values.
fn folded(m: &kiln_onnx::Model) -> (String, Vec<i64>, Vec<f64>) {
    let (module, _) = from_onnx(m, &Default::default()).unwrap();
    let main = module.main().unwrap();
    let c = main
        .body()
        .as_constant()
        .unwrap_or_else(|| panic!("not folded: {module}"));
    (
        c.dtype().to_string(),
        c.shape().to_vec(),
        c.to_f64_vec().unwrap(),
    )
}

fn convert_error(m: &kiln_onnx::Model) -> String {
    match from_onnx(m, &Default::default()) {
        Ok((module, _)) => panic!("converted: {module}"),
        Err(e) => e.to_string(),
    }
}

/// Deterministic values spread over `[-span, span]`, with exact halves among them.
fn values(n: usize, span: f64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let v = ((i * 7919) % 1000) as f64 / 500.0 - 1.0;
            if i % 3 == 0 {
                (v * span).round() + 0.5
            } else {
                v * span
            }
        })
        .collect()
}

/// The naive quantization of one value, in `float32` like the converter.
fn quantize(x: f64, scale: f64, zp: f64, lo: f64, hi: f64) -> f64 {
    let q = ((x as f32) / (scale as f32)).round_ties_even() as f64 + zp;
    q.clamp(lo, hi)
}

#[test]
fn quantize_linear_per_tensor_rounds_half_to_even_and_saturates() {
    let x = values(40, 300.0);
    let m = model(
        13,
        vec![
            constant(tensor("x", PType::Float, &[40], &x)),
            node("QuantizeLinear", &["x", "s", "z"], vec![]),
        ],
        vec![
            tensor("s", PType::Float, &[], &[1.0]),
            tensor("z", PType::Int8, &[], &[-3.0]),
        ],
        vec![],
    );
    let (dtype, shape, got) = folded(&m);
    assert_eq!((dtype.as_str(), shape.as_slice()), ("int8", &[40][..]));
    let want: Vec<f64> = x
        .iter()
        .map(|&v| quantize(v, 1.0, -3.0, -128.0, 127.0))
        .collect();
    assert_eq!(got, want);
    assert!(got.contains(&-128.0) && got.contains(&127.0));
}

#[test]
fn quantize_linear_blocked_and_dequantize_per_axis() {
    // x [5, 2] in blocks of 2 along axis 0: scales [3, 2] (the last block is partial).
    let x = values(10, 40.0);
    let s = [0.5, 0.25, 1.0, 2.0, 0.125, 4.0];
    let z = [3.0, 200.0, 0.0, 17.0, 128.0, 255.0];
    let m = model(
        21,
        vec![
            constant(tensor("x", PType::Float, &[5, 2], &x)),
            node(
                "QuantizeLinear",
                &["x", "s", "z"],
                vec![int_attr("axis", 0), int_attr("block_size", 2)],
            ),
        ],
        vec![
            tensor("s", PType::Float, &[3, 2], &s),
            tensor("z", PType::Uint8, &[3, 2], &z),
        ],
        vec![],
    );
    let (dtype, _, got) = folded(&m);
    assert_eq!(dtype, "uint8");
    let want: Vec<f64> = (0..10)
        .map(|i| {
            let p = (i / 2 / 2) * 2 + i % 2; // row i / 2 reads block row (i / 2) / 2
            quantize(x[i], s[p], z[p], 0.0, 255.0)
        })
        .collect();
    assert_eq!(got, want);

    // DequantizeLinear per axis 1 of an int16 [2, 3].
    let q = [-30000.0, 5.0, 32767.0, 0.0, -1.0, 1234.0];
    let (s, z) = ([0.5, 0.003, 2.0], [-7.0, 0.0, 100.0]);
    let m = model(
        13,
        vec![
            constant(tensor("q", PType::Int16, &[2, 3], &q)),
            node("DequantizeLinear", &["q", "s", "z"], vec![]),
        ],
        vec![
            tensor("s", PType::Float, &[3], &s),
            tensor("z", PType::Int16, &[3], &z),
        ],
        vec![],
    );
    let (dtype, _, got) = folded(&m);
    assert_eq!(dtype, "float32");
    let want: Vec<f64> = (0..6)
        .map(|i| ((q[i] - z[i % 3]) as f32 * s[i % 3] as f32) as f64)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn dynamic_quantize_linear_maps_the_range_with_zero_onto_uint8() {
    for (x, n) in [(values(30, 6.0), 30), (vec![0.5, 2.0, 7.25, 1.0], 4)] {
        let mut dql = node("DynamicQuantizeLinear", &["x"], vec![]);
        dql.output = vec!["y".into(), "ys".into(), "yz".into()];
        let m = model(
            11,
            vec![dql],
            vec![tensor("x", PType::Float, &[n as i64], &x)],
            vec![],
        );
        let (dtype, _, got) = folded(&m);
        assert_eq!(dtype, "uint8");
        let lo = x.iter().fold(0f64, |a, &b| a.min(b)) as f32;
        let hi = x.iter().fold(0f64, |a, &b| a.max(b)) as f32;
        let scale = (hi - lo) / 255.0;
        let zp = (-(lo / scale)).round_ties_even().clamp(0.0, 255.0) as f64;
        let want: Vec<f64> = x
            .iter()
            .map(|&v| quantize(v, scale as f64, zp, 0.0, 255.0))
            .collect();
        assert_eq!(got, want);
        assert_eq!(got.iter().cloned().fold(0.0, f64::max), 255.0);
    }
}

#[test]
fn output_types_follow_zero_point_then_output_dtype_then_uint8() {
    let x = || vec![input("x", PType::Float, &[2, 3])];
    let s = || tensor("s", PType::Float, &[], &[0.1]);
    let out_dtype = |m: &kiln_onnx::Model| {
        let (module, _) = from_onnx(m, &Default::default()).unwrap();
        let ty = module.main().unwrap().body().ty().unwrap();
        ty.as_tensor().unwrap().1.to_string()
    };
    let plain = model(
        13,
        vec![node("QuantizeLinear", &["x", "s"], vec![])],
        vec![s()],
        x(),
    );
    assert_eq!(out_dtype(&plain), "uint8");
    let attr = model(
        21,
        vec![node(
            "QuantizeLinear",
            &["x", "s"],
            vec![int_attr("output_dtype", PType::Int16 as i64)],
        )],
        vec![s()],
        x(),
    );
    assert_eq!(out_dtype(&attr), "int16");
    let zp = model(
        13,
        vec![node("QuantizeLinear", &["x", "s", "z"], vec![])],
        vec![s(), tensor("z", PType::Int8, &[], &[0.0])],
        x(),
    );
    assert_eq!(out_dtype(&zp), "int8");
    let dq = model(
        13,
        vec![node("DequantizeLinear", &["q", "s"], vec![])],
        vec![s()],
        vec![input("q", PType::Int32, &[4])],
    );
    assert_eq!(out_dtype(&dq), "float32");
}

#[test]
fn bad_quantization_attributes_and_parameters_are_named() {
    let x = || vec![input("x", PType::Float, &[2, 3])];
    let s = || tensor("s", PType::Float, &[], &[0.1]);
    let q = |attrs, init| {
        model(
            21,
            vec![node("QuantizeLinear", &["x", "s"], attrs)],
            init,
            x(),
        )
    };
    let msg = convert_error(&q(
        vec![int_attr("output_dtype", PType::String as i64)],
        vec![s()],
    ));
    assert!(
        msg.contains("output_dtype") && msg.contains("STRING"),
        "{msg}"
    );
    let msg = convert_error(&q(
        vec![int_attr("output_dtype", PType::Complex64 as i64)],
        vec![s()],
    ));
    assert!(msg.contains("COMPLEX64"), "{msg}");
    let msg = convert_error(&q(
        vec![int_attr("output_dtype", PType::Int32 as i64)],
        vec![s()],
    ));
    assert!(
        msg.contains("int32") && msg.contains("QuantizeLinear"),
        "{msg}"
    );
    let msg = convert_error(&q(vec![], vec![tensor("s", PType::Float, &[4], &[0.1; 4])]));
    assert!(msg.contains("`y_scale`") && msg.contains("[4]"), "{msg}");
    let msg = convert_error(&q(vec![int_attr("block_size", -2)], vec![s()]));
    assert!(msg.contains("block_size"), "{msg}");
    let msg = convert_error(&q(
        vec![int_attr("axis", 5)],
        vec![tensor("s", PType::Float, &[3], &[0.1; 3])],
    ));
    assert!(msg.contains("`axis`"), "{msg}");
    let msg = convert_error(&model(
        21,
        vec![node(
            "QuantizeLinear",
            &["x", "s", "z"],
            vec![int_attr("output_dtype", PType::Int8 as i64)],
        )],
        vec![s(), tensor("z", PType::Uint8, &[], &[0.0])],
        x(),
    ));
    assert!(
        msg.contains("output_dtype") && msg.contains("y_zero_point"),
        "{msg}"
    );
    // ConvInteger with a matrix for a weight; QLinearMatMul with a scale per row of `b`.
    let xq = || vec![input("x", PType::Uint8, &[1, 2, 4, 4])];
    let msg = convert_error(&model(
        10,
        vec![node("ConvInteger", &["x", "w"], vec![])],
        vec![tensor("w", PType::Uint8, &[3, 2], &[1.0; 6])],
        xq(),
    ));
    assert!(msg.contains("`w`") && msg.contains("[3, 2]"), "{msg}");
    let one = |name: &str, ty| tensor(name, ty, &[], &[1.0]);
    let msg = convert_error(&model(
        10,
        vec![node(
            "QLinearMatMul",
            &["x", "sa", "za", "b", "sb", "zb", "sy", "zy"],
            vec![],
        )],
        vec![
            one("sa", PType::Float),
            one("za", PType::Uint8),
            tensor("b", PType::Uint8, &[4, 3], &[1.0; 12]),
            tensor("sb", PType::Float, &[4], &[1.0; 4]),
            one("zb", PType::Uint8),
            one("sy", PType::Float),
            one("zy", PType::Uint8),
        ],
        xq(),
    ));
    assert!(msg.contains("`b_scale`") && msg.contains("[4]"), "{msg}");
}
