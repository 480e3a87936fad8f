"""Kernels compiled with extents known only at run time: nodes whose output shapes depend on
small run-time integer inputs (a reduction's `axes`) compile to ONE kernel in a VM library; a
shape function computes the result's shape per run and the kernel's extents are bound from the
tensors it is given. Each case against onnxruntime (and numpy) on fresh random inputs, outputs
poisoned between runs, from a library exported and loaded again."""

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from test_vm import _model, _ort, _run, _vm  # noqa: E402

F = TensorProto.FLOAT
REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def _reduce_model(op, keepdims, n_axes, noop=0, shape=(3, 4, 5)):
    rank = len(shape) if keepdims or (n_axes == 0 and noop) else \
        (0 if n_axes == 0 else len(shape) - n_axes)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims,
                            noop_with_empty_axes=noop)
    return _model([node], [helper.make_tensor_value_info("x", F, list(shape)),
                           helper.make_tensor_value_info("axes", TensorProto.INT64, [n_axes])],
                  [helper.make_tensor_value_info("y", F, [None] * rank)])


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("keepdims", [1, 0])
def test_reduction_over_run_time_axes_from_one_library(tmp_path, op, keepdims):
    m = _reduce_model(op, keepdims, 2)
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(7)
    # Every pair of axes, negative spellings, and the last pair twice (its memory is reused:
    # the poisoned output of the run before must be written over).
    for axes in [[0, 1], [2, -3], [1, 2], [-1, 1], [0, 2], [0, 2]]:
        feeds = {"x": (rng.random((3, 4, 5), dtype=np.float32) + 0.5),
                 "axes": np.array(axes, np.int64)}
        got = _run(gm, feeds, 1)[0]
        want = sess.run(None, feeds)[0]
        assert got.shape == want.shape, (axes, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(axes))


@pytest.mark.parametrize("noop", [0, 1])
def test_empty_axes_reduce_all_or_nothing(tmp_path, noop):
    m = _reduce_model("ReduceSum", 1, 0, noop=noop)
    gm = _vm(m, None, tmp_path)
    x = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(np.float32)
    got = _run(gm, {"x": x, "axes": np.zeros(0, np.int64)}, 1)[0]
    want = x if noop else x.sum(keepdims=True)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_reduction_of_a_tensor_without_elements(tmp_path):
    m = _reduce_model("ReduceMax", 1, 1, shape=(2, 0, 4))
    gm = _vm(m, None, tmp_path)
    x = np.zeros((2, 0, 4), np.float32)
    for axes in [[1], [2]]:
        feeds = {"x": x, "axes": np.array(axes, np.int64)}
        got = _run(gm, feeds, 1)[0]
        want = _ort(m).run(None, feeds)[0]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_bad_axes_are_named_and_the_machine_stays_usable(tmp_path):
    m = _reduce_model("ReduceSum", 0, 2)
    gm = _vm(m, None, tmp_path)
    x = np.random.default_rng(5).standard_normal((3, 4, 5)).astype(np.float32)
    with pytest.raises(ValueError, match=r"axes value 3 is out of range for an input of rank 3"):
        _run(gm, {"x": x, "axes": np.array([0, 3], np.int64)}, 1)
    with pytest.raises(ValueError, match=r"name axis 2 twice"):
        _run(gm, {"x": x, "axes": np.array([2, -1], np.int64)}, 1)
    got = _run(gm, {"x": x, "axes": np.array([0, 2], np.int64)}, 1)[0]
    np.testing.assert_allclose(got, x.sum(axis=(0, 2)), rtol=1e-5, atol=1e-5)


def test_inspect_shows_the_shape_function_kernel_and_view(tmp_path):
    import os
    import subprocess
    kiln_bin = os.path.join(os.path.dirname(os.path.abspath(kiln.LIB_PATH)), "kiln")
    if not os.access(kiln_bin, os.X_OK):
        pytest.skip(f"no kiln binary next to {kiln.LIB_PATH}")
    path = tmp_path / "m.so"
    kiln.onnx.compile(_reduce_model("ReduceL2", 0, 1), target="llvm").export_library(str(path))
    shown = subprocess.run([kiln_bin, "inspect", str(path)], check=True, capture_output=True,
                           text=True).stdout
    assert "call reduce_shape(r0, r1, 0)" in shown, shown
    assert "kernel kernel0_reducel2(r0)" in shown and "view r" in shown, shown


def test_elementwise_nodes_after_run_time_shaped_values(tmp_path):
    # ReduceL2 over run-time axes, then a square root, a broadcast with a constant and a
    # product of two run-time-shaped values; NonZero's result cast and shifted.
    from onnx import numpy_helper
    nodes = [helper.make_node("ReduceSumSquare", ["x", "axes"], ["s"], keepdims=1),
             helper.make_node("Sqrt", ["s"], ["r"]),
             helper.make_node("Add", ["r", "bias"], ["b"]),
             helper.make_node("Mul", ["b", "r"], ["y"]),
             helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["nz"]),
             helper.make_node("Cast", ["nz"], ["nzf"], to=F),
             helper.make_node("Sub", ["nzf", "one"], ["z"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [3, 4, 5]),
                       helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
               [helper.make_tensor_value_info("y", F, [None, None, None]),
                helper.make_tensor_value_info("z", F, [3, None])],
               [numpy_helper.from_array(np.linspace(-1, 1, 5).astype(np.float32), "bias"),
                numpy_helper.from_array(np.array(0, np.float32), "zero"),
                numpy_helper.from_array(np.array(1, np.float32), "one")])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(11)
    for axis in [0, 1, 0]:
        feeds = {"x": rng.standard_normal((3, 4, 5)).astype(np.float32),
                 "axes": np.array([axis], np.int64)}
        got = _run(gm, feeds, 2)
        want = sess.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (axis, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_run_time_dimensions_that_meet_must_agree(tmp_path):
    # Two NonZero results of different lengths added: a clear error, then a good run.
    nodes = [helper.make_node("NonZero", ["a"], ["i"]),
             helper.make_node("NonZero", ["b"], ["j"]),
             helper.make_node("Add", ["i", "j"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("a", TensorProto.BOOL, [6]),
                       helper.make_tensor_value_info("b", TensorProto.BOOL, [6])],
               [helper.make_tensor_value_info("y", TensorProto.INT64, [1, None])])
    gm = _vm(m, None, tmp_path)
    a = np.array([1, 0, 1, 1, 0, 0], bool)
    with pytest.raises(ValueError, match=r"do not broadcast"):
        _run(gm, {"a": a, "b": np.array([1, 0, 0, 0, 0, 1], bool)}, 1)
    b = np.array([0, 1, 1, 0, 1, 0], bool)
    got = _run(gm, {"a": a, "b": b}, 1)[0]
    np.testing.assert_array_equal(got, np.nonzero(a)[0][None] + np.nonzero(b)[0][None])


def test_reshape_squeeze_unsqueeze_by_run_time_inputs_are_views(tmp_path):
    # y = Unsqueeze(Squeeze(Reshape(x, shape), sq), unsq) + 1: shapes and axes given per run.
    from onnx import numpy_helper
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Squeeze", ["r", "sq"], ["s"]),
             helper.make_node("Unsqueeze", ["s", "unsq"], ["u"]),
             helper.make_node("Add", ["u", "one"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3, 4]),
                       helper.make_tensor_value_info("shape", TensorProto.INT64, [4]),
                       helper.make_tensor_value_info("sq", TensorProto.INT64, [1]),
                       helper.make_tensor_value_info("unsq", TensorProto.INT64, [2])],
               [helper.make_tensor_value_info("y", F, [None] * 5)],
               [numpy_helper.from_array(np.array(1, np.float32), "one")])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(13)
    for shape, sq, unsq in [([0, 1, -1, 4], [1], [0, -1]), ([6, 4, 1, 1], [-1], [1, 3]),
                            ([1, 24, 1, 1], [0], [2, 0]), ([1, 24, 1, 1], [0], [2, 0])]:
        feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32),
                 "shape": np.array(shape, np.int64), "sq": np.array(sq, np.int64),
                 "unsq": np.array(unsq, np.int64)}
        got = _run(gm, feeds, 1)[0]
        want = sess.run(None, feeds)[0]
        assert got.shape == want.shape, (shape, sq, unsq, got.shape, want.shape)
        np.testing.assert_array_equal(got, want)
    good = {"x": np.zeros((2, 3, 4), np.float32), "shape": np.array([2, 12, 1, 1], np.int64),
            "sq": np.array([2], np.int64), "unsq": np.array([0, 1], np.int64)}
    with pytest.raises(ValueError, match=r"cannot reshape \[2, 3, 4\] to \[5, -1, 1, 1\]"):
        _run(gm, dict(good, shape=np.array([5, -1, 1, 1], np.int64)), 1)
    with pytest.raises(ValueError, match=r"Squeeze: axis 1 of \[2, 12, 1, 1\] has extent 12"):
        _run(gm, dict(good, sq=np.array([1], np.int64)), 1)
    assert _run(gm, good, 1)[0].shape == (1, 1, 2, 12, 1)


def test_slice_range_and_constant_of_shape_by_run_time_inputs(tmp_path):
    # y = Slice(x, starts, ends, axes, steps) * 2; r = Range(start, limit, delta);
    # c = ConstantOfShape(shape) (value 3, int32).
    from onnx import numpy_helper
    I64 = TensorProto.INT64
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"]),
             helper.make_node("Mul", ["s", "two"], ["y"]),
             helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
             helper.make_node("ConstantOfShape", ["shape"], ["c"],
                              value=numpy_helper.from_array(np.array([3], np.int32)))]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [5, 6, 7]),
                       *[helper.make_tensor_value_info(n, I64, [2])
                         for n in ("starts", "ends", "axes", "steps")],
                       *[helper.make_tensor_value_info(n, F, []) for n in ("start", "limit",
                                                                            "delta")],
                       helper.make_tensor_value_info("shape", I64, [3])],
               [helper.make_tensor_value_info("y", F, [None] * 3),
                helper.make_tensor_value_info("r", F, [None]),
                helper.make_tensor_value_info("c", TensorProto.INT32, [None] * 3)],
               [numpy_helper.from_array(np.array(2, np.float32), "two")])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(17)
    big = np.iinfo(np.int64).max
    cases = [([1, 0], [4, 7], [0, 2], [1, 2], (0.0, 5.0, 1.0), [2, 3, 4]),
             ([-1, 5], [-6, 0], [1, 0], [-2, -1], (2.5, -1.0, -0.5), [0, 2, 1]),
             ([0, -big], [big, big], [-1, 1], [3, 1], (1.0, 1.0, 1.0), [1, 1, 1]),
             ([9, 2], [10, 1], [0, 1], [1, 1], (-3.0, 4.0, 2.5), [4, 0, 3]),
             ([9, 2], [10, 1], [0, 1], [1, 1], (-3.0, 4.0, 2.5), [4, 0, 3])]
    for starts, ends, axes, steps, (a, b, d), shape in cases:
        feeds = {"x": rng.standard_normal((5, 6, 7)).astype(np.float32),
                 "starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64),
                 "axes": np.array(axes, np.int64), "steps": np.array(steps, np.int64),
                 "start": np.array(a, np.float32), "limit": np.array(b, np.float32),
                 "delta": np.array(d, np.float32), "shape": np.array(shape, np.int64)}
        got = _run(gm, feeds, 3)
        want = sess.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (starts, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    good = {k: v for k, v in feeds.items()}
    with pytest.raises(ValueError, match=r"Slice of \[5, 6, 7\].*the step of axis 1 is 0"):
        _run(gm, dict(good, steps=np.array([1, 0], np.int64)), 3)
    with pytest.raises(ValueError, match=r"Range: delta is 0"):
        _run(gm, dict(good, delta=np.array(0, np.float32)), 3)
    with pytest.raises(ValueError, match=r"negative dimension"):
        _run(gm, dict(good, shape=np.array([2, -1, 1], np.int64)), 3)
    assert _run(gm, good, 3)[2].shape == (4, 0, 3)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_and_tile_by_run_time_inputs(tmp_path, axis):
    I64 = TensorProto.INT64
    nodes = [helper.make_node("OneHot", ["idx", "depth", "values"], ["oh"], axis=axis),
             helper.make_node("Tile", ["x", "reps"], ["t"])]
    m = _model(nodes, [helper.make_tensor_value_info("idx", I64, [2, 3]),
                       helper.make_tensor_value_info("depth", F, []),
                       helper.make_tensor_value_info("values", F, [2]),
                       helper.make_tensor_value_info("x", F, [2, 3]),
                       helper.make_tensor_value_info("reps", I64, [2])],
               [helper.make_tensor_value_info("oh", F, [None] * 3),
                helper.make_tensor_value_info("t", F, [None] * 2)])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(19)
    for depth, reps in [(5, [1, 2]), (3, [3, 1]), (8, [0, 4]), (8, [0, 4])]:
        feeds = {"idx": rng.integers(-depth, depth, (2, 3)).astype(np.int64),
                 "depth": np.array(depth, np.float32),
                 "values": rng.standard_normal(2).astype(np.float32),
                 "x": rng.standard_normal((2, 3)).astype(np.float32),
                 "reps": np.array(reps, np.int64)}
        got = _run(gm, feeds, 2)
        want = sess.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (depth, reps, g.shape, w.shape)
            np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match=r"Tile of \[2, 3\]: repeats \[-1, 2\]"):
        _run(gm, dict(feeds, reps=np.array([-1, 2], np.int64)), 2)
    with pytest.raises(ValueError, match=r"OneHot's depth 0 is not positive"):
        _run(gm, dict(feeds, depth=np.array(0, np.float32)), 2)


def test_a_post_processing_chain_over_a_data_dependent_count(tmp_path):
    # NonZero -> Transpose -> Gather (a column) -> Gather (table rows) -> MatMul -> Softmax ->
    # Slice -> ReduceSum: every node after NonZero runs on [n, ...] values, n known per run;
    # the kernels' result shapes come from programs derived from their computes.
    from onnx import numpy_helper
    rng = np.random.default_rng(23)
    I64 = TensorProto.INT64
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
             helper.make_node("Gather", ["nzt", "one_i"], ["col"], axis=1),
             helper.make_node("Gather", ["table", "col"], ["rows"], axis=0),
             helper.make_node("MatMul", ["rows", "w"], ["mm"]),
             helper.make_node("Softmax", ["mm"], ["sm"], axis=-1),
             helper.make_node("Slice", ["sm", "st", "en", "ax"], ["y"]),
             helper.make_node("ReduceSum", ["y", "ax0"], ["tot"], keepdims=0)]
    inits = [numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one_i"),
             numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "table"),
             numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([0], np.int64), "st"),
             numpy_helper.from_array(np.array([2], np.int64), "en"),
             numpy_helper.from_array(np.array([1], np.int64), "ax"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0")]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [4, 5])],
               [helper.make_tensor_value_info("y", F, [None, 2]),
                helper.make_tensor_value_info("tot", F, [2])], inits)
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    for shift in (0.0, 1.5, -1.5, -9.0, -9.0):
        x = (rng.standard_normal((4, 5)) + shift).astype(np.float32)
        got = _run(gm, {"x": x}, 2)
        want = sess.run(None, {"x": x})
        for g, w in zip(got, want):
            assert g.shape == w.shape, (shift, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("classes", [6, 48])
def test_a_dimension_left_to_run_time_runs_every_value_from_one_library(tmp_path, classes):
    # A token classifier head over [1, n, 8] tokens, n symbolic ("any"): MatMul, Add, Relu,
    # Softmax, ReduceMean over the tokens; the library is compiled once and run at n = 1, 5,
    # 33 and 5 again. 6 classes (a product in scalars) and 48 (in whole vectors of any CPU's
    # lanes).
    from onnx import numpy_helper
    rng = np.random.default_rng(29)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("Softmax", ["r"], ["p"], axis=-1),
             helper.make_node("ReduceMean", ["p", "tok_axis"], ["y"], keepdims=0)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [1, "n", 8])],
               [helper.make_tensor_value_info("p", F, [1, "n", classes]),
                helper.make_tensor_value_info("y", F, [1, classes])],
               [numpy_helper.from_array(rng.standard_normal((8, classes)).astype(np.float32), "w"),
                numpy_helper.from_array(rng.standard_normal(classes).astype(np.float32), "b"),
                numpy_helper.from_array(np.array([1], np.int64), "tok_axis")])
    gm = _vm(m, None, tmp_path, dims={"n": "any"})
    assert gm.get_input_info()[0]["x"] == (1, -1, 8)
    sess = _ort(m)
    for n in (1, 5, 33, 5):
        feeds = {"x": rng.standard_normal((1, n, 8)).astype(np.float32)}
        got = _run(gm, feeds, 2)
        want = sess.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (n, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r'"x".*dimension 2 must be 8'):
        gm.set_input("x", np.zeros((1, 3, 7), np.float32))


def test_a_node_without_a_run_time_kernel_is_named(tmp_path):
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="stem")]
    from onnx import numpy_helper
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [1, 3, "h", 8])],
               [helper.make_tensor_value_info("y", F, [1, 4, None, 10])],
               [numpy_helper.from_array(np.ones((3, 4, 3, 3), np.float32), "w")])
    with pytest.raises(ValueError, match=r"stem.*'x'.*known only at run time"):
        kiln.onnx.compile(m, target="llvm", dims={"h": "any"})


def test_squeeze_without_axes_of_a_run_time_shaped_value(tmp_path):
    # The dimensions known to be 1 go; one left to run time stays, and may not come out 1 (the
    # result's rank would depend on it): refused, naming the check, the machine usable after.
    nodes = [helper.make_node("Squeeze", ["x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [1, "n", 1, 3])],
               [helper.make_tensor_value_info("y", F, [None, 3])])
    gm = _vm(m, None, tmp_path, dims={"n": "any"})
    sess = _ort(m)
    rng = np.random.default_rng(61)
    for n in (4, 2, 7):
        feeds = {"x": rng.standard_normal((1, n, 1, 3)).astype(np.float32)}
        (got,) = _run(gm, feeds, 1)
        np.testing.assert_array_equal(got, sess.run(None, feeds)[0])
    with pytest.raises(ValueError, match=r"do not fit"):
        _run(gm, {"x": np.zeros((1, 1, 1, 3), np.float32)}, 1)
    (got,) = _run(gm, feeds, 1)
    np.testing.assert_array_equal(got, sess.run(None, feeds)[0])


def test_split_by_run_time_sizes(tmp_path):
    I64 = TensorProto.INT64
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"], axis=1),
             helper.make_node("Neg", ["b"], ["nb"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 7, 3]),
                       helper.make_tensor_value_info("sizes", I64, [3])],
               [helper.make_tensor_value_info("a", F, [2, None, 3]),
                helper.make_tensor_value_info("nb", F, [2, None, 3]),
                helper.make_tensor_value_info("c", F, [2, None, 3])])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(31)
    for sizes in ([2, 3, 2], [0, 7, 0], [7, 0, 0], [1, 1, 5], [1, 1, 5]):
        feeds = {"x": rng.standard_normal((2, 7, 3)).astype(np.float32),
                 "sizes": np.array(sizes, np.int64)}
        got = _run(gm, feeds, 3)
        want = sess.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (sizes, g.shape, w.shape)
            np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match=r"sizes \[2, 2, 2\] must be non-negative and add up to 7"):
        _run(gm, dict(feeds, sizes=np.array([2, 2, 2], np.int64)), 3)


def test_sequences_split_by_run_time_sizes(tmp_path):
    # SplitToSequence by sizes given per run: its items read by SequenceAt (then a Relu), the
    # items concatenated again (ConcatFromSequence), and the sequence's length (a constant,
    # returned from the library's own storage, so not poisoned).
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    nodes = [helper.make_node("SplitToSequence", ["x", "s"], ["seq"], axis=1),
             helper.make_node("SequenceAt", ["seq", "one"], ["p"]),
             helper.make_node("Relu", ["p"], ["y0"]),
             helper.make_node("ConcatFromSequence", ["seq"], ["y1"], axis=1),
             helper.make_node("SequenceLength", ["seq"], ["y2"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 10]),
                       helper.make_tensor_value_info("s", TensorProto.INT64, [3])],
               [helper.make_tensor_value_info("y0", F, [2, None]),
                helper.make_tensor_value_info("y1", F, [2, None]),
                helper.make_tensor_value_info("y2", TensorProto.INT64, [])], [one])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(67)
    for sizes in ([2, 3, 5], [5, 5, 0], [1, 8, 1], [2, 3, 5]):
        feeds = {"x": rng.standard_normal((2, 10)).astype(np.float32),
                 "s": np.array(sizes, np.int64)}
        got = _run(gm, feeds, 2) + [gm.get_output(2).numpy()]
        for g, w in zip(got, sess.run(None, feeds)):
            assert g.shape == w.shape, (sizes, g.shape, w.shape)
            np.testing.assert_array_equal(g, w)


def test_expand_by_a_run_time_shape(tmp_path):
    # Expand(x, shape) with the shape given per run: new leading axes, size-1 axes stretched,
    # a shape entry of 1 under a larger axis; a shape that does not fit is named.
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e"]),
             helper.make_node("Mul", ["e", "two"], ["y"])]
    from onnx import numpy_helper
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [3, 1]),
                       helper.make_tensor_value_info("shape", TensorProto.INT64, [3])],
               [helper.make_tensor_value_info("y", F, [None] * 3)],
               [numpy_helper.from_array(np.array(2, np.float32), "two")])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(43)
    for shape in ([2, 3, 4], [1, 1, 1], [2, 1, 5], [1, 3, 0], [2, 3, 4]):
        feeds = {"x": rng.standard_normal((3, 1)).astype(np.float32),
                 "shape": np.array(shape, np.int64)}
        (got,) = _run(gm, feeds, 1)
        (want,) = sess.run(None, feeds)
        assert got.shape == want.shape, (shape, got.shape, want.shape)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match=r"do not fit the operator"):
        _run(gm, {"x": np.zeros((3, 1), np.float32), "shape": np.array([1, 4, 2], np.int64)}, 1)
    (got,) = _run(gm, feeds, 1)
    np.testing.assert_array_equal(got, sess.run(None, feeds)[0])


def test_expand_to_a_shape_computed_from_a_run_time_dimension(tmp_path):
    # An exporter's attention-mask pattern: Shape -> Gather -> Concat -> Expand, the sequence
    # length left to run time.
    from onnx import numpy_helper
    n = helper.make_node
    nodes = [n("Shape", ["x"], ["s"]), n("Gather", ["s", "one"], ["len"], axis=0),
             n("Unsqueeze", ["len", "ax0"], ["len1"]),
             n("Concat", ["len1", "len1"], ["sq"], axis=0),
             n("Expand", ["m", "sq"], ["mm"]), n("Add", ["mm", "x"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, ["n", "n"]),
                       helper.make_tensor_value_info("m", F, [1, "n"])],
               [helper.make_tensor_value_info("y", F, ["n", "n"])],
               [numpy_helper.from_array(np.array(1, np.int64), "one"),
                numpy_helper.from_array(np.array([0], np.int64), "ax0")])
    gm = _vm(m, None, tmp_path, dims={"n": "any"})
    sess = _ort(m)
    rng = np.random.default_rng(47)
    for k in (3, 8, 1, 17):
        feeds = {"x": rng.standard_normal((k, k)).astype(np.float32),
                 "m": rng.standard_normal((1, k)).astype(np.float32)}
        (got,) = _run(gm, feeds, 1)
        (want,) = sess.run(None, feeds)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_pad_by_run_time_pads(tmp_path, mode):
    # Pads (negative ones crop) and the constant value given per run, along constant axes.
    ins = ["x", "pads", "value", "axes"] if mode == "constant" else ["x", "pads", "", "axes"]
    nodes = [helper.make_node("Pad", ins, ["y"], mode=mode)]
    from onnx import numpy_helper
    inputs = [helper.make_tensor_value_info("x", F, [3, 4, 5]),
              helper.make_tensor_value_info("pads", TensorProto.INT64, [4])]
    if mode == "constant":
        inputs.append(helper.make_tensor_value_info("value", F, []))
    m = _model(nodes, inputs, [helper.make_tensor_value_info("y", F, [None] * 3)],
               [numpy_helper.from_array(np.array([0, -1], np.int64), "axes")])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(53)
    for pads in ([0, 1, 0, 2], [2, 3, 1, 0], [-1, 0, 0, -2], [1, 2, 2, 1], [0, 0, 0, 0]):
        feeds = {"x": rng.standard_normal((3, 4, 5)).astype(np.float32),
                 "pads": np.array(pads, np.int64)}
        if mode == "constant":
            feeds["value"] = np.array(rng.standard_normal(), np.float32)
        (got,) = _run(gm, feeds, 1)
        (want,) = sess.run(None, feeds)
        assert got.shape == want.shape, (pads, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=str(pads))
    with pytest.raises(ValueError, match=r"comes out -"):
        _run(gm, dict(feeds, pads=np.array([0, -9, 0, 0], np.int64)), 1)


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_pad_along_run_time_axes(tmp_path, mode):
    # The axes are given per run too (any order, negative spellings); an axis named twice or
    # out of range is refused and the machine stays usable.
    nodes = [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode=mode)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [3, 4, 5]),
                       helper.make_tensor_value_info("pads", TensorProto.INT64, [4]),
                       helper.make_tensor_value_info("axes", TensorProto.INT64, [2])],
               [helper.make_tensor_value_info("y", F, [None] * 3)])
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(59)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    for axes, pads in (([0, 2], [1, 2, 2, 1]), ([-1, 1], [0, 3, 2, 0]), ([2, -3], [1, 0, 1, 2]),
                       ([1, 2], [-1, 1, 2, -2])):
        feeds = {"x": x, "pads": np.array(pads, np.int64), "axes": np.array(axes, np.int64)}
        (got,) = _run(gm, feeds, 1)
        (want,) = sess.run(None, feeds)
        assert got.shape == want.shape, (axes, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=str(axes))
    for bad in ([1, -2], [0, 3], [-4, 0]):
        with pytest.raises(ValueError, match=r"do not fit"):
            _run(gm, dict(feeds, axes=np.array(bad, np.int64)), 1)
    (got,) = _run(gm, feeds, 1)
    np.testing.assert_array_equal(got, sess.run(None, feeds)[0])


def test_center_crop_pad_and_windows_by_run_time_sizes(tmp_path):
    from onnx import numpy_helper
    nodes = [helper.make_node("CenterCropPad", ["x", "shape"], ["c"], axes=[0, -1]),
             helper.make_node("HannWindow", ["n"], ["w1"], periodic=0),
             helper.make_node("BlackmanWindow", ["n"], ["w2"]),
             helper.make_node("HammingWindow", ["n32"], ["w3"], output_datatype=11)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [5, 3, 6]),
                       helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
                       helper.make_tensor_value_info("n", TensorProto.INT64, []),
                       helper.make_tensor_value_info("n32", TensorProto.INT32, [])],
               [helper.make_tensor_value_info("c", F, [None] * 3),
                helper.make_tensor_value_info("w1", F, [None]),
                helper.make_tensor_value_info("w2", F, [None]),
                helper.make_tensor_value_info("w3", TensorProto.DOUBLE, [None])], opset=18)
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(59)
    for shape, n in (([3, 9], 10), ([8, 2], 2), ([5, 6], 7), ([0, 4], 0), ([3, 9], 10)):
        feeds = {"x": rng.standard_normal((5, 3, 6)).astype(np.float32),
                 "shape": np.array(shape, np.int64), "n": np.array(n, np.int64),
                 "n32": np.array(n, np.int32)}
        got = _run(gm, feeds, 4)
        want = sess.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (shape, n, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, err_msg=f"{shape} {n}")


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_of_a_run_time_size(tmp_path, align):
    nodes = [helper.make_node("AffineGrid", ["t2", "s2"], ["g2"], align_corners=align),
             helper.make_node("AffineGrid", ["t3", "s3"], ["g3"], align_corners=align)]
    m = _model(nodes, [helper.make_tensor_value_info("t2", F, [2, 2, 3]),
                       helper.make_tensor_value_info("s2", TensorProto.INT64, [4]),
                       helper.make_tensor_value_info("t3", F, [1, 3, 4]),
                       helper.make_tensor_value_info("s3", TensorProto.INT64, [5])],
               [helper.make_tensor_value_info("g2", F, [None] * 4),
                helper.make_tensor_value_info("g3", F, [None] * 5)], opset=20)
    gm = _vm(m, None, tmp_path)
    sess = _ort(m)
    rng = np.random.default_rng(61)
    for (h, w), (d3, h3, w3) in (((3, 5), (2, 3, 4)), ((1, 1), (1, 2, 1)), ((7, 2), (3, 1, 5))):
        feeds = {"t2": rng.standard_normal((2, 2, 3)).astype(np.float32),
                 "s2": np.array([2, 3, h, w], np.int64),
                 "t3": rng.standard_normal((1, 3, 4)).astype(np.float32),
                 "s3": np.array([1, 1, d3, h3, w3], np.int64)}
        got = _run(gm, feeds, 2)
        want = sess.run(None, feeds)
        for g, wnt in zip(got, want):
            assert g.shape == wnt.shape
            np.testing.assert_allclose(g, wnt, rtol=1e-5, atol=1e-6)
    # A size whose batch differs from theta's is named.
    with pytest.raises(ValueError, match=r"do not fit the operator"):
        _run(gm, dict(feeds, s2=np.array([3, 3, 4, 4], np.int64)), 2)
