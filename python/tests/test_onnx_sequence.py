"""Sequences known at compile time (tuples of tensors): SplitToSequence (sizes, a chunk size,
keepdims), SequenceErase, SequenceInsert, SequenceAt (negative positions), SequenceLength,
SequenceConstruct, SequenceEmpty and ConcatFromSequence (with and without a new axis),
against onnxruntime on fresh random inputs."""

import numpy as np
import pytest

from onnx_run import run_kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _const(name, value):
    return numpy_helper.from_array(np.array(value, np.int64), name)


@pytest.mark.parametrize("split,new_axis", [([2, 3, 1], 0), (4, 1), (None, 0)])
def test_sequence_pipeline(split, new_axis):
    rng = np.random.default_rng(7 + new_axis)
    x = rng.standard_normal((3, 6, 2)).astype(np.float32)
    y = rng.standard_normal((3, 2, 2)).astype(np.float32)
    inits = [_const("minus1", -1), _const("zero", 0), _const("one", 1)]
    split_in = []
    if split is not None:
        inits.append(_const("split", split))
        split_in = ["split"]
    nodes = [
        helper.make_node("SplitToSequence", ["x", *split_in], ["s1"], axis=1),
        helper.make_node("SequenceErase", ["s1", "minus1"], ["s2"]),
        helper.make_node("SequenceInsert", ["s2", "y", "zero"], ["s3"]),
        helper.make_node("SequenceAt", ["s3", "one"], ["at"]),
        helper.make_node("SequenceLength", ["s3"], ["n"]),
        helper.make_node("SequenceEmpty", [], ["e"]),
        helper.make_node("SequenceInsert", ["e", "y"], ["e1"]),
        helper.make_node("SequenceConstruct", ["y", "y"], ["c"]),
        helper.make_node("ConcatFromSequence", ["c"], ["cc"], axis=0, new_axis=1),
        helper.make_node("SequenceAt", ["e1", "zero"], ["e_at"]),
    ]
    if new_axis:
        # Stacking needs equal shapes: the chunks of size 4 are 4 and 2 wide, so stack the
        # constructed pair instead.
        nodes.append(helper.make_node("ConcatFromSequence", ["c"], ["cat"], axis=-1, new_axis=1))
    else:
        nodes.append(helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=1))
    outs = ["at", "n", "cc", "e_at", "cat"]
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
        helper.make_tensor_value_info("y", TensorProto.FLOAT, y.shape)],
        [helper.make_tensor_value_info(o, TensorProto.INT64 if o == "n" else TensorProto.FLOAT, None)
         for o in outs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    feeds = {"x": x, "y": y}
    got = run_kiln(m, feeds)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for name, g, w in zip(outs, got, want):
        assert g.shape == w.shape, name
        np.testing.assert_array_equal(g, w, err_msg=name)
