"""Whole models compiled with symbolic dimensions left to run time (`dims={"n": "any"}`): ONE
library, its kernels compiled with run-time extents, runs every shape; run-time extents that
must agree (a product's inner dimensions, attention's batch and head dimensions) are checked
when each kernel is called. Each model against onnxruntime on fresh random inputs, outputs
poisoned between runs, from a library exported and loaded again."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from test_vm import _bert, _bert_feeds, _ort, _run, _vm  # noqa: E402


def test_bert_encoder_at_any_length_and_batch_from_one_library(tmp_path):
    # Positions from Shape -> Gather -> Range, attention products whose batch, head and
    # sequence extents are all known only at run time, layer norms over run-time rows.
    m = _bert()
    gm = _vm(m, None, tmp_path, dims={"seq": "any", "batch": "any"})
    assert gm.get_input_info()[0]["ids"] == (-1, -1)
    sess = _ort(m)
    rng = np.random.default_rng(23)
    for batch, seq in ((1, 7), (4, 128), (4, 7), (1, 64), (4, 16), (1, 128), (3, 33), (1, 7)):
        feeds = _bert_feeds(rng, batch, seq)
        (got,) = _run(gm, feeds, 1)
        (want,) = sess.run(None, feeds)
        assert got.shape == (batch, seq, 32)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{batch}x{seq}")
    # Inputs that disagree: named, and the machine stays usable.
    gm.set_input("ids", np.zeros((1, 7), np.int64))
    gm.set_input("mask", np.zeros((1, 8), np.int64))
    with pytest.raises(ValueError, match=r"(?s)kernel.*Mismatched p\d\.shape\[3\]"):
        gm.run()
    (got,) = _run(gm, feeds, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_crnn_line_recognizer_at_any_width_from_one_library(tmp_path):
    # Convolutions and poolings over a run-time width, the height folded into channels, a
    # bidirectional LSTM over a run-time number of steps, a classifier with log-softmax.
    from test_vm import _crnn_any_width
    m = _crnn_any_width()
    gm = _vm(m, None, tmp_path, dims={"width": "any"})
    assert gm.get_input_info()[0]["img"] == (1, 1, 32, -1)
    sess = _ort(m)
    rng = np.random.default_rng(31)
    for width in (96, 160, 320, 800, 101, 4, 96):
        img = rng.uniform(0, 1, (1, 1, 32, width)).astype(np.float32)
        (got,) = _run(gm, {"img": img}, 1)
        (want,) = sess.run(None, {"img": img})
        assert got.shape == want.shape == (width // 2, 1, 37)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(width))
    # A wrong height is named; the machine stays usable.
    with pytest.raises(ValueError, match=r"dimension 2 must be 32 but is 16"):
        gm.set_input("img", np.zeros((1, 1, 16, 96), np.float32))
    (got,) = _run(gm, {"img": img}, 1)
    np.testing.assert_allclose(got, sess.run(None, {"img": img})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_convolutions_poolings_and_concat_over_run_time_height_and_width(tmp_path, ceil_mode):
    # A detector-style block with both spatial dimensions and the batch left to run time:
    # strided and dilated convolutions, a depthwise one, max and average pooling (ceil mode,
    # padding), a channel concat of two branches, a global average.
    from onnx import TensorProto, helper, numpy_helper
    from test_vm import _model
    rng = np.random.default_rng(37)
    w = lambda *s: rng.uniform(-0.5, 0.5, s).astype(np.float32)  # noqa: E731
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", "dw"], ["c2"], pads=[2, 2, 2, 2], dilations=[2, 2], group=8),
        n("MaxPool", ["r1"], ["m1"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        n("Concat", ["c2", "m1"], ["cat"], axis=1),
        n("AveragePool", ["cat"], ["a1"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1],
          ceil_mode=ceil_mode),
        n("GlobalAveragePool", ["a1"], ["g"]),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
               [helper.make_tensor_value_info("a1", TensorProto.FLOAT, [None] * 4),
                helper.make_tensor_value_info("g", TensorProto.FLOAT, [None] * 4)],
               [numpy_helper.from_array(v, k) for k, v in
                {"w1": w(8, 3, 3, 3), "b1": w(8), "dw": w(8, 1, 3, 3)}.items()])
    gm = _vm(m, None, tmp_path, dims={"n": "any", "h": "any", "w": "any"})
    sess = _ort(m)
    for shape in ((1, 3, 17, 23), (2, 3, 32, 32), (1, 3, 5, 9), (1, 3, 17, 23)):
        x = rng.standard_normal(shape).astype(np.float32)
        got = _run(gm, {"x": x}, 2)
        want = sess.run(None, {"x": x})
        for g, wnt in zip(got, want):
            assert g.shape == wnt.shape, (shape, g.shape, wnt.shape)
            np.testing.assert_allclose(g, wnt, rtol=1e-4, atol=1e-5, err_msg=str(shape))


def test_softmax_and_layer_norm_over_run_time_rows(tmp_path):
    # Rows whose length is known only at run time reduce in vectors of the target's lanes and a
    # tail: lengths below, at and around whole vectors of any CPU, and rows of static length
    # (layer norm's 40) under a run-time count of rows.
    from onnx import TensorProto, helper, numpy_helper
    from test_vm import _model
    rng = np.random.default_rng(41)
    nodes = [helper.make_node("Softmax", ["x"], ["p"], axis=-1),
             helper.make_node("LayerNormalization", ["y", "g", "b"], ["q"], axis=-1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["r", "n"]),
                       helper.make_tensor_value_info("y", TensorProto.FLOAT, ["r", 40])],
               [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["r", "n"]),
                helper.make_tensor_value_info("q", TensorProto.FLOAT, ["r", 40])],
               [numpy_helper.from_array(rng.standard_normal(40).astype(np.float32), "g"),
                numpy_helper.from_array(rng.standard_normal(40).astype(np.float32), "b")],
               opset=17)
    gm = _vm(m, None, tmp_path, dims={"r": "any", "n": "any"})
    sess = _ort(m)
    for r, n in ((1, 1), (3, 7), (2, 16), (3, 17), (1, 31), (2, 64), (3, 100), (1, 1)):
        feeds = {"x": (rng.standard_normal((r, n)) * 4).astype(np.float32),
                 "y": rng.standard_normal((r, 40)).astype(np.float32)}
        got = _run(gm, feeds, 2)
        want = sess.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{r}x{n}")
