"""Kiln's virtual machine: models whose control flow is decided at run time (an If on a
run-time condition, a Loop with a run-time trip count or condition) compile to ONE library that
runs every decision; each case against onnxruntime on fresh random inputs, from a library
exported and loaded again, plus the errors bad inputs and unsupported programs get."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from test_onnx_if import H, _vad  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _vm(m, shapes, tmp_path):
    """`m` compiled (it must need the VM), exported, loaded again; its executor wrapped."""
    lib = kiln.onnx.compile(m, shapes, target="llvm")
    assert lib.kind == "VMFactory"
    path = tmp_path / "model.so"
    lib.export_library(str(path))
    loaded = kiln.load_module(str(path))
    exe = loaded["default"](kiln.cpu())
    assert exe.kind == "VirtualMachine"
    return GraphModule(exe)


def _run(gm, feeds, n_out):
    for k, v in feeds.items():
        gm.set_input(k, v)
    gm.run()
    return [gm.get_output(i).numpy() for i in range(n_out)]


def _ort(m):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


def test_sample_rate_if_with_lstm_branches_from_one_library(tmp_path):
    # The sample rate picks one of two conv + LSTM branches at run time (each with a nested If
    # of its own); the state goes round as a streaming detector runs, switching rates.
    m = _vad()
    gm = _vm(m, {"x": (1, 1, 256), "state": (2, 1, H)}, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(5)
    state = want_state = np.zeros((2, 1, H), np.float32)
    for sr in (16000, 8000, 8000, 16000):
        feeds = {"x": rng.standard_normal((1, 1, 256)).astype(np.float32),
                 "sr": np.array([sr], np.int64)}
        want_prob, want_state = sess.run(None, {**feeds, "state": want_state})
        prob, state = _run(gm, {**feeds, "state": state}, 2)
        np.testing.assert_allclose(prob, want_prob, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-5)


def _branch(name, nodes, out, shape):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, F, shape)])


def test_nested_run_time_ifs_read_enclosing_values(tmp_path):
    # outer: sum(x) > 0; inner (in the then branch): max(x) > 1. Branches read x, w and values
    # computed before the If; the result feeds nodes after it.
    inner_then = _branch("it", [helper.make_node("MatMul", ["x", "w"], ["it_y"])], "it_y", [2, 3])
    inner_else = _branch("ie", [helper.make_node("Sub", ["xw", "x"], ["ie_y"])], "ie_y", [2, 3])
    outer_then = _branch("ot", [
        helper.make_node("ReduceMax", ["x"], ["mx"], keepdims=0),
        helper.make_node("Greater", ["mx", "one"], ["c2"]),
        helper.make_node("If", ["c2"], ["ot_y"], then_branch=inner_then, else_branch=inner_else,
                         name="inner_if"),
    ], "ot_y", [2, 3])
    outer_else = _branch("oe", [helper.make_node("Tanh", ["xw"], ["oe_y"])], "oe_y", [2, 3])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c1"]),
        helper.make_node("If", ["c1"], ["r"], then_branch=outer_then, else_branch=outer_else,
                         name="outer_if"),
        helper.make_node("Mul", ["r", "xw"], ["y"]),
    ]
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(rng.standard_normal((3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(1, np.float32), "one")]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
               [helper.make_tensor_value_info("y", F, [2, 3])], inits)
    gm = _vm(m, {"x": (2, 3)}, tmp_path)
    sess = _ort(m)
    taken = set()
    for x in (np.full((2, 3), 2.0), np.full((2, 3), 0.5), -np.ones((2, 3)),
              rng.standard_normal((2, 3)) + 1, rng.standard_normal((2, 3)) - 1):
        x = (x + rng.uniform(-0.1, 0.1, (2, 3))).astype(np.float32)
        taken.add((x.sum() > 0, x.sum() > 0 and x.max() > 1))
        (got,) = _run(gm, {"x": x}, 1)
        (want,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert len(taken) == 3  # every branch ran at least once


def _counting_loop():
    # acc <- tanh(acc @ w + x * i) while i < M and i < 3 (the body's condition), each acc also a
    # scan output; M comes at run time.
    body = helper.make_graph([
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("MatMul", ["acc_in", "w"], ["mm"]),
        helper.make_node("Mul", ["x", "fi"], ["xi"]),
        helper.make_node("Add", ["mm", "xi"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["acc_out"]),
        helper.make_node("Less", ["i", "three"], ["cond_out"]),
        helper.make_node("Identity", ["acc_in"], ["scan_out"]),
    ], "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("acc_in", F, [2, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", F, [2, 4]),
         helper.make_tensor_value_info("scan_out", F, [2, 4])])
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32) * 0.5, "w"),
             numpy_helper.from_array(np.array(3, np.int64), "three"),
             numpy_helper.from_array(np.array(True), "go")]
    return _model([helper.make_node("Loop", ["trip", "go", "acc0"], ["acc", "accs"], body=body)],
                  [helper.make_tensor_value_info("x", F, [2, 4]),
                   helper.make_tensor_value_info("acc0", F, [2, 4]),
                   helper.make_tensor_value_info("trip", TensorProto.INT64, [])],
                  [helper.make_tensor_value_info("acc", F, [2, 4]),
                   helper.make_tensor_value_info("accs", F, [None, 2, 4])], inits, opset=16)


def test_loop_with_a_run_time_trip_count(tmp_path):
    m = _counting_loop()
    gm = _vm(m, {"x": (2, 4), "acc0": (2, 4)}, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(8)
    # Stops by its trip count (0, 1, 2 iterations), then by its condition (4 iterations).
    for trip, iters in ((2, 2), (0, 0), (10, 4), (1, 1)):
        feeds = {"x": rng.standard_normal((2, 4)).astype(np.float32),
                 "acc0": rng.standard_normal((2, 4)).astype(np.float32),
                 "trip": np.array(trip, np.int64)}
        got = _run(gm, feeds, 2)
        want = sess.run(None, feeds)
        assert got[1].shape == (iters, 2, 4) == want[1].shape
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert gm.get_output_info()[0][1] == (-1, 2, 4)  # known at run time


def test_while_loop_with_a_data_dependent_condition(tmp_path):
    # No trip count: v <- v * 1.5 + 0.1 while sum(v) < limit; the condition is computed from
    # the data in the body, and before the loop from the inputs.
    body = helper.make_graph([
        helper.make_node("Mul", ["v_in", "k"], ["vk"]),
        helper.make_node("Add", ["vk", "b"], ["v_out"]),
        helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
        helper.make_node("Less", ["s", "limit"], ["cond_out"]),
    ], "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("v_in", F, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [3])])
    inits = [numpy_helper.from_array(np.array(1.5, np.float32), "k"),
             numpy_helper.from_array(np.array(0.1, np.float32), "b")]
    nodes = [helper.make_node("ReduceSum", ["v0"], ["s0"], keepdims=0),
             helper.make_node("Less", ["s0", "limit"], ["c0"]),
             helper.make_node("Loop", ["", "c0", "v0"], ["v"], body=body)]
    m = _model(nodes, [helper.make_tensor_value_info("v0", F, [3]),
                       helper.make_tensor_value_info("limit", F, [])],
               [helper.make_tensor_value_info("v", F, [3])], inits)
    gm = _vm(m, {"v0": (3,), "limit": ()}, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(2)
    for limit in (0.0, 5.0, 1000.0):
        feeds = {"v0": rng.uniform(0.1, 1.0, 3).astype(np.float32),
                 "limit": np.array(limit, np.float32)}
        (got,) = _run(gm, feeds, 1)
        (want,) = sess.run(None, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_bad_inputs_are_named_and_the_machine_stays_usable(tmp_path):
    m = _vad()
    gm = _vm(m, {"x": (1, 1, 256), "state": (2, 1, H)}, tmp_path)
    rng = np.random.default_rng(1)
    good = {"x": rng.standard_normal((1, 1, 256)).astype(np.float32),
            "sr": np.array([8000], np.int64), "state": np.zeros((2, 1, H), np.float32)}
    with pytest.raises(TypeError, match=r'"sr".*int64.*int32'):
        gm.set_input("sr", np.array([8000], np.int32))
    with pytest.raises(ValueError, match=r'"x".*dimension 2 must be 256 but is 255'):
        gm.set_input("x", np.zeros((1, 1, 255), np.float32))
    with pytest.raises(ValueError, match=r'"state".*rank 3'):
        gm.set_input("state", np.zeros((2, H), np.float32))
    with pytest.raises(KeyError, match=r'no input named "y".*x, sr, state'):
        gm.set_input("y", good["x"])
    with pytest.raises(RuntimeError, match=r"has not run"):
        gm.get_output(0)
    got = _run(gm, good, 2)
    want = _ort(m).run(None, good)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_branches_of_different_shapes_are_refused():
    then = _branch("t", [helper.make_node("Identity", ["x"], ["t_y"])], "t_y", [2, 3])
    other = _branch("e", [helper.make_node("Transpose", ["x"], ["e_y"])], "e_y", [3, 2])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other,
                              name="pick")]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
               [helper.make_tensor_value_info("y", F, [None, None])],
               [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    with pytest.raises(ValueError, match=r"pick.*then_branch but .* in else_branch"):
        kiln.onnx.compile(m, {"x": (2, 3)}, target="llvm")


def test_scan_output_of_a_run_time_loop_feeding_a_node_is_refused():
    m = _counting_loop()
    m.graph.node.append(helper.make_node("Relu", ["accs"], ["r"], name="after_loop"))
    m.graph.output.append(helper.make_tensor_value_info("r", F, None))
    with pytest.raises(ValueError, match=r"after_loop.*'accs'.*known only at run time"):
        kiln.onnx.compile(m, {"x": (2, 4), "acc0": (2, 4)}, target="llvm")
