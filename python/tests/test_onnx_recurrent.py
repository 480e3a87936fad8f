"""LSTM, GRU and RNN against onnxruntime on fresh random inputs: every direction, both layouts,
activations with parameters, clip, input_forget, peepholes, sequence lengths shorter than the
sequence (both directions), initial states and every optional output."""

import numpy as np
import pytest

from onnx_run import run_kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def _layer(op, t=5, b=3, i=4, h=6, direction="forward", layout=0, bias=True, h0=False, c0=False,
           peep=False, lens=None, attrs=None, outputs=("y", "y_h", "y_c"), seed=0):
    """A one-node model of `op` with random weights as initializers, and its feeds."""
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x_shape = [t, b, i] if layout == 0 else [b, t, i]
    state_shape = [d, b, h] if layout == 0 else [b, d, h]
    inits = [numpy_helper.from_array(rng.uniform(-0.6, 0.6, (d, g * h, i)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-0.6, 0.6, (d, g * h, h)).astype(np.float32), "R")]
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    names = ["x", "W", "R", "", "", "", "", ""]
    if bias:
        inits.append(numpy_helper.from_array(
            rng.uniform(-0.5, 0.5, (d, 2 * g * h)).astype(np.float32), "B"))
        names[3] = "B"
    if lens is not None:
        feeds["lens"] = np.array(lens, np.int32)
        inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [b]))
        names[4] = "lens"
    if h0:
        feeds["h0"] = rng.standard_normal(state_shape).astype(np.float32)
        inputs.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, state_shape))
        names[5] = "h0"
    if c0:
        feeds["c0"] = rng.standard_normal(state_shape).astype(np.float32)
        inputs.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, state_shape))
        names[6] = "c0"
    if peep:
        inits.append(numpy_helper.from_array(
            rng.uniform(-0.5, 0.5, (d, 3 * h)).astype(np.float32), "P"))
        names[7] = "P"
    while names and names[-1] == "":
        names.pop()
    outs = list(outputs) if op == "LSTM" else [o for o in outputs if o != "y_c"]
    node_outs = ["y", "y_h", "y_c"][:max(["y", "y_h", "y_c"].index(o) for o in outs) + 1]
    node_outs = [o if o in outs else "" for o in node_outs]
    node = helper.make_node(op, names, node_outs, hidden_size=h, direction=direction,
                            **({"layout": layout} if layout else {}), **(attrs or {}))
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [None] * (4 if o == "y" else 3))
                               for o in outs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m, feeds


def _check(op, rtol=1e-4, atol=1e-5, **kw):
    m, feeds = _layer(op, **kw)
    got = run_kiln(m, feeds)
    if kw.get("layout", 0) == 1:
        # onnxruntime has no batch-first layout: the same layer in layout 0, inputs and outputs
        # transposed (the weights are drawn first, so they are the same).
        m0, _ = _layer(op, **{**kw, "layout": 0})
        feeds0 = {k: (v.transpose(1, 0, 2) if v.ndim == 3 else v) for k, v in feeds.items()}
        want = [w.transpose(2, 0, 1, 3) if w.ndim == 4 else w.transpose(1, 0, 2)
                for w in _ort(m0, feeds0)]
    else:
        want = _ort(m, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(op, direction):
    _check(op, direction=direction, h0=True, c0=op == "LSTM", seed=len(direction))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_layout_1_and_sequence_lens(op):
    _check(op, direction="bidirectional", layout=1, lens=[5, 2, 0], h0=True, c0=op == "LSTM")


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_sequence_lens_without_states(op):
    _check(op, direction="reverse", lens=[3, 5, 1], bias=False)


def test_lstm_peepholes_clip_input_forget():
    _check("LSTM", peep=True, c0=True, h0=True, attrs={"clip": 0.7, "input_forget": 1})


def test_gru_linear_before_reset():
    _check("GRU", direction="bidirectional", h0=True, attrs={"linear_before_reset": 1})


@pytest.mark.parametrize("op,acts", [
    ("LSTM", ["HardSigmoid", "ScaledTanh", "Affine"]),
    ("GRU", ["LeakyRelu", "Softsign"]),
    ("RNN", ["Relu"]),
    ("RNN", ["Elu"]),
    ("RNN", ["Softplus"]),
    ("RNN", ["ThresholdedRelu"]),
])
def test_activations(op, acts):
    alphas = [0.3, 0.8, 0.6]
    betas = [0.4, 0.9, 0.2]
    _check(op, attrs={"activations": acts, "activation_alpha": alphas,
                      "activation_beta": betas}, h0=True)


@pytest.mark.parametrize("outputs", [("y",), ("y_h",), ("y_c",), ("y_h", "y_c")])
def test_optional_outputs(outputs):
    _check("LSTM", outputs=outputs, direction="bidirectional")


def test_larger_hidden():
    # Hidden sizes past one register tile exercise every tile width of the recurrent product.
    _check("LSTM", t=7, b=2, i=33, h=71, direction="bidirectional", rtol=2e-4, atol=2e-5)
    _check("GRU", t=7, b=2, i=33, h=53, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_many_batch_rows(op):
    # More rows than one register tile holds (the products run in row blocks and a remainder),
    # with rows of every length, reverse and forward.
    rng = np.random.default_rng(13)
    lens = list(rng.integers(0, 8, 13))
    _check(op, t=7, b=13, i=9, h=20, direction="bidirectional", lens=lens, h0=True,
           c0=op == "LSTM", seed=13)


def _crnn(width, rng):
    """A CRNN line recognizer as exporters write it: a conv stack over a 32-pixel-high line
    image, the height folded into channels, a bidirectional LSTM over the width, and a
    classifier with log-softmax over 37 classes."""
    f = TensorProto.FLOAT
    w = lambda *s: rng.uniform(-0.3, 0.3, s).astype(np.float32)  # noqa: E731
    hid, classes = 24, 37
    inits = {"c1": w(8, 1, 3, 3), "b1": w(8), "c2": w(16, 8, 3, 3), "b2": w(16),
             "W": w(2, 4 * hid, 16 * 8), "R": w(2, 4 * hid, hid), "B": w(2, 8 * hid),
             "fc": w(2 * hid, classes), "fcb": w(classes),
             "fold": np.array([0, 16 * 8, -1], np.int64), "flat": np.array([0, 0, 2 * hid], np.int64)}
    nodes = [
        helper.make_node("Conv", ["img", "c1", "b1"], ["a1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2", "b2"], ["a2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 1], strides=[2, 1]),
        helper.make_node("Reshape", ["p2", "fold"], ["seq_ncw"]),          # [N, C*H, W]
        helper.make_node("Transpose", ["seq_ncw"], ["seq"], perm=[2, 0, 1]),  # [W, N, C*H]
        helper.make_node("LSTM", ["seq", "W", "R", "B"], ["y"], hidden_size=hid,
                         direction="bidirectional"),                        # [W, 2, N, H]
        helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),     # [W, N, 2, H]
        helper.make_node("Reshape", ["yt", "flat"], ["feat"]),               # [W, N, 2H]
        helper.make_node("MatMul", ["feat", "fc"], ["logits0"]),
        helper.make_node("Add", ["logits0", "fcb"], ["logits"]),
        helper.make_node("LogSoftmax", ["logits"], ["out"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "crnn", [helper.make_tensor_value_info("img", f, [1, 1, 32, width])],
                              [helper.make_tensor_value_info("out", f, [None, 1, classes])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("width", [96, 160])
def test_crnn_line_recognizer(width):
    rng = np.random.default_rng(width)
    m = _crnn(width, rng)
    img = rng.uniform(0, 1, (1, 1, 32, width)).astype(np.float32)
    (got,) = run_kiln(m, {"img": img})
    (want,) = _ort(m, {"img": img})
    assert got.shape == want.shape == (width // 2, 1, 37)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
