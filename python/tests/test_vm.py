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


def _vm(m, shapes, tmp_path, dims=None):
    """`m` compiled (it must need the VM), exported, loaded again; its executor wrapped."""
    lib = kiln.onnx.compile(m, shapes, target="llvm", dims=dims)
    assert lib.kind == "VMFactory"
    path = tmp_path / "model.so"
    lib.export_library(str(path))
    loaded = kiln.load_module(str(path))
    exe = loaded["default"](kiln.cpu())
    assert exe.kind == "VirtualMachine"
    return GraphModule(exe)


def _poison(gm, n_out):
    """Fills the output tensors of the last run (which the next run of the same code writes
    again) with NaN, or the largest integer, so an element left unwritten is caught."""
    for i in range(n_out):
        try:
            t = gm.get_output(i)
        except RuntimeError:
            return  # no run yet
        a = t.numpy()
        fill = np.nan if a.dtype.kind == "f" else np.iinfo(a.dtype).max if a.dtype.kind in "iu" else 1
        t.copyfrom(np.full(a.shape, fill, a.dtype))


def _run(gm, feeds, n_out):
    for k, v in feeds.items():
        gm.set_input(k, v)
    _poison(gm, n_out)
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


def test_loop_carrying_a_value_whose_extent_changes(tmp_path):
    # Each iteration appends x[i] (a slice by the iteration number) to the carried vector, so
    # its length is known only at run time; a scan output of one fixed extent (its sum, as
    # [1]) and one of the same extent every iteration (the slice plus the vector's last
    # element) are stacked.
    body = helper.make_graph([
        helper.make_node("Add", ["i", "one"], ["end"]),
        helper.make_node("Unsqueeze", ["i", "zero"], ["start1"]),
        helper.make_node("Unsqueeze", ["end", "zero"], ["end1"]),
        helper.make_node("Slice", ["x", "start1", "end1"], ["xi"]),
        helper.make_node("Concat", ["y_in", "xi"], ["y_out"], axis=0),
        helper.make_node("ReduceSum", ["y_out"], ["total"], keepdims=1),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ], "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("y_in", F, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", F, [None]),
         helper.make_tensor_value_info("total", F, [1])])
    inits = [numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array(True), "go")]
    m = _model([helper.make_node("Loop", ["trip", "go", "y0"], ["y", "totals"], body=body)],
               [helper.make_tensor_value_info("x", F, [6]),
                helper.make_tensor_value_info("y0", F, [1]),
                helper.make_tensor_value_info("trip", TensorProto.INT64, [])],
               [helper.make_tensor_value_info("y", F, [None]),
                helper.make_tensor_value_info("totals", F, [None, 1])], inits, opset=16)
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(12)
    for trip in (3, 0, 6, 1):
        feeds = {"x": rng.standard_normal(6).astype(np.float32),
                 "y0": rng.standard_normal(1).astype(np.float32),
                 "trip": np.array(trip, np.int64)}
        got = _run(gm, feeds, 2)
        want = sess.run(None, feeds)
        assert got[0].shape == (1 + trip,) and got[1].shape == want[1].shape, trip
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


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


def _growth_loop(name, factor):
    """A Loop body v <- v * factor while sum(v) < limit (a condition decided at run time)."""
    return helper.make_graph([
        helper.make_node("Mul", ["v_in", factor], ["v_out"]),
        helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
        helper.make_node("Less", ["s", "limit"], ["cond_out"]),
    ], name, [helper.make_tensor_value_info("i", TensorProto.INT64, []),
              helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
              helper.make_tensor_value_info("v_in", F, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [3])])


def test_branches_sharing_a_constant_each_compute_it_on_their_own_path(tmp_path):
    # Both branches of a run-time If run a run-time Loop whose trip count is the same outer
    # constant, which each branch puts into a register; the first run takes the branch
    # compiled second, and a later loop of no iteration is followed by nodes reading the
    # constant again: no branch and no loop body may leave the other paths a register it
    # alone writes.
    def branch(name, factor):
        return helper.make_graph(
            [helper.make_node("Loop", ["trip", "go", "v0"], [name + "_v"],
                              body=_growth_loop(name + "_body", factor))],
            name, [], [helper.make_tensor_value_info(name + "_v", F, [3])])
    inits = [numpy_helper.from_array(np.array(4, np.int64), "trip"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array(3.0, np.float32), "three")]
    nodes = [helper.make_node("ReduceSum", ["v0"], ["s0"], keepdims=0),
             helper.make_node("Greater", ["s0", "zero_limit"], ["pos"]),
             helper.make_node("Less", ["s0", "limit"], ["go"]),
             helper.make_node("If", ["pos"], ["w"], then_branch=branch("t", "two"),
                              else_branch=branch("e", "three")),
             helper.make_node("Loop", ["trip", "go", "w"], ["y"],
                              body=_growth_loop("after", "two"))]
    m = _model(nodes, [helper.make_tensor_value_info("v0", F, [3]),
                       helper.make_tensor_value_info("limit", F, []),
                       helper.make_tensor_value_info("zero_limit", F, [])],
               [helper.make_tensor_value_info("y", F, [3])], inits)
    gm = _vm(m, {"v0": (3,), "limit": (), "zero_limit": ()}, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng()
    # else first (a sum below the limit of 10), then then; the limit decides the loops' turns,
    # none for the last loop when it is below the first sum.
    for sign, limit in ((-1, 10.0), (1, 10.0), (-1, -1e9), (1, 1e9), (-1, 40.0)):
        feeds = {"v0": (sign * rng.uniform(0.5, 1.0, 3)).astype(np.float32),
                 "limit": np.array(limit, np.float32), "zero_limit": np.array(0, np.float32)}
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


def _transpose_if(read_after, reads=("y",)):
    then = _branch("t", [helper.make_node("Identity", ["x"], ["t_y"])], "t_y", [2, 3])
    other = _branch("e", [helper.make_node("Transpose", ["x"], ["e_y"])], "e_y", [3, 2])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other,
                              name="pick")]
    if read_after:
        nodes.append(helper.make_node(read_after, list(reads), ["z"], name="after_if"))
    return _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
                  [helper.make_tensor_value_info("z" if read_after else "y", F, [None, None])],
                  [numpy_helper.from_array(np.array(0, np.float32), "zero")])


def test_branches_of_different_shapes_give_an_output_shaped_at_run_time(tmp_path):
    # then gives x [2, 3], else its transpose [3, 2]: the model's output is [-1, -1], each
    # run's shape that of the branch taken.
    m = _transpose_if(False)
    gm = _vm(m, {"x": (2, 3)}, tmp_path)
    sess = _ort(m)
    assert gm.get_output_info()[0][0] == (-1, -1)
    rng = np.random.default_rng(8)
    for sign in (1, -1, 1):
        x = (np.abs(rng.standard_normal((2, 3))) * sign).astype(np.float32)
        (got,) = _run(gm, {"x": x}, 1)
        (want,) = sess.run(None, {"x": x})
        assert got.shape == want.shape == ((2, 3) if sign > 0 else (3, 2))
        np.testing.assert_array_equal(got, want)
    # A node reading such an output is a kernel with run-time extents: elementwise, or with
    # one input shaped at run time.
    for after in ("Relu", "Transpose"):
        m = _transpose_if(after)
        gm = _vm(m, {"x": (2, 3)}, tmp_path)
        sess = _ort(m)
        for sign in (-1, 1):
            x = (rng.standard_normal((2, 3)) * sign).astype(np.float32)
            (got,) = _run(gm, {"x": x}, 1)
            (want,) = sess.run(None, {"x": x})
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    # y @ y: the inner dimensions, both known only at run time, meet; the kernel checks them
    # when called, and a branch giving a non-square y is an error naming the dimension.
    gm = GraphModule(kiln.onnx.compile(_transpose_if("MatMul", ("y", "y")), {"x": (2, 3)},
                                       target="llvm")["default"](kiln.cpu()))
    gm.set_input("x", np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"(?s)kernel0_matmul.*p0.shape\[1\].*p0.shape\[0\]"):
        gm.run()


def test_scan_output_of_a_run_time_loop_feeding_a_node_is_refused():
    m = _counting_loop()
    m.graph.node.append(helper.make_node("MatMul", ["accs", "accs"], ["r"], name="after_loop"))
    m.graph.output.append(helper.make_tensor_value_info("r", F, None))
    with pytest.raises(ValueError, match=r"after_loop.*'accs'.*known only at run time"):
        kiln.onnx.compile(m, {"x": (2, 4), "acc0": (2, 4)}, target="llvm")


def _nms_model(with_score_threshold):
    # A tiny detector head: a 1x1 conv gives 4 box coordinates and 2 class logits per position
    # of a 6x6 map (36 boxes); NonMaxSuppression selects among them. Boxes and scores are
    # outputs too, so the selection can be checked on Kiln's own values.
    rng = np.random.default_rng(21)
    w = numpy_helper.from_array(rng.standard_normal((6, 8, 1, 1)).astype(np.float32), "w")
    inits = [w,
             numpy_helper.from_array(np.array([0, 2, 1], np.int64), "perm_shape"),
             numpy_helper.from_array(np.array([5], np.int64), "max_out"),
             numpy_helper.from_array(np.array([0.3], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.4], np.float32), "score_min"),
             numpy_helper.from_array(np.array([1, 6, 36], np.int64), "flat"),
             numpy_helper.from_array(np.array([0, 4], np.int64), "split")]
    nms_in = ["boxes", "scores", "max_out", "iou"] + (["score_min"] if with_score_threshold else [])
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Reshape", ["c", "flat"], ["cf"]),
        helper.make_node("Split", ["cf", "split_sizes"], ["raw_boxes", "logits"], axis=1),
        helper.make_node("Transpose", ["raw_boxes"], ["boxes"], perm=[0, 2, 1]),
        helper.make_node("Sigmoid", ["logits"], ["scores"]),
        helper.make_node("NonMaxSuppression", nms_in, ["selected"], center_point_box=1),
    ]
    inits.append(numpy_helper.from_array(np.array([4, 2], np.int64), "split_sizes"))
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 8, 6, 6])],
                  [helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3]),
                   helper.make_tensor_value_info("boxes", F, [1, 36, 4]),
                   helper.make_tensor_value_info("scores", F, [1, 2, 36])], inits)


@pytest.mark.parametrize("with_score_threshold", [False, True])
def test_detector_with_non_max_suppression(tmp_path, with_score_threshold):
    m = _nms_model(with_score_threshold)
    gm = _vm(m, {"x": (1, 8, 6, 6)}, tmp_path)
    sess = _ort(m)
    # NonMaxSuppression alone in onnxruntime, on Kiln's own boxes and scores (a score a few
    # ulps away from onnxruntime's may order two boxes differently).
    nms_alone = _ort(_model(
        [m.graph.node[-1]],
        [helper.make_tensor_value_info("boxes", F, [1, 36, 4]),
         helper.make_tensor_value_info("scores", F, [1, 2, 36])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3])],
        [i for i in m.graph.initializer if i.name in ("max_out", "iou", "score_min")]))
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
        sel, boxes, scores = _run(gm, {"x": x}, 3)
        want_sel, want_boxes, want_scores = sess.run(None, {"x": x})
        np.testing.assert_allclose(boxes, want_boxes, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(scores, want_scores, rtol=1e-4, atol=1e-5)
        (own,) = nms_alone.run(None, {"boxes": boxes, "scores": scores})
        np.testing.assert_array_equal(sel, own)
        assert 0 < sel.shape[0] <= 10 and sel.shape[1] == 3
    assert gm.get_output_info()[0][0] == (-1, 3)


@pytest.mark.parametrize("axis,is_sorted", [(None, 1), (None, 0), (0, 1), (-1, 0)])
def test_unique_and_non_zero_of_computed_values(tmp_path, axis, is_sorted):
    # Values computed at run time (a Relu of x - 2) go through Unique (along an axis or
    # flattened, sorted or not) and NonZero, whose output counts depend on the data.
    attrs = {"sorted": is_sorted} if axis is None else {"sorted": is_sorted, "axis": axis}
    nodes = [helper.make_node("Sub", ["x", "two"], ["d"]),
             helper.make_node("Relu", ["d"], ["r"]),
             helper.make_node("Unique", ["r"], ["y", "idx", "inv", "cnt"], **attrs),
             helper.make_node("NonZero", ["r"], ["nz"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [4, 5])],
               [helper.make_tensor_value_info(n, t, [None] * r) for n, t, r in
                [("y", F, 1 if axis is None else 2), ("idx", TensorProto.INT64, 1),
                 ("inv", TensorProto.INT64, 1), ("cnt", TensorProto.INT64, 1),
                 ("nz", TensorProto.INT64, 2)]],
               [numpy_helper.from_array(np.array(2, np.float32), "two")], opset=13)
    gm = _vm(m, {"x": (4, 5)}, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(abs(hash((axis, is_sorted))) % 1000)
    for _ in range(3):
        # Small integers so values repeat (and rows repeat along the axis for some draws).
        x = rng.integers(0, 5, (4, 5)).astype(np.float32)
        x[1] = x[0]
        got = _run(gm, {"x": x}, 5)
        want = sess.run(None, {"x": x})
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def _crnn_any_width():
    from test_onnx_recurrent import _crnn
    return _crnn("width", np.random.default_rng(6))


def test_crnn_line_recognizer_at_four_widths_from_one_library(tmp_path):
    # Conv stack, bidirectional LSTM over the width, classifier: one library for widths 96,
    # 160, 320 and 800, each run with the code compiled for it; another width is refused with
    # an error naming the dimension and the widths compiled for.
    m = _crnn_any_width()
    lib = kiln.onnx.compile(m, target="llvm", dims={"width": [96, 160, 320, 800]})
    path = tmp_path / "crnn.so"
    lib.export_library(str(path))
    gm = GraphModule(kiln.load_module(str(path))["default"](kiln.cpu()))
    sess = _ort(m)
    rng = np.random.default_rng(9)
    for width in (320, 96, 800, 160, 96):
        img = rng.uniform(0, 1, (1, 1, 32, width)).astype(np.float32)
        (got,) = _run(gm, {"img": img}, 1)
        (want,) = sess.run(None, {"img": img})
        assert got.shape == want.shape == (width // 2, 1, 37)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert gm.get_output_info()[0][0] == (-1, 1, 37)
    gm.set_input("img", np.zeros((1, 1, 32, 200), np.float32))
    with pytest.raises(ValueError, match=r"'width' in \{96, 160, 320, 800\}.*img float32\[1, 1, 32, 200\]"):
        gm.run()
    with pytest.raises(ValueError, match=r"dimension 2 must be 32 but is 16"):
        gm.set_input("img", np.zeros((1, 1, 16, 96), np.float32))
    (got,) = _run(gm, {"img": img}, 1)  # still usable
    np.testing.assert_allclose(got, sess.run(None, {"img": img})[0], rtol=1e-4, atol=1e-4)


def _bert(hidden=32, heads=2, ffn=64, vocab=50, max_pos=128):
    """A BERT-style encoder layer as exporters write it for any batch and sequence length:
    token and position embeddings (positions from the input's shape), an additive attention
    mask from [batch, seq], multi-head self-attention with Reshape [0, 0, heads, dim], a GELU
    feed-forward block, post-norm residuals."""
    rng = np.random.default_rng(12)
    w = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    d = hidden // heads
    inits = {"tok": w(vocab, hidden), "pos": w(max_pos, hidden), "g1": w(hidden) + 1,
             "b1": w(hidden), "wq": w(hidden, hidden), "wk": w(hidden, hidden),
             "wv": w(hidden, hidden), "wo": w(hidden, hidden), "w1": w(hidden, ffn),
             "w2": w(ffn, hidden), "g2": w(hidden) + 1, "b2": w(hidden),
             "heads": np.array([0, 0, heads, d], np.int64),
             "merge": np.array([0, 0, hidden], np.int64),
             "one_i": np.array(1, np.int64), "zero_i": np.array(0, np.int64),
             "axes1": np.array([1, 2], np.int64), "one": np.array(1, np.float32),
             "big": np.array(-10000.0, np.float32), "scale": np.array(d ** -0.5, np.float32),
             "half": np.array(0.5, np.float32), "rt2": np.array(2 ** -0.5, np.float32)}
    n = helper.make_node
    nodes = [
        n("Shape", ["ids"], ["ids_shape"]),
        n("Gather", ["ids_shape", "one_i"], ["seq_len"], axis=0),
        n("Range", ["zero_i", "seq_len", "one_i"], ["positions"]),
        n("Gather", ["tok", "ids"], ["te"]),
        n("Gather", ["pos", "positions"], ["pe"]),
        n("Add", ["te", "pe"], ["emb"]),
        n("LayerNormalization", ["emb", "g1", "b1"], ["h0"], axis=-1),
        n("Cast", ["mask"], ["maskf"], to=F),
        n("Sub", ["one", "maskf"], ["inv"]),
        n("Mul", ["inv", "big"], ["bias2"]),
        n("Unsqueeze", ["bias2", "axes1"], ["bias"]),                    # [b, 1, 1, s]
    ]
    for name, wt in (("q", "wq"), ("k", "wk"), ("v", "wv")):
        nodes += [n("MatMul", ["h0", wt], [f"{name}0"]),
                  n("Reshape", [f"{name}0", "heads"], [f"{name}1"]),
                  n("Transpose", [f"{name}1"], [name],
                    perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["q", "k"], ["s0"]),
        n("Mul", ["s0", "scale"], ["s1"]),
        n("Add", ["s1", "bias"], ["s2"]),
        n("Softmax", ["s2"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["ctx0"]),
        n("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx1", "merge"], ["ctx"]),
        n("MatMul", ["ctx", "wo"], ["att"]),
        n("Add", ["att", "h0"], ["r1"]),
        n("MatMul", ["r1", "w1"], ["f0"]),
        n("Mul", ["f0", "rt2"], ["f1"]),
        n("Erf", ["f1"], ["f2"]),
        n("Add", ["f2", "one"], ["f3"]),
        n("Mul", ["f0", "f3"], ["f4"]),
        n("Mul", ["f4", "half"], ["gelu"]),
        n("MatMul", ["gelu", "w2"], ["f5"]),
        n("Add", ["f5", "r1"], ["r2"]),
        n("LayerNormalization", ["r2", "g2", "b2"], ["out"], axis=-1),
    ]
    return _model(nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
                          helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])],
                  [helper.make_tensor_value_info("out", F, ["batch", "seq", hidden])],
                  [numpy_helper.from_array(v, k) for k, v in inits.items()], opset=17)


def _bert_feeds(rng, batch, seq):
    """Random token ids for `_bert` and a mask padding the last third of each row."""
    ids = rng.integers(0, 50, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq - seq // 3:] = 0  # padding at the end of each row
    return {"ids": ids, "mask": mask}


def test_bert_encoder_at_four_lengths_and_two_batches_from_one_library(tmp_path):
    m = _bert()
    gm = _vm(m, None, tmp_path, dims={"seq": [7, 16, 64, 128], "batch": [1, 4]})
    sess = _ort(m)
    rng = np.random.default_rng(17)
    for batch, seq in ((1, 7), (4, 128), (4, 7), (1, 64), (4, 16), (1, 128)):
        feeds = _bert_feeds(rng, batch, seq)
        (got,) = _run(gm, feeds, 1)
        (want,) = sess.run(None, feeds)
        assert got.shape == (batch, seq, 32)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_weights_shared_by_the_shapes_of_one_library_are_stored_once(tmp_path):
    # A 512x512 float32 weight (1 MiB) in a library compiled for four batch sizes: stored
    # once, not four times; every shape still computes x @ w + b.
    rng = np.random.default_rng(3)
    w = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal(512).astype(np.float32)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["xw"]),
                helper.make_node("Add", ["xw", "b"], ["y"])],
               [helper.make_tensor_value_info("x", F, ["n", 512])],
               [helper.make_tensor_value_info("y", F, ["n", 512])],
               [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    gm = _vm(m, None, tmp_path, dims={"n": [1, 2, 3, 4]})
    assert (tmp_path / "model.so").stat().st_size < 2 * w.nbytes
    for n in (3, 1, 4, 2):
        x = rng.standard_normal((n, 512)).astype(np.float32)
        (got,) = _run(gm, {"x": x}, 1)
        np.testing.assert_allclose(got, x.astype(np.float64) @ w + b, rtol=1e-4, atol=1e-3)


def test_command_line_compiles_runs_and_inspects_a_vm_library(tmp_path):
    # kiln compile --dim, kiln run at two widths, kiln inspect printing the program.
    import os
    import subprocess
    kiln_bin = os.path.join(os.path.dirname(os.path.abspath(kiln.LIB_PATH)), "kiln")
    if not os.access(kiln_bin, os.X_OK):
        pytest.skip(f"no kiln binary next to {kiln.LIB_PATH}")
    m = _crnn_any_width()
    model = tmp_path / "crnn.onnx"
    model.write_bytes(m.SerializeToString())
    lib = tmp_path / "crnn.so"
    subprocess.run([kiln_bin, "compile", str(model), "-o", str(lib), "--target", "llvm",
                    "--dim", "width=96,160"], check=True, capture_output=True)
    sess = _ort(m)
    rng = np.random.default_rng(2)
    for width in (160, 96):
        img = rng.uniform(0, 1, (1, 1, 32, width)).astype(np.float32)
        np.save(tmp_path / "img.npy", img)
        out = tmp_path / f"out{width}"
        subprocess.run([kiln_bin, "run", str(lib), "--input", f"img={tmp_path / 'img.npy'}",
                        "--output-dir", str(out)], check=True, capture_output=True)
        np.testing.assert_allclose(np.load(out / "output_0.npy"), sess.run(None, {"img": img})[0],
                                   rtol=1e-4, atol=1e-4)
    timed = subprocess.run([kiln_bin, "bench", str(lib), "--repeat", "2", "--number", "2",
                            "--input", f"img={tmp_path / 'img.npy'}"], capture_output=True,
                           text=True)
    assert timed.returncode == 0 and "median" in timed.stdout, timed.stderr
    unnamed = subprocess.run([kiln_bin, "bench", str(lib)], capture_output=True, text=True)
    assert unnamed.returncode == 1 and "give it with --input img=" in unnamed.stderr
    shown = subprocess.run([kiln_bin, "inspect", str(lib)], check=True, capture_output=True,
                           text=True).stdout
    assert "VM factory" in shown and "call shape_is" in shown and "run segment 1" in shown
    # kiln tune measures the layers of every shape of the library; compile uses the records.
    records = tmp_path / "records.json"
    subprocess.run([kiln_bin, "tune", str(model), "-r", str(records), "--target", "llvm",
                    "--dim", "width=96", "--runs", "1"], check=True, capture_output=True)
    import json
    layers = json.loads(records.read_text())["layers"]
    assert any("(1, 1, 32, 96)" in k for k in layers), list(layers)
    subprocess.run([kiln_bin, "compile", str(model), "-o", str(tmp_path / "tuned.so"), "--target",
                    "llvm", "--dim", "width=96,160", "--tuning-records", str(records)],
                   check=True, capture_output=True)
    bad = subprocess.run([kiln_bin, "compile", str(model), "-o", str(tmp_path / "x.so"),
                          "--dim", "height=8"], capture_output=True, text=True)
    assert bad.returncode == 1 and "'height' is not a symbolic dimension" in bad.stderr
    assert "width" in bad.stderr


@pytest.mark.parametrize("target", ["opencl", ("llvm -mcpu=x86-64-v3", "llvm -mcpu=x86-64-v4")],
                         ids=["opencl", "two-cpu-variants"])
def test_run_time_if_and_loop_on_opencl_and_in_a_library_for_two_cpus(tmp_path, target):
    # The same programs with their segments' kernels on an OpenCL device (registers there, the
    # conditions read back to the host), and with code for two CPUs in one library.
    if target == "opencl":
        dev = kiln.opencl(0)
        if not dev.exist:
            pytest.skip("no OpenCL device (scripts/setup.sh installs PoCL)")
    else:
        dev = kiln.cpu()
        target = list(target)
    rng = np.random.default_rng(31)
    cases = [
        (_vad(), {"x": (1, 1, 256), "state": (2, 1, H)},
         [{"x": rng.standard_normal((1, 1, 256)).astype(np.float32),
           "sr": np.array([sr], np.int64), "state": rng.standard_normal((2, 1, H)).astype(np.float32)}
          for sr in (16000, 8000)]),
        (_counting_loop(), {"x": (2, 4), "acc0": (2, 4)},
         [{"x": rng.standard_normal((2, 4)).astype(np.float32),
           "acc0": rng.standard_normal((2, 4)).astype(np.float32), "trip": np.array(t, np.int64)}
          for t in (2, 0, 6)]),
    ]
    for k, (m, shapes, feeds_list) in enumerate(cases):
        lib = kiln.onnx.compile(m, shapes, target=target)
        path = tmp_path / f"m{k}.so"
        lib.export_library(str(path))
        gm = GraphModule(kiln.load_module(str(path))["default"](dev))
        sess = _ort(m)
        for feeds in feeds_list:
            got = _run(gm, feeds, len(m.graph.output))
            for g, w in zip(got, sess.run(None, feeds)):
                assert g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress_by_a_computed_condition(tmp_path, axis):
    # The condition is computed from the data (a row or column sum above zero, or each
    # element's sign), so the count kept is known only at run time.
    attrs = {} if axis is None else {"axis": axis}
    reduce_axes = np.array([1 if axis == 0 else 0], np.int64)
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s" if axis is not None else "x", "zero"], ["c0"]),
             helper.make_node("Reshape", ["c0", "flat"], ["c"]),
             helper.make_node("Compress", ["x", "c"], ["y"], **attrs)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [3, 5])],
               [helper.make_tensor_value_info("y", F, [None] * (1 if axis is None else 2))],
               [numpy_helper.from_array(np.array(0, np.float32), "zero"),
                numpy_helper.from_array(reduce_axes, "axes"),
                numpy_helper.from_array(np.array([-1], np.int64), "flat")], opset=13)
    gm = _vm(m, {"x": (3, 5)}, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(5)
    for _ in range(4):
        x = rng.standard_normal((3, 5)).astype(np.float32)
        (got,) = _run(gm, {"x": x}, 1)
        (want,) = sess.run(None, {"x": x})
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_loop_that_never_ends_is_stopped_and_the_machine_stays_usable(tmp_path):
    # A while-loop whose condition the input decides: v <- v + step while v < limit; a zero
    # step never ends it. With a step limit the run stops with an error; the next run works.
    body = helper.make_graph([
        helper.make_node("Add", ["v_in", "step"], ["v_out"]),
        helper.make_node("Less", ["v_out", "limit"], ["cond_out"]),
    ], "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("v_in", F, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [])])
    nodes = [helper.make_node("Less", ["v0", "limit"], ["c0"]),
             helper.make_node("Loop", ["", "c0", "v0"], ["v"], body=body, name="until_limit")]
    m = _model(nodes, [helper.make_tensor_value_info(n, F, []) for n in ("v0", "step", "limit")],
               [helper.make_tensor_value_info("v", F, [])])
    gm = _vm(m, {"v0": (), "step": (), "limit": ()}, tmp_path)
    gm.module["set_step_limit"](10_000)
    feeds = {"v0": np.array(0, np.float32), "step": np.array(0, np.float32),
             "limit": np.array(1, np.float32)}
    with pytest.raises(RuntimeError, match=r"limit of 10000 instructions.*inside a loop"):
        _run(gm, feeds, 1)
    feeds["step"] = np.array(0.25, np.float32)
    (got,) = _run(gm, feeds, 1)
    assert got == _ort(m).run(None, feeds)[0] == np.float32(1.0)
