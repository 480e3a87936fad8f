"""If whose condition is known at compile time (a constant, or a run-time input frozen at
import): the taken branch is compiled in place. A speech-activity-style model (a sample-rate If
choosing between two conv + LSTM branches, nested Ifs, state in and out, branches reading
values of the enclosing scope) against onnxruntime on fresh random inputs; a run-time
condition is refused with an error naming the input to freeze."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

H = 16


def _branch(name, rng, kernel, stride):
    """A branch: Conv1d of the enclosing scope's `x` then an LSTM carrying `state` in and out;
    a nested If on a constant picks the output scaling."""
    w = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (8, 1, kernel)).astype(np.float32), f"{name}_cw")
    lw = numpy_helper.from_array(rng.uniform(-0.4, 0.4, (1, 4 * H, 8)).astype(np.float32), f"{name}_W")
    lr = numpy_helper.from_array(rng.uniform(-0.4, 0.4, (1, 4 * H, H)).astype(np.float32), f"{name}_R")
    lb = numpy_helper.from_array(rng.uniform(-0.2, 0.2, (1, 8 * H)).astype(np.float32), f"{name}_B")
    flag = numpy_helper.from_array(np.array(name == "b16", dtype=bool), f"{name}_flag")
    scaled = helper.make_graph(
        [helper.make_node("Mul", [f"{name}_yh", "gain"], [f"{name}_scaled"])], f"{name}_then", [],
        [helper.make_tensor_value_info(f"{name}_scaled", TensorProto.FLOAT, [None] * 3)])
    plain = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_yh"], [f"{name}_plain"])], f"{name}_else", [],
        [helper.make_tensor_value_info(f"{name}_plain", TensorProto.FLOAT, [None] * 3)])
    nodes = [
        helper.make_node("Conv", ["x", f"{name}_cw"], [f"{name}_c"], strides=[stride]),
        helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"]),
        helper.make_node("Transpose", [f"{name}_r"], [f"{name}_seq"], perm=[2, 0, 1]),
        helper.make_node("Split", ["state"], [f"{name}_h0", f"{name}_c0"], axis=0, num_outputs=2),
        helper.make_node("LSTM", [f"{name}_seq", f"{name}_W", f"{name}_R", f"{name}_B", "",
                                  f"{name}_h0", f"{name}_c0"],
                         ["", f"{name}_yh", f"{name}_yc"], hidden_size=H),
        helper.make_node("If", [f"{name}_flag"], [f"{name}_out"], then_branch=scaled,
                         else_branch=plain, name=f"{name}_gain_if"),
        helper.make_node("Concat", [f"{name}_yh", f"{name}_yc"], [f"{name}_state"], axis=0),
    ]
    return helper.make_graph(nodes, name, [], [
        helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [None] * 3),
        helper.make_tensor_value_info(f"{name}_state", TensorProto.FLOAT, [None] * 3)],
        [w, lw, lr, lb, flag])


def _vad():
    rng = np.random.default_rng(7)
    gain = numpy_helper.from_array(np.array(1.5, np.float32), "gain")
    nodes = [
        helper.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["prob_raw", "state_out"],
                         then_branch=_branch("b16", rng, 8, 4),
                         else_branch=_branch("b8", rng, 4, 2), name="sample_rate_if"),
        helper.make_node("Sigmoid", ["prob_raw"], ["prob"]),
    ]
    sr16k = numpy_helper.from_array(np.array([16000], np.int64), "sr16k")
    graph = helper.make_graph(nodes, "vad", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 256]),
        helper.make_tensor_value_info("sr", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, H])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [None] * 3),
         helper.make_tensor_value_info("state_out", TensorProto.FLOAT, [None] * 3)], [sr16k, gain])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("sr", [16000, 8000])
def test_sample_rate_if_with_lstm_branches(sr):
    m = _vad()
    rng = np.random.default_rng(sr)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    srv = np.array([sr], np.int64)
    lib = kiln.onnx.compile(m, {"x": (1, 1, 256), "state": (2, 1, H)},
                            frozen_inputs={"sr": srv})
    gm = GraphModule(lib["default"](kiln.cpu()))
    state = np.zeros((2, 1, H), np.float32)
    want_state = state
    for _ in range(3):  # the state goes round, as a streaming detector runs
        x = rng.standard_normal((1, 1, 256)).astype(np.float32)
        want_prob, want_state = sess.run(None, {"x": x, "sr": srv, "state": want_state})
        gm.set_input("x", x)
        gm.set_input("state", state)
        gm.run()
        prob, state = gm.get_output(0).numpy(), gm.get_output(1).numpy()
        np.testing.assert_allclose(prob, want_prob, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-5)


def test_unsupported_op_inside_a_branch_is_named_with_its_path():
    inner = helper.make_graph([helper.make_node("ImageDecoder", ["m"], ["d"], name="det_node")], "t", [],
                              [helper.make_tensor_value_info("d", TensorProto.FLOAT, [])])
    other = helper.make_graph([helper.make_node("ReduceSum", ["m"], ["s"], keepdims=0)], "e", [],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])])
    c = numpy_helper.from_array(np.array(True), "c")
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=inner,
                                                else_branch=other, name="pick")], "g",
                              [helper.make_tensor_value_info("m", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [c])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ValueError, match=r"ImageDecoder"):
        kiln.onnx.compile(m, {"m": (3, 3)})


def _run_both(m, feeds, frozen=None):
    lib = kiln.onnx.compile(m, {k: v.shape for k, v in feeds.items() if k not in (frozen or {})},
                            frozen_inputs=frozen or {})
    gm = GraphModule(lib["default"](kiln.cpu()))
    for k, v in feeds.items():
        if k not in (frozen or {}):
            gm.set_input(k, v)
    gm.run()
    got = [gm.get_output(i).numpy() for i in range(len(m.graph.output))]
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_loop_unrolled_with_carried_and_scan_outputs():
    # acc <- tanh(acc @ w + x * i), w and x read from the enclosing scope; each acc is also a
    # scan output; the loop stops early when its condition (i < 3) folds to false.
    body = helper.make_graph([
        helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["acc_in", "w"], ["mm"]),
        helper.make_node("Mul", ["x", "fi"], ["xi"]),
        helper.make_node("Add", ["mm", "xi"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["acc_out"]),
        helper.make_node("Less", ["i", "three"], ["cond_out"]),
        helper.make_node("Identity", ["acc_out"], ["scan_out"]),
    ], "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [2, 4])])
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32) * 0.5, "w"),
             numpy_helper.from_array(np.array(3, np.int64), "three"),
             numpy_helper.from_array(np.array(True), "go")]
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trip", "go", "acc0"], ["acc", "accs"], body=body)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("acc0", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("trip", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("accs", TensorProto.FLOAT, [None, 2, 4])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    for trip in (2, 10):  # stops by its trip count, then by its condition
        feeds = {"x": rng.standard_normal((2, 4)).astype(np.float32),
                 "acc0": rng.standard_normal((2, 4)).astype(np.float32),
                 "trip": np.array(trip, np.int64)}
        _run_both(m, feeds, frozen={"trip": feeds["trip"]})


@pytest.mark.parametrize("in_dir,in_axis,out_dir,out_axis", [(0, 0, 0, 0), (1, 1, 0, 1),
                                                              (0, 1, 1, 0), (1, 0, 1, -1)])
def test_scan_directions_and_axes(in_dir, in_axis, out_dir, out_axis):
    # A running sum state plus a per-step output, over a [5, 3] or [3, 5] sequence.
    body = helper.make_graph([
        helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
        helper.make_node("Mul", ["s_out", "x_t"], ["y_t"]),
    ], "body", [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [3]),
                helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [3])])
    x_shape = [5, 3] if in_axis == 0 else [3, 5]
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                            scan_input_directions=[in_dir], scan_input_axes=[in_axis],
                            scan_output_directions=[out_dir], scan_output_axes=[out_axis])
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("s0", TensorProto.FLOAT, [3]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    rng = np.random.default_rng(in_dir * 4 + in_axis * 2 + out_dir)
    _run_both(m, {"s0": rng.standard_normal(3).astype(np.float32),
                  "x": rng.standard_normal(x_shape).astype(np.float32)})
