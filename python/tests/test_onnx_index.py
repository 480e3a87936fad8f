"""ONNX indexing, scatter, scan, selection and Einsum operators through ``kiln.onnx.compile``,
against onnxruntime on random inputs: shapes and attributes beyond the backend node cases,
inputs that must be constant given as initializers, and the errors for runtime values that
fix an output shape."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

TARGET = "llvm"


def one_node(op, inputs, consts=None, opset=18, n_out=1, **attrs):
    """A model of one `op` node: runtime `inputs` (name -> array) then constant `consts`
    (initializers), outputs `y0`, `y1`..."""
    consts = consts or {}
    names = list(inputs) + list(consts)
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for n, v in inputs.items()]
    graph = helper.make_graph(
        [node], "g", vi, [helper.make_empty_tensor_value_info(o) for o in outs],
        initializer=[numpy_helper.from_array(v, n) for n, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def check(model, inputs, rtol=1e-5, atol=1e-6):
    """Kiln's outputs equal onnxruntime's."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, inputs)
    lib = kiln.onnx.compile(model.SerializeToString(), {k: v.shape for k, v in inputs.items()},
                            target=TARGET)
    gm = GraphModule(lib["default"](kiln.cpu()))
    for k, v in inputs.items():
        gm.set_input(k, v)
    gm.run()
    for i, w in enumerate(want):
        got = gm.get_output(i).numpy()
        assert got.shape == w.shape, (i, got.shape, w.shape)
        assert got.dtype == w.dtype, (i, got.dtype, w.dtype)
        np.testing.assert_allclose(got, w, rtol=rtol, atol=atol, err_msg=f"output {i}")


rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("eq,shapes", [
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ii", [(4, 4)]),
    ("bii->b", [(2, 3, 3)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 3, 4), (2, 3, 4, 2)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("ij->", [(3, 4)]),
])
def test_einsum(eq, shapes):
    inputs = {f"x{k}": rand(*s) for k, s in enumerate(shapes)}
    check(one_node("Einsum", inputs, opset=12, equation=eq), inputs, rtol=1e-4, atol=1e-5)


def test_topk_constant_k_ties_and_int_data():
    x = rng.integers(0, 5, (40, 3)).astype("int32")  # many ties
    for largest in (0, 1):
        m = one_node("TopK", {"x": x}, {"k": np.array([9], "int64")}, n_out=2, axis=0,
                     largest=largest)
        check(m, {"x": x})


def test_scatter_nd_and_elements_with_duplicates():
    data = rand(6, 5, 4)
    ix = rng.integers(-6, 6, (7, 1)).astype("int64")
    upd = rand(7, 5, 4)
    for red in ("add", "mul", "max", "min"):
        m = one_node("ScatterND", {"data": data, "indices": ix, "updates": upd}, reduction=red)
        check(m, {"data": data, "indices": ix, "updates": upd})
    ix = rng.integers(-5, 5, (6, 3, 4)).astype("int64")
    upd = rand(6, 3, 4)
    m = one_node("ScatterElements", {"data": data, "indices": ix, "updates": upd}, axis=1,
                 reduction="add")
    check(m, {"data": data, "indices": ix, "updates": upd})


def test_gather_nd_two_batch_axes():
    data = rand(2, 3, 4, 5)
    ix = rng.integers(-4, 4, (2, 3, 6, 1)).astype("int64")
    m = one_node("GatherND", {"data": data, "indices": ix}, opset=13, batch_dims=2)
    check(m, {"data": data, "indices": ix})


def test_cumsum_constant_axis():
    x = rand(3, 4, 5)
    for exclusive in (0, 1):
        for reverse in (0, 1):
            m = one_node("CumSum", {"x": x}, {"axis": np.array(-2, "int64")}, opset=14,
                         exclusive=exclusive, reverse=reverse)
            check(m, {"x": x}, rtol=1e-5, atol=1e-5)


def test_onehot_constant_depth():
    ix = rng.integers(-5, 5, (3, 4)).astype("int64")
    values = np.array([-1.5, 2.0], "float32")
    m = one_node("OneHot", {"i": ix, "v": values}, {"depth": np.array(5, "int64")}, opset=11,
                 axis=0)
    # The constant comes after the runtime inputs in `one_node`: reorder the node's inputs.
    m.graph.node[0].input[:] = ["i", "depth", "v"]
    check(m, {"i": ix, "v": values})


def test_center_crop_pad_odd_differences():
    x = rand(7, 6, 3)
    m = one_node("CenterCropPad", {"x": x}, {"shape": np.array([4, 9], "int64")}, axes=[0, 1])
    check(m, {"x": x})


def test_nonzero_and_compress_fold_constants():
    c = (rng.standard_normal((3, 4)) > 0).astype("float32")
    x = rand(5, 4)
    # NonZero of a constant feeding a runtime Gather.
    nz = helper.make_node("NonZero", ["c"], ["nz"])
    g = helper.make_node("Gather", ["x", "nz"], ["y0"], axis=1)
    graph = helper.make_graph(
        [nz, g], "g", [helper.make_tensor_value_info("x", 1, x.shape)],
        [helper.make_empty_tensor_value_info("y0")],
        initializer=[numpy_helper.from_array(c, "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    check(model, {"x": x})
    cond = np.array([True, False, True, True])
    for axis in (1, None):
        attrs = {} if axis is None else {"axis": axis}
        m = one_node("Compress", {"x": x}, {"cond": cond}, opset=11, **attrs)
        check(m, {"x": x})


def test_runtime_shape_inputs_are_named():
    x = rand(1, 1, 2, 2)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("MaxUnpool", ["x", "i", "sizes"], ["y"], kernel_shape=[2, 2],
                          strides=[2, 2])], "unpool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
         helper.make_tensor_value_info("i", TensorProto.INT64, list(x.shape)),
         helper.make_tensor_value_info("sizes", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    with pytest.raises(Exception, match=r"'sizes'\) is a run-time input of the graph"):
        kiln.onnx.compile(m.SerializeToString(), {"x": x.shape, "i": x.shape, "sizes": (4,)},
                          target=TARGET)


def test_top_k_by_a_run_time_k():
    # K given per run: every k from 0 to the axis' extent, largest and smallest, ties by index;
    # a K past the extent is named.
    x = np.round(rand(3, 7) * 2).astype(np.float32)  # ties
    for largest in (1, 0):
        m = one_node("TopK", {"x": x, "k": np.array([1], "int64")}, opset=11, n_out=2,
                     largest=largest)
        lib = kiln.onnx.compile(m.SerializeToString(), {"x": x.shape, "k": (1,)}, target=TARGET)
        assert lib.kind == "VMFactory"
        gm = GraphModule(lib["default"](kiln.cpu()))
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        for k in (3, 0, 7, 1, 3):
            feeds = {"x": x, "k": np.array([k], np.int64)}
            for name, v in feeds.items():
                gm.set_input(name, v)
            gm.run()
            got = [gm.get_output(i).numpy() for i in range(2)]
            want = sess.run(None, feeds)
            for g, w in zip(got, want):
                assert g.shape == w.shape == (3, k)
                np.testing.assert_array_equal(g, w)
        gm.set_input("k", np.array([8], np.int64))
        with pytest.raises(ValueError, match=r"do not fit the operator"):
            gm.run()


def test_tensor_scatter_random_write_positions():
    past = rand(3, 2, 7, 4)
    upd = rand(3, 2, 3, 4)
    for mode, hi in (("linear", 5), ("circular", 7)):
        w = rng.integers(0, hi, (3,)).astype("int64")
        inputs = {"past": past, "upd": upd, "w": w}
        check(one_node("TensorScatter", inputs, opset=24, mode=mode), inputs)


def test_topk_one_dimensional_with_infinities():
    x = rand(50)
    x[[3, 17, 40]] = [np.inf, -np.inf, -np.inf]
    for largest in (0, 1):
        m = one_node("TopK", {"x": x}, {"k": np.array([5], "int64")}, n_out=2, largest=largest)
        check(m, {"x": x})


def test_cumsum_long_axes_in_blocks():
    xi = rng.integers(-50, 50, (2, 100)).astype("int32")
    xf = rand(3, 300, 2)
    for x, axis in ((xi, 1), (xf, -2)):
        for exclusive, reverse in ((0, 0), (1, 1)):
            m = one_node("CumSum", {"x": x}, {"axis": np.array(axis, "int64")}, opset=14,
                         exclusive=exclusive, reverse=reverse)
            check(m, {"x": x}, rtol=1e-4, atol=1e-4)


def test_scatter_integer_data_reductions():
    data = rng.integers(-100, 100, (5, 6)).astype("int32")
    ix = rng.integers(0, 5, (4, 6)).astype("int64")
    upd = rng.integers(-100, 100, (4, 6)).astype("int32")
    inputs = {"data": data, "indices": ix, "updates": upd}
    for red in ("max", "min", "add"):
        check(one_node("ScatterElements", inputs, axis=0, reduction=red), inputs)
    ix = rng.integers(0, 5, (3, 1)).astype("int64")
    upd = rng.integers(-3, 3, (3, 6)).astype("int64")
    data = data.astype("int64")
    inputs = {"data": data, "indices": ix, "updates": upd}
    for red in ("none", "mul", "max"):
        check(one_node("ScatterND", inputs, reduction=red), inputs)


@pytest.mark.parametrize("op,inputs,attrs,message", [
    ("ScatterElements", {"d": (2, 3), "i": (1, 3), "u": (1, 3)}, {"reduction": "sum"},
     r"`reduction`"),
    ("BitShift", {"x": (3,), "y": (3,)}, {"direction": "UP"}, r"`direction`"),
    ("Einsum", {"x": (2, 3)}, {"equation": "ijk->i"}, r"`equation`"),
    ("Einsum", {"x": (2, 3)}, {"equation": "ij->k"}, r"label 'k'"),
    ("GatherND", {"d": (2, 3), "i": (4, 3)}, {}, r"index tuples of length 3"),
])
def test_bad_attributes_and_shapes_are_named(op, inputs, attrs, message):
    dtypes = {"i": "int64", "x": "uint8", "y": "uint8"} if op == "BitShift" else {"i": "int64"}
    feeds = {k: np.zeros(s, dtypes.get(k, "float32")) for k, s in inputs.items()}
    m = one_node(op, feeds, opset=18 if op != "Einsum" else 12, **attrs)
    with pytest.raises(Exception, match=message):
        kiln.onnx.compile(m.SerializeToString(), {k: v.shape for k, v in feeds.items()},
                          target=TARGET)


@pytest.mark.parametrize("time_axis", [0, 1])
def test_reverse_sequence_with_run_time_lengths(time_axis):
    rng = np.random.default_rng(time_axis)
    t, b = 6, 4
    shape = (t, b, 3) if time_axis == 0 else (b, t, 3)
    x = rng.standard_normal(shape).astype(np.float32)
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis,
                            batch_axis=1 - time_axis)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape),
        helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, [b])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    lib = kiln.onnx.compile(m, {"x": shape, "lens": (b,)})
    gm = GraphModule(lib["default"](kiln.cpu()))
    for _ in range(2):  # the lengths are read at run time: two different sets, one library
        lens = rng.integers(1, t + 1, b).astype(np.int64)
        gm.set_input("x", x)
        gm.set_input("lens", lens)
        gm.run()
        want = x.copy()
        for j, n in enumerate(lens):
            if time_axis == 0:
                want[:n, j] = x[:n, j][::-1]
            else:
                want[j, :n] = x[j, :n][::-1]
        np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


def test_pad_wrap():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    pads = [2, 5, 1, 6]  # wider than the axes: the wrap repeats
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(pads, np.int64), "pads")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    lib = kiln.onnx.compile(m, {"x": x.shape})
    gm = GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("x", x)
    gm.run()
    want = np.pad(x, [(2, 1), (5, 6)], mode="wrap")
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want)


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_with_k_known_at_run_time(upper):
    # One library, many k: the triangle is a mask of col - row against the k given each run,
    # including k past either edge; batch axes in front.
    rng = np.random.default_rng(upper)
    x = rng.standard_normal((2, 4, 6)).astype(np.float32)
    model = one_node("Trilu", {"x": x, "k": np.array(0, np.int64)}, upper=upper)
    lib = kiln.onnx.compile(model.SerializeToString(), {"x": x.shape, "k": ()}, target=TARGET)
    gm = GraphModule(lib["default"](kiln.cpu()))
    for k in (-7, -2, 0, 1, 3, 9):
        x = rng.standard_normal((2, 4, 6)).astype(np.float32)
        gm.set_input("x", x)
        gm.set_input("k", np.array(k, np.int64))
        gm.get_output(0).copyfrom(np.full(x.shape, np.nan, np.float32))  # poisoned
        gm.run()
        want = np.triu(x, k) if upper else np.tril(x, k)
        np.testing.assert_array_equal(gm.get_output(0).numpy(), want)
