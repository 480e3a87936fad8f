//! The unsupported-operator report on models built with the prost types: nodes inside `If`
//! branches, `Loop` bodies and `GRAPHS` attributes are listed with their path.

use crate::proto::{
    attribute_proto::AttributeType, tensor_proto, type_proto, AttributeProto, GraphProto,
    ModelProto, NodeProto, OperatorSetIdProto, TypeProto, ValueInfoProto,
};
use crate::{from_proto, Model, OnnxError};

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// `n` with the `GRAPH` attributes `attrs`.
fn with_graphs(mut n: NodeProto, attrs: Vec<(&str, GraphProto)>) -> NodeProto {
    for (name, g) in attrs {
        n.attribute.push(AttributeProto {
            name: Some(name.into()),
            r#type: Some(AttributeType::Graph as i32),
            g: Some(g),
            ..Default::default()
        });
    }
    n
}

fn value(name: &str, ty: tensor_proto::DataType) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(ty as i32),
                shape: None,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A subgraph (branch or body) of `nodes`; its values may come from the outer graph.
fn subgraph(name: &str, nodes: Vec<NodeProto>, output: &str) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        node: nodes,
        output: vec![value(output, tensor_proto::DataType::Float)],
        ..Default::default()
    }
}

/// A model (opset 14) of `nodes` reading `cond` (bool) and `x` (float) and writing `y`.
fn model(nodes: Vec<NodeProto>) -> Model {
    let graph = GraphProto {
        name: Some("main".into()),
        node: nodes,
        input: vec![
            value("cond", tensor_proto::DataType::Bool),
            value("x", tensor_proto::DataType::Float),
        ],
        output: vec![value("y", tensor_proto::DataType::Float)],
        ..Default::default()
    };
    let m = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(14),
        }],
        graph: Some(graph),
        ..Default::default()
    };
    from_proto(&m, "<test>".into()).unwrap()
}

/// `If 'vad_if'` whose branches hold two LSTMs (one unnamed) among Relus.
fn if_with_lstm_branches() -> Model {
    let then_branch = subgraph(
        "then",
        vec![
            node("LSTM", "lstm_1", &["a"], &["t1"]),
            node("Relu", "relu_t", &["t1"], &["t"]),
        ],
        "t",
    );
    let else_branch = subgraph(
        "else",
        vec![
            node("Relu", "relu_e", &["a"], &["e1"]),
            node("LSTM", "", &["e1"], &["e"]),
        ],
        "e",
    );
    model(vec![
        node("Relu", "pre", &["x"], &["a"]),
        with_graphs(
            node("If", "vad_if", &["cond"], &["y"]),
            vec![("then_branch", then_branch), ("else_branch", else_branch)],
        ),
    ])
}

/// `(op type, count, first node)` of each listed op, and the message.
fn report(m: &Model, supported: &[&str]) -> (Vec<(String, usize, String)>, String) {
    let err = m
        .check_supported_ops(supported.iter().copied())
        .unwrap_err();
    let OnnxError::UnsupportedOps(r) = &err else {
        panic!("expected UnsupportedOps, got {err}")
    };
    let ops = r
        .ops
        .iter()
        .map(|o| (o.op_type.clone(), o.count, o.first_node.clone()))
        .collect();
    (ops, err.to_string())
}

fn row(op: &str, count: usize, first: &str) -> (String, usize, String) {
    (op.to_string(), count, first.to_string())
}

#[test]
fn lstm_in_if_branches_is_listed_with_its_path() {
    let m = if_with_lstm_branches();
    let (ops, msg) = report(&m, &["Relu"]);
    assert_eq!(
        ops,
        [
            row("If", 1, "'vad_if'"),
            row("LSTM", 2, "If 'vad_if' / then_branch / node 'lstm_1'"),
        ]
    );
    assert_eq!(
        msg,
        "'<test>': 2 unsupported operator type(s) in 3 node(s) (opset 14):\n\
         \x20 If       1 node(s), first: 'vad_if'\n\
         \x20 LSTM     2 node(s), first: If 'vad_if' / then_branch / node 'lstm_1'"
    );
    // A supported If is not listed, but its branches are still searched.
    let (ops, _) = report(&m, &["Relu", "If"]);
    assert_eq!(
        ops,
        [row("LSTM", 2, "If 'vad_if' / then_branch / node 'lstm_1'")]
    );
    m.check_supported_ops(["Relu", "If", "LSTM"]).unwrap();
}

#[test]
fn unnamed_nodes_are_given_by_index() {
    // The If loses its name and the then branch's LSTM becomes a Relu: the first LSTM left is
    // the else branch's unnamed second node.
    let mut m = if_with_lstm_branches();
    m.graph.nodes[1].name.clear();
    if let Some((_, crate::AttrValue::Graph(g))) = m.graph.nodes[1].attributes.first_mut() {
        g.node[0].op_type = Some("Relu".into());
    }
    let (ops, _) = report(&m, &["Relu"]);
    assert_eq!(
        ops,
        [
            row("If", 1, "<unnamed If producing 'y'>"),
            row("LSTM", 1, "If #1 / else_branch / node #1"),
        ]
    );
}

#[test]
fn nested_if_inside_loop_body_chains_the_path() {
    let inner = with_graphs(
        node("If", "b", &["cond"], &["b_out"]),
        vec![
            (
                "then_branch",
                subgraph("b_then", vec![node("LSTM", "c", &["x"], &["c"])], "c"),
            ),
            (
                "else_branch",
                subgraph("b_else", vec![node("Relu", "d", &["x"], &["d"])], "d"),
            ),
        ],
    );
    let outer_if = with_graphs(
        node("If", "a", &["cond"], &["a_out"]),
        vec![
            (
                "then_branch",
                subgraph("a_then", vec![node("Relu", "r", &["x"], &["r"])], "r"),
            ),
            ("else_branch", subgraph("a_else", vec![inner], "b_out")),
        ],
    );
    let body = subgraph("body", vec![outer_if], "a_out");
    let m = model(vec![with_graphs(
        node("Loop", "outer", &["", "cond", "x"], &["y"]),
        vec![("body", body)],
    )]);

    let (ops, msg) = report(&m, &["Relu", "Loop"]);
    assert_eq!(
        ops,
        [
            row("If", 2, "Loop 'outer' / body / node 'a'"),
            row(
                "LSTM",
                1,
                "Loop 'outer' / body / If 'a' / else_branch / If 'b' / then_branch / node 'c'"
            ),
        ]
    );
    assert!(
        msg.contains("2 unsupported operator type(s) in 3 node(s)"),
        "{msg}"
    );

    // With the converter's own table, LSTM, If and Loop are all supported: nothing is listed.
    let supported = crate::supported_ops();
    assert!(["LSTM", "If", "Loop"]
        .iter()
        .all(|op| supported.contains(op)));
    assert!(m.check_supported_ops(supported.iter().copied()).is_ok());
}

#[test]
fn graphs_attributes_and_other_domains_are_searched() {
    let mut branches = AttributeProto {
        name: Some("branches".into()),
        r#type: Some(AttributeType::Graphs as i32),
        ..Default::default()
    };
    branches.graphs = vec![
        subgraph("g0", vec![node("Relu", "r0", &["x"], &["o0"])], "o0"),
        subgraph(
            "g1",
            vec![
                node("Relu", "r1", &["x"], &["o1"]),
                NodeProto {
                    domain: Some("ai.onnx".into()),
                    ..node("LSTM", "", &["o1"], &["o2"])
                },
            ],
            "o2",
        ),
    ];
    let mut switch = node("Switch", "", &["cond", "x"], &["y"]);
    switch.domain = Some("com.example".into());
    switch.attribute.push(branches);
    let m = model(vec![switch]);
    let (ops, _) = report(&m, &["Relu", "com.example.Switch"]);
    assert_eq!(
        ops,
        [row(
            "LSTM",
            1,
            "com.example.Switch #0 / branches[1] / node #1"
        )]
    );
    m.check_supported_ops(["Relu", "com.example.Switch", "LSTM"])
        .unwrap();
}
