"""ONNX Resize in full: every mode (nearest with each rounding, linear, cubic, antialias,
exclude_outside) times every coordinate transformation (tf_crop_and_resize with a region and an
extrapolation value) times up- and downsampling scales on 3-D, 4-D and 5-D inputs, plus sizes
with keep_aspect_ratio_policy, the `axes` attribute, integer inputs, Resize before opset 11 and
Upsample, and scales given at run time (an error naming them) or frozen at import. Each case is a one-node
model with scales/sizes/roi as initializers, compiled by Kiln and compared on fresh random inputs
(outputs poisoned first) with onnxruntime, or with ONNX's reference where onnxruntime refuses
the case or the two disagree: align_corners and tf_crop_and_resize with a fractional target
length (`scale * length`), which the reference, and so the ONNX backend test data, divides by
and onnxruntime rounds down first."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402


def resize_model(x, attrs, scales=None, sizes=None, roi=None, opset=19):
    """A one-node Resize model over input `x`, its scales/sizes/roi as initializers."""
    inits, names = [], ["x"]
    for name, value, dtype in (("roi", roi, "float32"), ("scales", scales, "float32"),
                               ("sizes", sizes, "int64")):
        if value is None:
            names.append("")
        else:
            inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
            names.append(name)
    while names[-1] == "":
        names.pop()
    node = helper.make_node("Resize", names, ["y"], **attrs)
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", elem, x.shape)],
        [helper.make_tensor_value_info("y", elem, [None] * x.ndim)], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def kiln_run(model, x, shape):
    """Kiln's output of `model` on `x`, into a poisoned buffer of `shape`."""
    lib = kiln.onnx.compile(model.SerializeToString(), target="llvm -mcpu=native")
    gm = GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("x", x)
    out = np.empty(shape, dtype=x.dtype)
    out.fill(np.nan if np.issubdtype(x.dtype, np.floating) else 77)
    gm.run()
    gm.get_output(0, out)
    return out


def reference(model, x, use_onnx_reference=False):
    """onnxruntime's output of `model` on `x`; ONNX's reference evaluator's where asked or where
    onnxruntime refuses the case (its linear and cubic modes resize only some axes of some
    ranks)."""
    if not use_onnx_reference:
        try:
            sess = ort.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
            return sess.run(None, {"x": x})[0]
        except Exception as e:  # noqa: BLE001
            if "ScalesValidation" not in str(e):
                raise
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


MODES = {
    "nearest_floor_half": dict(mode="nearest", nearest_mode="round_prefer_floor"),
    "nearest_ceil_half": dict(mode="nearest", nearest_mode="round_prefer_ceil"),
    "nearest_floor": dict(mode="nearest", nearest_mode="floor"),
    "nearest_ceil": dict(mode="nearest", nearest_mode="ceil"),
    "linear": dict(mode="linear"),
    "linear_antialias": dict(mode="linear", antialias=1),
    "cubic": dict(mode="cubic"),
    "cubic_a05_exclude": dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
    "cubic_antialias": dict(mode="cubic", antialias=1),
}
COORDS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
          "asymmetric", "tf_crop_and_resize"]
# (shape, scales): every axis may be resized, the leading ones included.
GEOMETRIES = {
    "up3d": ((2, 5, 4), [1.0, 1.7, 2.3]),
    "down3d": ((3, 11, 9), [1.0, 0.6, 0.37]),
    "up4d": ((1, 2, 5, 3), [2.0, 1.0, 1.5, 2.6]),
    "down4d": ((4, 3, 12, 10), [0.5, 1.0, 0.45, 0.8]),
    "up5d": ((1, 2, 3, 4, 3), [1.0, 1.5, 2.0, 1.25, 3.0]),
    "down5d": ((1, 2, 8, 9, 10), [1.0, 1.0, 0.5, 0.34, 0.75]),
    # NCHW with exact scales: the cases image.resize2d takes.
    "up_nchw": ((1, 2, 4, 5), [1.0, 1.0, 2.0, 3.0]),
    "down_nchw": ((2, 1, 8, 12), [1.0, 1.0, 0.5, 0.25]),
}


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_resize_scales(mode, coord, geometry):
    rng = np.random.default_rng()
    shape, scales = GEOMETRIES[geometry]
    x = rng.standard_normal(shape).astype("float32")
    attrs = dict(MODES[mode], coordinate_transformation_mode=coord)
    roi = None
    if coord == "tf_crop_and_resize":
        # A region reaching outside the input on some axes, so some positions extrapolate;
        # the whole of the unresized axes, which onnxruntime does not crop.
        resized = np.array(scales) != 1.0
        starts = np.where(resized, rng.uniform(-0.2, 0.4, len(shape)), 0.0)
        ends = np.where(resized, starts + rng.uniform(0.5, 0.9, len(shape)), 1.0)
        roi = np.concatenate([starts, ends])
        attrs["extrapolation_value"] = -3.5
    m = resize_model(x, attrs, scales=scales, roi=roi)
    fractional = any(float(np.float32(s) * n) % 1 for s, n in zip(scales, shape))
    divides_by_length = coord in ("align_corners", "tf_crop_and_resize")
    want = reference(m, x, use_onnx_reference=divides_by_length and fractional)
    got = kiln_run(m, x, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_sizes_axes_and_aspect_ratio(policy, mode):
    rng = np.random.default_rng()
    x = rng.standard_normal((2, 7, 3, 9)).astype("float32")
    attrs = dict(mode=mode, axes=[3, 1], keep_aspect_ratio_policy=policy)
    m = resize_model(x, attrs, sizes=[4, 12])
    want = reference(m, x)
    got = kiln_run(m, x, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["uint8", "int32"])
def test_resize_nearest_integers(dtype):
    rng = np.random.default_rng()
    x = rng.integers(0, 200, (2, 3, 5, 4)).astype(dtype)
    m = resize_model(x, dict(mode="nearest"), scales=[1.0, 1.0, 1.6, 0.7])
    want = reference(m, x)
    np.testing.assert_array_equal(kiln_run(m, x, want.shape), want)


def test_resize_linear_integer_is_an_error():
    x = np.zeros((1, 1, 4, 4), dtype="uint8")
    m = resize_model(x, dict(mode="linear"), scales=[1.0, 1.0, 2.0, 2.0])
    with pytest.raises(Exception, match="only nearest resizes integer tensors"):
        kiln.onnx.compile(m.SerializeToString(), target="llvm")


def test_resize_bad_attribute_is_named():
    x = np.zeros((1, 1, 4, 4), dtype="float32")
    m = resize_model(x, dict(mode="linear", coordinate_transformation_mode="sideways"),
                     scales=[1.0, 1.0, 2.0, 2.0])
    with pytest.raises(Exception, match="coordinate_transformation_mode"):
        kiln.onnx.compile(m.SerializeToString(), target="llvm")


def legacy_model(op, opset, mode, x, scales, scales_as_input=False):
    """An opset-`opset` `op` (Resize before opset 11, or Upsample) with `scales` as an
    initializer, or as a graph input when `scales_as_input`."""
    node = helper.make_node(op, ["x", "scales"], ["y"], mode=mode)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)]
    inits = [numpy_helper.from_array(np.asarray(scales, dtype="float32"), "scales")]
    if scales_as_input:
        inputs.append(helper.make_tensor_value_info("scales", TensorProto.FLOAT, [len(scales)]))
        inits = []
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


@pytest.mark.parametrize("scales", [[1, 1, 2.5, 1.5], [1, 1, 0.6, 0.4], [1, 2, 1.5, 1],
                                    [2, 1.5, 1]])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("op,opset", [("Resize", 10), ("Upsample", 9), ("Upsample", 7)])
def test_resize_before_opset_11(op, opset, mode, scales):
    if op == "Upsample" and min(scales) < 1:
        pytest.skip("Upsample only enlarges")
    rng = np.random.default_rng()
    x = rng.standard_normal((2, 3, 5, 7)[4 - len(scales):]).astype("float32")
    m = legacy_model(op, opset, mode, x, scales)
    if opset < 9:  # scales by attribute
        m.graph.node[0].input.pop()
        m.graph.node[0].attribute.append(helper.make_attribute("scales", scales))
        del m.graph.initializer[:]
    want = reference(m, x)
    np.testing.assert_allclose(kiln_run(m, x, want.shape), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,opset", [("Resize", 10), ("Upsample", 9)])
def test_resize_by_run_time_scales_before_opset_11(op, opset):
    # Scales given per run compile to one VM library; each run against onnxruntime.
    x0 = np.zeros((1, 2, 4, 6), dtype="float32")
    m = legacy_model(op, opset, "linear", x0, [1.0, 1.0, 2.0, 2.0], scales_as_input=True)
    lib = kiln.onnx.compile(m.SerializeToString(), target="llvm")
    assert lib.kind == "VMFactory"
    gm = GraphModule(lib["default"](kiln.cpu()))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng()
    for scales in ([1, 1, 2, 2], [1, 1, 1.5, 3], [1, 2, 2.5, 1]):
        feeds = {"x": rng.standard_normal(x0.shape).astype("float32"),
                 "scales": np.array(scales, "float32")}
        for k, v in feeds.items():
            gm.set_input(k, v)
        gm.run()
        want = sess.run(None, feeds)[0]
        got = gm.get_output(0).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_resize_frozen_scales():
    rng = np.random.default_rng()
    x = rng.standard_normal((1, 2, 4, 6)).astype("float32")
    scales = np.array([1.0, 1.0, 1.5, 0.5], dtype="float32")
    m = legacy_model("Resize", 10, "linear", x, scales, scales_as_input=True)
    lib = kiln.onnx.compile(m.SerializeToString(), target="llvm -mcpu=native",
                            frozen_inputs={"scales": scales})
    gm = GraphModule(lib["default"](kiln.cpu()))
    gm.set_input("x", x)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "scales": scales})[0]
    out = np.full(want.shape, np.nan, dtype="float32")
    gm.run()
    gm.get_output(0, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_wide_antialias(mode):
    """Strong downsampling with antialias: filters of 40 to 80 taps, gathered at once."""
    rng = np.random.default_rng()
    x = rng.standard_normal((1, 2, 120, 90)).astype("float32")
    m = resize_model(x, dict(mode=mode, antialias=1), scales=[1.0, 1.0, 0.05, 0.1])
    want = reference(m, x)
    np.testing.assert_allclose(kiln_run(m, x, want.shape), want, rtol=1e-4, atol=1e-5)
