"""The unsupported-operator error looks inside subgraphs: nodes in If branches and Loop bodies
(at any depth) are counted and the first of each op type is named by its path from the top
level; op types the converter supports (LSTM) are not listed, wherever they are."""

import pytest

import kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

F = TensorProto.FLOAT


def _branch(name, nodes, out):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, F, None)])


def _vad_model():
    """`If 'vad_if'` with an LSTM and an ImageDecoder (unsupported) in its then branch, and a Loop
    whose body holds an If whose else branch holds another ImageDecoder."""
    lstm = helper.make_node("LSTM", ["x", "W", "R"], ["h"], name="lstm_1", hidden_size=4)
    det = helper.make_node("ImageDecoder", ["x"], ["d"], name="det_1")
    then_branch = _branch("then", [lstm, det], "d")
    else_branch = _branch("else", [helper.make_node("Relu", ["x"], ["e"], name="relu_e")], "e")
    vad_if = helper.make_node("If", ["cond"], ["v"], name="vad_if",
                              then_branch=then_branch, else_branch=else_branch)

    gate = helper.make_node(
        "If", ["cond"], ["g"], name="gate",
        then_branch=_branch("gate_then", [helper.make_node("Relu", ["x"], ["gt"])], "gt"),
        else_branch=_branch("gate_else", [helper.make_node("ImageDecoder", ["x"], ["ge"], name="det_2")],
                            "ge"))
    body = helper.make_graph(
        [gate, helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("g", F, None)])
    loop = helper.make_node("Loop", ["trip", "cond"], ["y"], name="steps", body=body)

    graph = helper.make_graph(
        [vad_if, loop],
        "vad",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("trip", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", F, [2, 3, 4]),
         helper.make_tensor_value_info("W", F, [1, 16, 4]),
         helper.make_tensor_value_info("R", F, [1, 16, 4])],
        [helper.make_tensor_value_info("v", F, None), helper.make_tensor_value_info("y", F, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def test_unsupported_ops_inside_subgraphs_are_listed_with_their_path():
    with pytest.raises(ValueError) as info:
        kiln.onnx.compile(_vad_model())
    msg = str(info.value)
    assert "1 unsupported operator type(s) in 2 node(s)" in msg, msg
    rows = {line.split()[0]: line for line in msg.splitlines()[1:]}
    assert set(rows) == {"ImageDecoder"}, msg
    assert "2 node(s), first: If 'vad_if' / then_branch / node 'det_1'" in rows["ImageDecoder"], msg
    # LSTM, If and Loop are supported: not listed, nor are Relu and Identity.
    for op in ("LSTM", "Relu", "Identity", "Loop "):
        assert op not in msg, msg


def test_nested_subgraph_path_chains():
    model = _vad_model()
    # Without the first If, the first ImageDecoder is the one inside the Loop body's If.
    del model.graph.node[0]
    model.graph.output.pop(0)
    with pytest.raises(ValueError) as info:
        kiln.onnx.from_onnx(model)
    msg = str(info.value)
    assert "1 unsupported operator type(s) in 1 node(s)" in msg, msg
    assert "first: Loop 'steps' / body / If 'gate' / else_branch / node 'det_2'" in msg, msg
