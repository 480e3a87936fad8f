"""ONNX to deploy library from Python (issue 5, part 8): ``kiln.onnx.from_onnx`` ->
``kiln.graph.build`` -> ``export_library`` -> ``kiln.load_module`` -> ``GraphModule``, checked
against onnxruntime; the one-call ``kiln.onnx.compile``; the unsupported-operator error."""

import re

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

TARGET = "llvm"
IN_SHAPE = (1, 3, 8, 8)


def small_cnn(seed=0, symbolic_batch=False):
    """Conv+Relu+GlobalAveragePool+Flatten+Gemm+Softmax with seeded weights."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32") * 0.5
    b = rng.standard_normal(4).astype("float32") * 0.1
    fw = rng.standard_normal((5, 4)).astype("float32")
    fb = rng.standard_normal(5).astype("float32") * 0.1
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu0"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap0"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat0"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], name="fc0", transB=1),
        helper.make_node("Softmax", ["g"], ["y"], name="softmax0", axis=1),
    ]
    batch = "N" if symbolic_batch else IN_SHAPE[0]
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, *IN_SHAPE[1:]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 5])],
        initializer=[
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(b, "b"),
            numpy_helper.from_array(fw, "fw"),
            numpy_helper.from_array(fb, "fb"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def reference(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def run(lib, x):
    gm = GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("x", x)
    gm.run()
    return gm.get_output(0).numpy()


def test_from_onnx_build_export_run(tmp_path):
    model = small_cnn()
    mod, params = kiln.onnx.from_onnx(model, {"x": IN_SHAPE})
    assert set(params.keys()) == {"w", "b", "fw", "fb"}
    factory = kiln.graph.build(mod, TARGET, params)
    path = str(tmp_path / "deploy.so")
    factory.export_library(path)
    lib = kiln.load_module(path)
    gm = GraphModule(lib["default"](kiln.cpu()))
    rng = np.random.default_rng(1)
    for _ in range(2):  # outputs are fresh on every run
        x = rng.standard_normal(IN_SHAPE).astype("float32")
        gm.set_input("x", x)
        gm.run()
        out = gm.get_output(0).numpy()
        np.testing.assert_allclose(out, reference(model, x), rtol=1e-4, atol=1e-5)


def test_compile_one_call_matches(tmp_path):
    model = small_cnn()
    x = np.random.default_rng(2).standard_normal(IN_SHAPE).astype("float32")
    mod, params = kiln.onnx.from_onnx(model.SerializeToString())
    expected = run(kiln.graph.build(mod, TARGET, params), x)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    for src in (str(path), path, model):
        got = run(kiln.onnx.compile(src, target=TARGET), x)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(expected, reference(model, x), rtol=1e-4, atol=1e-5)


def test_compile_symbolic_shape_from_shape_dict():
    model = small_cnn(symbolic_batch=True)
    shape = (2, *IN_SHAPE[1:])
    x = np.random.default_rng(3).standard_normal(shape).astype("float32")
    got = run(kiln.onnx.compile(model, {"x": shape}, target=TARGET), x)
    np.testing.assert_allclose(got, reference(model, x), rtol=1e-4, atol=1e-5)


def test_unsupported_op_error():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu0"),
        helper.make_node("HardMax", ["a"], ["b"], name="hm0"),
        helper.make_node("HardMax", ["b"], ["c"], name="hm1"),
        helper.make_node("ImageDecoder", ["c"], ["y"], name="det0"),
    ]
    graph = helper.make_graph(
        nodes,
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ValueError) as info:
        kiln.onnx.from_onnx(model)
    msg = str(info.value)
    assert "2 unsupported operator type(s) in 3 node(s)" in msg, msg
    assert re.search(r"HardMax +2 node\(s\), first: 'hm0'", msg), msg
    assert re.search(r"ImageDecoder +1 node\(s\), first: 'det0'", msg), msg
    assert "Relu" not in msg, msg
    with pytest.raises(ValueError, match="HardMax"):
        kiln.onnx.compile(model, target=TARGET)


def test_garbage_model_error():
    with pytest.raises(Exception, match="."):
        kiln.onnx.from_onnx(b"\xff\x00not an onnx model" * 3)
    with pytest.raises(TypeError):
        kiln.onnx.from_onnx(12)


def test_bad_shape_dict_names_the_input():
    with pytest.raises(ValueError, match=r"shape_dict\['x'\] = \(1, 'n'\): a shape must be a sequence"):
        kiln.onnx.from_onnx(b"model bytes", shape_dict={"x": (1, "n")})
    with pytest.raises(TypeError, match=r"shape_dict\['y'\] = 3"):
        kiln.onnx.from_onnx(b"model bytes", shape_dict={"y": 3})


def test_question_mark_dims_are_independent_unknowns():
    # Exporters write "?" for sizes they know nothing of: each is its own unknown.
    x = np.random.default_rng().standard_normal((1, 3, 48, 192)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "qdims",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["?", 3, "?", "?"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["?", 3, "?", "?"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    lib = kiln.onnx.compile(model.SerializeToString(), {"x": x.shape}, target=TARGET)
    np.testing.assert_array_equal(run(lib, x), np.maximum(x, 0))


def test_frozen_inputs_fix_shape_inputs_at_import():
    # `shape` is a run-time input whose value decides the output's shape: refused with an error
    # naming it, then compiled with it frozen to a value, which must be of its declared type.
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    graph = helper.make_graph(
        nodes, "reshape_by_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    # Left to run time, the shape makes the model a VM program (a view by the shape given).
    assert kiln.onnx.compile(model).kind == "VMFactory"
    # An operator with no kernel for a run-time shape (MaxUnpool by its output_shape) is
    # refused, naming the input.
    unpool = helper.make_model(helper.make_graph(
        [helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2],
                          strides=[2, 2])], "unpool_by_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [1, 1, 2, 2]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    unpool.ir_version = 8
    with pytest.raises(ValueError, match=r"'shape'\) is a run-time input of the graph"):
        kiln.onnx.compile(unpool)
    with pytest.raises(ValueError, match="frozen input 'shape' is declared"):
        kiln.onnx.compile(model, frozen_inputs={"shape": np.array([4, 6], dtype="int32")})
    with pytest.raises(ValueError, match="'nope' is not a run-time input"):
        kiln.onnx.compile(model, frozen_inputs={"nope": np.array([4, 6], dtype="int64")})
    shape = np.array([4, 6], dtype="int64")
    lib = kiln.onnx.compile(model, frozen_inputs={"shape": shape})
    gm = GraphModule(lib["default"](kiln.cpu()))
    assert gm.get_num_inputs() == 1
    x = np.random.default_rng().standard_normal((2, 3, 4)).astype("float32")
    gm.set_input("x", x)
    out = np.full((4, 6), np.nan, dtype="float32")
    gm.run()
    gm.get_output(0, out)
    np.testing.assert_array_equal(out, np.maximum(x.reshape(4, 6), 0))


def test_shape_computed_from_an_input_names_that_input():
    # MaxUnpool's output_shape is `Abs(s)` with `s` a run-time input: the error names `s`,
    # and freezing `s` compiles the model.
    nodes = [helper.make_node("Abs", ["s"], ["shape"]),
             helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2],
                              strides=[2, 2])]
    graph = helper.make_graph(
        nodes, "computed_shape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 2]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [1, 2, 2, 2]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    with pytest.raises(ValueError, match=r"computed at run time from the graph's run-time "
                                         r"input\(s\) 's'"):
        kiln.onnx.compile(model)
    lib = kiln.onnx.compile(model, frozen_inputs={"s": np.array([1, 2, 4, 5], dtype="int64")})
    gm = GraphModule(lib["default"](kiln.cpu()))
    rng = np.random.default_rng()
    x = rng.standard_normal((1, 2, 2, 2)).astype("float32")
    # Each value to a distinct place of its channel's 4 x 5 plane (indices into the whole
    # output, as MaxPool gives them).
    i = np.stack([c * 20 + rng.permutation(20)[:4] for c in range(2)]).reshape(1, 2, 2, 2)
    gm.set_input("x", x)
    gm.set_input("i", i.astype("int64"))
    gm.run()
    want = np.zeros(40, np.float32)
    want[i.ravel()] = x.ravel()
    np.testing.assert_array_equal(gm.get_output(0).numpy(), want.reshape(1, 2, 4, 5))
