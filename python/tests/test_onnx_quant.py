"""ONNX quantization through Kiln, checked against onnxruntime on random inputs:
QuantizeLinear/DequantizeLinear (per tensor, per axis, blocked; every integer type; rounding
half to even and saturation), a dynamically quantized CNN (DynamicQuantizeLinear, ConvInteger,
MatMulInteger), a QDQ model (QuantizeLinear/DequantizeLinear around Conv and MatMul with
per-channel weights), QLinearConv/QLinearMatMul with per-channel weight parameters, and the
errors for element types Kiln lacks."""

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

from host_cpu import host_flags  # noqa: E402
from onnx_run import run_kiln  # noqa: E402

TARGET = "llvm"
ONNX_TYPE = {
    np.dtype("int8"): TensorProto.INT8,
    np.dtype("uint8"): TensorProto.UINT8,
    np.dtype("int16"): TensorProto.INT16,
    np.dtype("uint16"): TensorProto.UINT16,
    np.dtype("int32"): TensorProto.INT32,
    np.dtype("float32"): TensorProto.FLOAT,
}


def model_of(nodes, inputs, outputs, inits, opset):
    """A checked model: ``inputs``/``outputs`` are ``(name, dtype, shape)``."""
    def info(name, dtype, shape):
        return helper.make_tensor_value_info(name, ONNX_TYPE[np.dtype(dtype)], shape)

    graph = helper.make_graph(
        nodes,
        "quant",
        [info(*i) for i in inputs],
        [info(*o) for o in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def run_ort(model, feeds, optimize=True):
    opts = ort.SessionOptions()
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(
        model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    return sess.run(None, feeds)


def qrange(dtype):
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def random_q(rng, shape, dtype):
    lo, hi = qrange(dtype)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def weight_q(rng, shape, dtype):
    """Random quantized weights that meet uint8 activations. int8 ones stay within 7 bits:
    onnxruntime's AVX2 kernels (no VNNI) multiply uint8 by int8 in pairs summed in int16, which
    saturate beyond that (its `reduce_range`), so a full-range reference is exact only on some
    CPUs; Kiln is exact either way (checked against numpy where the range is full)."""
    if np.dtype(dtype) == np.int8:
        return rng.integers(-64, 64, size=shape).astype(dtype)
    return random_q(rng, shape, dtype)


# ---- QuantizeLinear / DequantizeLinear ---------------------------------------------------


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
@pytest.mark.parametrize("layout", ["tensor", "axis", "blocked"])
def test_quantize_dequantize_match_onnxruntime(dtype, layout):
    rng = np.random.default_rng(10)
    shape = (3, 7, 5)
    lo, hi = qrange(dtype)
    if layout == "tensor":
        pshape, attrs = (), {}
    elif layout == "axis":
        pshape, attrs = (7,), {"axis": -2}
    else:
        pshape, attrs = (3, 3, 5), {"axis": 1, "block_size": 3}  # last block is partial
    # Power-of-two scales make x / scale exact, so the ties below are real ties.
    scale = (2.0 ** rng.integers(-4, 2, size=pshape)).astype("float32")
    zp = rng.integers(lo // 4, hi // 4 + 1, size=pshape).astype(dtype)
    span = (hi - lo) * float(scale.max())
    x = rng.uniform(-1.5 * span, 1.5 * span, size=shape).astype("float32")  # saturates
    # Every third element an exact tie (k + 1/2 steps of its smallest possible scale).
    ties = rng.integers(-2 * (hi - lo), 2 * (hi - lo), size=x.size)[::3] + 0.5
    x.flat[::3] = (ties * float(scale.min())).astype("float32")
    q_model = model_of(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)],
        [("x", "float32", shape)],
        [("y", dtype, shape)],
        {"s": scale, "z": zp},
        21,
    )
    got = run_kiln(q_model, {"x": x})[0]
    want = run_ort(q_model, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert got.min() == lo and got.max() == hi  # both ends saturated

    q = random_q(rng, shape, dtype)
    dq_model = model_of(
        [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **attrs)],
        [("q", dtype, shape)],
        [("y", "float32", shape)],
        {"s": scale, "z": zp},
        21,
    )
    np.testing.assert_array_equal(run_kiln(dq_model, {"q": q})[0], run_ort(dq_model, {"q": q})[0])


def test_quantize_default_uint8_and_int32_dequantize():
    """No zero point: QuantizeLinear gives uint8; DequantizeLinear reads int32 (a bias)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 6)).astype("float32") * 30
    b = rng.integers(-(2**30), 2**30, size=(4, 6)).astype("int32")
    model = model_of(
        [
            helper.make_node("QuantizeLinear", ["x", "s"], ["y"]),
            helper.make_node("DequantizeLinear", ["b", "bs"], ["bf"]),
        ],
        [("x", "float32", x.shape), ("b", "int32", b.shape)],
        [("y", "uint8", x.shape), ("bf", "float32", b.shape)],
        {"s": np.float32(0.37), "bs": np.float32(1e-4)},
        13,
    )
    got, want = run_kiln(model, {"x": x, "b": b}), run_ort(model, {"x": x, "b": b})
    assert got[0].dtype == np.uint8
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize(
    "x_type, opset, precision",
    [("float16", 21, None), ("float32", 24, TensorProto.FLOAT16), ("float16", 24, TensorProto.FLOAT)],
)
def test_quantize_divides_in_the_reference_precision(x_type, opset, precision):
    """float16 inputs divide in float16 (numpy's promotion, as the ONNX reference does), and
    opset 23+ ``precision`` picks the type; onnxruntime ignores ``precision``, so the ONNX
    reference evaluator is the reference here."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(18)
    x = (rng.standard_normal((4, 50)) * 20).astype(x_type)
    attrs = {"precision": precision} if precision else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)]
    graph = helper.make_graph(
        nodes, "q",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, x.shape)],
        initializer=[numpy_helper.from_array(np.array(0.1, x_type), "s"),
                     numpy_helper.from_array(np.int8(3), "z")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(run_kiln(model, {"x": x})[0], want)


def test_dynamic_quantize_linear_matches_onnxruntime():
    rng = np.random.default_rng(12)
    for x in (
        rng.standard_normal((3, 17)).astype("float32") * 4,
        rng.uniform(0.5, 3.0, size=(5, 4)).astype("float32"),  # all positive: min is 0
        -rng.uniform(0.5, 3.0, size=(5, 4)).astype("float32"),  # all negative: max is 0
    ):
        model = model_of(
            [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
            [("x", "float32", x.shape)],
            [("y", "uint8", x.shape), ("s", "float32", []), ("z", "uint8", [])],
            {},
            11,
        )
        got, want = run_kiln(model, {"x": x}), run_ort(model, {"x": x})
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


# ---- a dynamically quantized CNN ---------------------------------------------------------


def dynamic_cnn(rng):
    """DynamicQuantizeLinear -> ConvInteger (zero points) -> Cast -> Mul by scales -> Relu, twice,
    then Flatten -> DynamicQuantizeLinear -> MatMulInteger classifier. Outputs: the logits and
    the quantized activations and their scales and zero points, stage by stage."""
    w1 = rng.integers(0, 256, size=(8, 3, 3, 3)).astype("uint8")
    w2 = rng.integers(0, 256, size=(6, 8, 3, 3)).astype("uint8")
    w3 = weight_q(rng, (6 * 5 * 5, 10), "int8")
    inits = {
        "w1": w1, "w1z": np.uint8(131), "w1s": np.float32(0.02), "b1": rng.standard_normal(
            (8, 1, 1)).astype("float32") * 0.1,
        "w2": w2, "w2z": np.uint8(120), "w2s": np.float32(0.01),
        "w3": w3, "w3z": np.int8(3), "w3s": np.float32(0.005),
        "flat": np.array([0, -1], dtype="int64"),
    }
    n = helper.make_node
    nodes = [
        n("DynamicQuantizeLinear", ["x"], ["q1", "s1", "z1"]),
        n("ConvInteger", ["q1", "w1", "z1", "w1z"], ["c1"], pads=[1, 1, 1, 1]),
        n("Cast", ["c1"], ["c1f"], to=TensorProto.FLOAT),
        n("Mul", ["s1", "w1s"], ["m1"]),
        n("Mul", ["c1f", "m1"], ["d1"]),
        n("Add", ["d1", "b1"], ["e1"]),
        n("Relu", ["e1"], ["h1"]),
        n("DynamicQuantizeLinear", ["h1"], ["q2", "s2", "z2"]),
        n("ConvInteger", ["q2", "w2", "z2", "w2z"], ["c2"], strides=[2, 2]),
        n("Cast", ["c2"], ["c2f"], to=TensorProto.FLOAT),
        n("Mul", ["s2", "w2s"], ["m2"]),
        n("Mul", ["c2f", "m2"], ["d2"]),
        n("Relu", ["d2"], ["h2"]),
        n("Reshape", ["h2", "flat"], ["f"]),
        n("DynamicQuantizeLinear", ["f"], ["q3", "s3", "z3"]),
        n("MatMulInteger", ["q3", "w3", "z3", "w3z"], ["c3"]),
        n("Cast", ["c3"], ["c3f"], to=TensorProto.FLOAT),
        n("Mul", ["s3", "w3s"], ["m3"]),
        n("Mul", ["c3f", "m3"], ["y"]),
    ]
    outs = [("y", "float32", [2, 10]), ("q2", "uint8", [2, 8, 12, 12]),
            ("q3", "uint8", [2, 150]), ("s3", "float32", []), ("z3", "uint8", [])]
    return model_of(nodes, [("x", "float32", [2, 3, 12, 12])], outs, inits, 13), w3


@pytest.mark.parametrize("target", [TARGET, "llvm -mcpu=native"])
def test_dynamically_quantized_cnn_matches_onnxruntime(target):
    """The generic CPU and the host (whose integer products use dot products where it has
    VNNI, with the run-time zero points of DynamicQuantizeLinear)."""
    rng = np.random.default_rng(13)
    model, w3 = dynamic_cnn(rng)
    for _ in range(3):
        x = rng.standard_normal((2, 3, 12, 12)).astype("float32")
        (y, q2, q3, s3, z3), (y_o, q2_o, q3_o, s3_o, z3_o) = (
            run_kiln(model, {"x": x}, target=target), run_ort(model, {"x": x}))
        # Each float intermediate is one IEEE operation in both engines, but LLVM may contract
        # the Mul and Add into one fused multiply-add: a value within an ulp of a .5 boundary
        # then rounds to the neighbouring step. Allow one step, rarely.
        for got, want in ((q2, q2_o), (q3, q3_o)):
            diff = np.abs(got.astype(int) - want.astype(int))
            assert diff.max() <= 1 and np.mean(diff) < 0.01, (diff.max(), np.mean(diff))
        np.testing.assert_allclose(s3, s3_o, rtol=1e-6)
        assert z3 == z3_o
        # The classifier exactly, from Kiln's own quantized activations (numpy, int32).
        acc = (q3.astype(np.int32) - np.int32(z3)) @ (w3.astype(np.int32) - 3)
        np.testing.assert_allclose(y, acc.astype("float32") * (s3 * np.float32(0.005)),
                                   rtol=1e-6)
        # Against onnxruntime: exact up to the effect of the flipped activation steps.
        flips = np.abs(q3.astype(np.int32) - q3_o.astype(np.int32))
        bound = (flips @ np.abs(w3.astype(np.int32) - 3)) * float(s3_o) * 0.005
        assert np.all(np.abs(y - y_o) <= bound + 1e-5 * np.abs(y_o) + 1e-6)


# ---- a QDQ model -------------------------------------------------------------------------


def qdq_model(rng):
    """QuantizeLinear/DequantizeLinear around a Conv (int8 weights per output channel) and a
    MatMul (float weights quantized per output column at run time). Outputs the quantized
    activations of both stages."""
    w1 = rng.integers(-127, 128, size=(8, 3, 3, 3)).astype("int8")
    w1s = rng.uniform(0.005, 0.02, size=8).astype("float32")
    wm = rng.standard_normal((8 * 6 * 6, 10)).astype("float32") * 0.1
    wms = (np.abs(wm).max(axis=0) / 127).astype("float32")
    inits = {
        "xs": np.float32(0.03), "xz": np.uint8(128),
        "w1": w1, "w1s": w1s, "w1z": np.zeros(8, "int8"),
        "b1": rng.standard_normal(8).astype("float32") * 0.1,
        "hs": np.float32(0.02), "hz": np.uint8(10),
        "wm": wm, "wms": wms, "wmz": np.zeros(10, "int8"),
        "ys": np.float32(0.05), "yz": np.uint8(100),
        "flat": np.array([0, -1], dtype="int64"),
    }
    n = helper.make_node
    nodes = [
        n("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        n("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        n("DequantizeLinear", ["w1", "w1s", "w1z"], ["w1d"], axis=0),
        n("Conv", ["xd", "w1d", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"]),
        n("QuantizeLinear", ["r1", "hs", "hz"], ["hq"]),
        n("DequantizeLinear", ["hq", "hs", "hz"], ["hd"]),
        n("Reshape", ["hd", "flat"], ["f"]),
        n("QuantizeLinear", ["wm", "wms", "wmz"], ["wmq"], axis=1),
        n("DequantizeLinear", ["wmq", "wms", "wmz"], ["wmd"], axis=1),
        n("MatMul", ["f", "wmd"], ["m"]),
        n("QuantizeLinear", ["m", "ys", "yz"], ["yq"]),
        n("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    outs = [("y", "float32", [2, 10]), ("hq", "uint8", [2, 8, 6, 6]), ("yq", "uint8", [2, 10])]
    return model_of(nodes, [("x", "float32", [2, 3, 12, 12])], outs, inits, 13), inits


def test_qdq_model_matches_onnxruntime():
    rng = np.random.default_rng(14)
    model, p = qdq_model(rng)
    wmq = np.clip(np.round(p["wm"] / p["wms"]), -128, 127)
    wmd = (wmq * p["wms"]).astype("float32")
    for _ in range(3):
        x = (rng.standard_normal((2, 3, 12, 12)) * 2).astype("float32")
        y, hq, yq = run_kiln(model, {"x": x})
        # onnxruntime unoptimized computes the float graph as written (optimized, it rewrites
        # QDQ pairs into integer kernels that round differently). The float convolution and
        # matrix product sum in another order than Kiln's, so a quantized activation within
        # an ulp of a .5 boundary may round to the neighbouring step: allow one step, rarely.
        y_o, hq_o, yq_o = run_ort(model, {"x": x}, optimize=False)
        diff = np.abs(hq.astype(int) - hq_o.astype(int))
        assert diff.max() <= 1 and np.mean(diff) < 0.01, (diff.max(), np.mean(diff))
        # The second stage from Kiln's own activations (numpy float64), to the same one step.
        hd = (hq.astype(np.float64) - 10) * 0.02
        m = hd.reshape(2, -1) @ wmd.astype(np.float64)
        yq_ref = np.clip(np.round(m / np.float32(0.05)) + 100, 0, 255)
        assert np.abs(yq.astype(int) - yq_ref).max() <= 1
        if diff.max() == 0:
            assert np.abs(yq.astype(int) - yq_o.astype(int)).max() <= 1
        np.testing.assert_allclose(y, (yq.astype("float32") - 100) * np.float32(0.05))


# ---- QLinearConv / QLinearMatMul / ConvInteger / MatMulInteger directly -----------------


@pytest.mark.parametrize("w_type", ["int8", "uint8"])
def test_qlinear_conv_per_channel_matches_onnxruntime(w_type):
    """Per-channel weight scales; int8 weights symmetric, uint8 ones with a zero point per
    output channel."""
    rng = np.random.default_rng(15)
    x = random_q(rng, (2, 4, 9, 9), "uint8")
    wz = np.zeros(6, w_type) if w_type == "int8" else rng.integers(100, 150, 6).astype(w_type)
    inits = {
        "xs": np.float32(0.05), "xz": np.uint8(120),
        "w": weight_q(rng, (6, 2, 3, 3), w_type),
        "ws": rng.uniform(0.01, 0.03, size=6).astype("float32"), "wz": wz,
        "ys": np.float32(0.4), "yz": np.uint8(60),
        "b": rng.integers(-2000, 2000, size=6).astype("int32"),
    }
    model = model_of(
        [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                          ["y"], pads=[1, 0, 1, 2], strides=[2, 1], group=2)],
        [("x", "uint8", x.shape)], [("y", "uint8", [2, 6, 5, 9])], inits, 10)
    got, want = run_kiln(model, {"x": x})[0], run_ort(model, {"x": x})[0]
    # Requantization multiplies the exact int32 sum by one float32 multiplier in both; ORT's
    # kernels may fold the multiply differently (a fused multiply-add), hence one step.
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= 1 and np.mean(diff) < 0.01


def test_qlinear_matmul_per_column_matches_onnxruntime():
    rng = np.random.default_rng(16)
    a = random_q(rng, (3, 5, 40), "int8")
    inits = {
        "as": np.float32(0.02), "az": np.int8(-3),
        "b": random_q(rng, (40, 7), "int8"),
        "bs": rng.uniform(0.01, 0.03, size=7).astype("float32"), "bz": np.zeros(7, "int8"),
        "ys": np.float32(0.3), "yz": np.int8(5),
    }
    model = model_of(
        [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
        [("a", "int8", a.shape)], [("y", "int8", [3, 5, 7])], inits, 10)
    got, want = run_kiln(model, {"a": a})[0], run_ort(model, {"a": a})[0]
    diff = np.abs(got.astype(int) - want.astype(int))  # one step: see the QLinearConv test
    assert diff.max() <= 1 and np.mean(diff) < 0.01


def test_qlinear_matmul_per_row_and_column_matches_numpy():
    """Scales and zero points per row of ``a`` and per column of ``b`` (onnxruntime reads
    only one zero point for ``a``): numpy float32 arithmetic in the same order is exact."""
    rng = np.random.default_rng(19)
    a = random_q(rng, (3, 5, 40), "uint8")
    p = {
        "as": rng.uniform(0.01, 0.03, size=5).astype("float32"),
        "az": rng.integers(100, 150, size=5).astype("uint8"),
        "b": random_q(rng, (40, 7), "uint8"),
        "bs": rng.uniform(0.01, 0.03, size=7).astype("float32"),
        "bz": rng.integers(100, 150, size=7).astype("uint8"),
        "ys": np.float32(0.3), "yz": np.uint8(5),
    }
    model = model_of(
        [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
        [("a", "uint8", a.shape)], [("y", "uint8", [3, 5, 7])], p, 10)
    acc = (a.astype(np.int64) - p["az"][:, None]) @ (p["b"].astype(np.int64) - p["bz"])
    mult = (p["as"][:, None] * p["bs"]) / p["ys"]
    want = np.clip(np.rint(acc.astype("float32") * mult) + 5, 0, 255)
    np.testing.assert_array_equal(run_kiln(model, {"a": a})[0], want)


def test_integer_conv_and_matmul_are_exact():
    """int32 results: exact against onnxruntime (ConvInteger, and a float Conv for a zero point
    per filter) and numpy (MatMulInteger with a per-column zero point, which onnxruntime also
    reads)."""
    rng = np.random.default_rng(17)
    x = random_q(rng, (1, 16, 10, 10), "uint8")
    w = random_q(rng, (24, 16, 3, 3), "uint8")
    model = model_of(
        [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])],
        [("x", "uint8", x.shape)], [("y", "int32", [1, 24, 10, 10])],
        {"w": w, "xz": np.uint8(17), "wz": np.uint8(140)}, 10)
    np.testing.assert_array_equal(run_kiln(model, {"x": x})[0], run_ort(model, {"x": x})[0])
    # A zero point per filter (onnxruntime's ConvInteger reads one): a float32 Conv of the
    # centered values is exact (every partial sum is below 2**24).
    wz = rng.integers(100, 150, size=24).astype("uint8")
    model = model_of(
        [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], strides=[2, 2])],
        [("x", "uint8", x.shape)], [("y", "int32", [1, 24, 4, 4])],
        {"w": w, "xz": np.uint8(17), "wz": wz}, 10)
    conv = model_of(
        [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2])],
        [("x", "float32", x.shape)], [("y", "float32", [1, 24, 4, 4])],
        {"w": w.astype("float32") - wz.astype("float32")[:, None, None, None]}, 11)
    want = run_ort(conv, {"x": x.astype("float32") - 17})[0]
    np.testing.assert_array_equal(run_kiln(model, {"x": x})[0], want.astype("int32"))

    a = random_q(rng, (2, 33, 64), "uint8")
    b = random_q(rng, (64, 48), "int8")
    bz = rng.integers(-5, 5, size=48).astype("int8")
    model = model_of(
        [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
        [("a", "uint8", a.shape)], [("y", "int32", [2, 33, 48])],
        {"b": b, "az": np.uint8(200), "bz": bz}, 10)
    got = run_kiln(model, {"a": a})[0]
    want = (a.astype(np.int64) - 200) @ (b.astype(np.int64) - bz.astype(np.int64))
    np.testing.assert_array_equal(got, want)
    # onnxruntime as a second reference on 7-bit weights (see weight_q).
    b7 = weight_q(rng, (64, 48), "int8")
    model = model_of(
        [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
        [("a", "uint8", a.shape)], [("y", "int32", [2, 33, 48])],
        {"b": b7, "az": np.uint8(200), "bz": bz}, 10)
    np.testing.assert_array_equal(run_kiln(model, {"a": a})[0], run_ort(model, {"a": a})[0])


# ---- errors ------------------------------------------------------------------------------


def test_missing_element_types_are_named():
    x = ("x", "float32", [4])
    model = model_of(
        [helper.make_node("QuantizeLinear", ["x", "s"], ["y"],
                          output_dtype=TensorProto.FLOAT6E2M3)],
        [x], [("y", "uint8", [4])], {"s": np.float32(1.0)}, 21)
    with pytest.raises(ValueError, match="FLOAT6E2M3"):
        kiln.onnx.from_onnx(model)
    model = model_of(
        [helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.COMPLEX64)],
        [x], [("y", "uint8", [4])], {"s": np.float32(1.0)}, 21)
    with pytest.raises(ValueError, match="COMPLEX64"):
        kiln.onnx.from_onnx(model)


def test_bad_parameter_shape_is_named():
    model = model_of(
        [helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1)],
        [("x", "float32", [2, 3])], [("y", "uint8", [2, 3])],
        {"s": np.ones(4, "float32")}, 13)
    with pytest.raises(ValueError, match="y_scale"):
        kiln.onnx.from_onnx(model)


# ---- weight-only quantization ------------------------------------------------------------


@pytest.mark.parametrize("form", ["cast_mul", "dequantize_uint8_zero_point", "gemm_trans_b"])
def test_weight_only_8_bit_products_keep_8_bit_weights(form, tmp_path):
    """A float product by 8-bit weights dequantized in the graph (Cast and Mul with column
    scales; DequantizeLinear of uint8 weights with a zero point per column; Gemm with transB
    over a DequantizeLinear along axis 0) matches numpy in float64 and onnxruntime (unoptimized:
    optimized, it quantizes the activations of a DequantizeLinear-MatMul pair to 8 bits), and the
    library holds the weights in 8 bits: it is smaller than the float32 weights alone would be."""
    rng = np.random.default_rng()
    k, n = 320, 288
    scale = (rng.random(n) * 0.02 + 0.001).astype("float32")
    inputs = [("x", "float32", [2, 7, k])]
    outputs = [("y", "float32", [2, 7, n])]
    if form == "cast_mul":
        q = random_q(rng, (k, n), "int8")
        nodes = [
            helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["qf", "s"], ["w"]),
            helper.make_node("MatMul", ["x", "w"], ["y"]),
        ]
        inits = {"q": q, "s": scale}
        w = q.astype(np.float64) * scale
    elif form == "dequantize_uint8_zero_point":
        q = random_q(rng, (k, n), "uint8")
        zp = np.full(n, 128, "uint8")
        nodes = [
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"], axis=1),
            helper.make_node("MatMul", ["x", "w"], ["y"]),
        ]
        inits = {"q": q, "s": scale, "z": zp}
        w = (q.astype(np.float64) - 128) * scale
    else:
        q = random_q(rng, (n, k), "int8")
        inputs = [("x", "float32", [5, k])]
        outputs = [("y", "float32", [5, n])]
        nodes = [
            helper.make_node("DequantizeLinear", ["q", "s"], ["w"], axis=0),
            helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1),
        ]
        bias = rng.standard_normal(n).astype("float32")
        inits = {"q": q, "s": scale, "b": bias}
        w = (q.astype(np.float64) * scale[:, None]).T
    model = model_of(nodes, inputs, outputs, inits, 21)
    lib = kiln.onnx.compile(model.SerializeToString(), target="llvm -mcpu=native")
    path = tmp_path / "weight_only.so"
    lib.export_library(str(path))
    assert path.stat().st_size < k * n * 4, (path.stat().st_size, k * n * 4)
    for _ in range(2):
        x = rng.standard_normal(inputs[0][2]).astype("float32")
        (y,) = run_kiln(model, {"x": x}, target="llvm -mcpu=native")
        want = x.astype(np.float64) @ w + (bias if form == "gemm_trans_b" else 0)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        (y_o,) = run_ort(model, {"x": x}, optimize=False)
        np.testing.assert_allclose(y, y_o, rtol=1e-4, atol=1e-4)


# ---- integer dot products ----------------------------------------------------------------


def _host_has_dot4():
    flags = host_flags()
    return "avx512_vnni" in flags or "avx_vnni" in flags


def _asm_of(lib):
    """The assembly of every LLVM module a compiled library holds."""
    out, todo = [], [lib]
    while todo:
        m = todo.pop()
        todo.extend(m.imports)
        try:
            out.append(m.inspect_source("asm"))
        except Exception:  # modules without assembly (the graph executor factory)
            pass
    return "\n".join(out)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64-v3", "llvm -mcpu=native"])
@pytest.mark.parametrize("a_type", ["uint8", "int8"])
def test_integer_matmul_dot_products_are_exact(target, a_type):
    """MatMulInteger and QLinearMatMul by constant int8 weights (zero points per tensor, per row
    and per column, run-time or constant; K not a multiple of 4; batch axes): exact against
    numpy on every target; where the target has a four-byte dot product (VNNI), the product is
    `vpdpbusd`."""
    rng = np.random.default_rng()
    for m, k, n, batch in [(7, 64, 48, None), (5, 30, 70, 3), (33, 257, 96, None)]:
        ashape = [m, k] if batch is None else [batch, m, k]
        oshape = ashape[:-1] + [n]
        a = random_q(rng, ashape, a_type)
        b = random_q(rng, (k, n), "int8")
        az = np.array(rng.integers(*qrange(a_type)), a_type)
        bz = rng.integers(-3, 4, size=n).astype("int8")
        model = model_of(
            [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
            [("a", a_type, ashape), ("az", a_type, [])], [("y", "int32", oshape)],
            {"b": b, "bz": bz}, 10)
        lib = kiln.onnx.compile(model.SerializeToString(), target=target)
        gm = kiln.graph_executor.GraphModule(lib["default"](kiln.cpu()))
        gm.set_input("a", a)
        gm.set_input("az", az)
        got = np.full(oshape, -7, "int32")
        gm.run()
        gm.get_output(0, got)
        want = (a.astype(np.int64) - int(az)) @ (b.astype(np.int64) - bz.astype(np.int64))
        np.testing.assert_array_equal(got, want)
        if target == "llvm -mcpu=native" and _host_has_dot4():
            assert "vpdpbusd" in _asm_of(lib)
    # QLinearMatMul: int32 products requantized, against numpy's float64 requantization.
    a = random_q(rng, (9, 40), a_type)
    b = random_q(rng, (40, 24), "int8")
    a_s, b_s, y_s = np.float32(0.05), (rng.random(24) * 0.02 + 0.01).astype("float32"), np.float32(0.4)
    az = np.array(3, a_type)
    yz = np.uint8(120)
    model = model_of(
        [helper.make_node("QLinearMatMul",
                          ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
        [("a", a_type, [9, 40])], [("y", "uint8", [9, 24])],
        {"as": a_s, "az": az, "b": b, "bs": b_s, "bz": np.zeros(24, "int8"), "ys": y_s,
         "yz": yz}, 10)
    (got,) = run_kiln(model, {"a": a}, target=target)
    acc = (a.astype(np.int64) - 3) @ b.astype(np.int64)
    want = np.clip(np.round(acc * ((a_s * b_s) / y_s).astype(np.float32)) + 120, 0, 255)
    assert np.abs(got.astype(int) - want).max() <= 1


def _conv_ref(x, w, pads, strides, dilations):
    """A naive NCHW convolution in int64 (x and w already centered), zero padding."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh = (xp.shape[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (xp.shape[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            ys, xs = ky * dilations[0], kx * dilations[1]
            patch = xp[:, :, ys:ys + strides[0] * oh:strides[0], xs:xs + strides[1] * ow:strides[1]]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
    return out


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=native"])
@pytest.mark.parametrize("x_type", ["uint8", "int8"])
def test_integer_conv_dot_products_are_exact(target, x_type):
    """ConvInteger by constant weights (a stem of 3 channels, 3x3 with padding, stride 2 with
    dilation, 1x1; a zero point per tensor given at run time, weights centered per filter;
    batch 2): exact against a naive int64 convolution on every target; where the target has a
    four-byte dot product (VNNI), the convolution is `vpdpbusd` products over patches."""
    rng = np.random.default_rng()
    cases = [
        (3, 16, 9, 11, 3, [1, 1, 1, 1], [1, 1], [1, 1]),
        (8, 24, 12, 12, 3, [2, 1, 0, 2], [2, 2], [2, 1]),
        (32, 40, 6, 5, 1, [0, 0, 0, 0], [1, 1], [1, 1]),
    ]
    for c, o, h, w, k, pads, strides, dil in cases:
        x = random_q(rng, (2, c, h, w), x_type)
        wt = random_q(rng, (o, c, k, k), "int8")
        xz = np.array(rng.integers(*qrange(x_type)), x_type)
        wz = rng.integers(-3, 4, size=o).astype("int8")
        want = _conv_ref(x.astype(np.int64) - int(xz),
                         wt.astype(np.int64) - wz.astype(np.int64)[:, None, None, None],
                         pads, strides, dil)
        model = model_of(
            [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=pads,
                              strides=strides, dilations=dil)],
            [("x", x_type, x.shape), ("xz", x_type, [])], [("y", "int32", want.shape)],
            {"w": wt, "wz": wz}, 10)
        lib = kiln.onnx.compile(model.SerializeToString(), target=target)
        gm = kiln.graph_executor.GraphModule(lib["default"](kiln.cpu()))
        gm.set_input("x", x)
        gm.set_input("xz", xz)
        got = np.full(want.shape, -7, "int32")
        gm.run()
        gm.get_output(0, got)
        np.testing.assert_array_equal(got, want)
        if target == "llvm -mcpu=native" and _host_has_dot4():
            assert "vpdpbusd" in _asm_of(lib)
