"""Det, DFT, STFT and MelWeightMatrix against independent references on fresh random inputs:
numpy.linalg.det, numpy.fft (forward and inverse, real and complex, one-sided, dft_length
padding and truncating, every signal axis, irfft), a framed numpy FFT for STFT, and the ONNX
reference implementation for MelWeightMatrix."""

import numpy as np
import pytest

from onnx_run import run_kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402


def _model(nodes, inputs, outputs, opset, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    return m


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 5, 5), (1, 1), (6, 7, 7)])
def test_det(shape):
    rng = np.random.default_rng(len(shape) * 10 + shape[-1])
    x = rng.standard_normal(shape).astype(np.float32)
    if shape == (6, 7, 7):
        x[2, 3] = x[2, 1] * 2.0  # a singular matrix
        x[4] = np.eye(7)[rng.permutation(7)]  # a permutation: pivoting decides the sign
    m = _model([helper.make_node("Det", ["x"], ["y"])], [_f("x", shape)], [_f("y", shape[:-2])], 11)
    (got,) = run_kiln(m, {"x": x})
    want = np.linalg.det(x.astype(np.float64))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-4)


def _dft_ref(x, axis, n, inverse, onesided):
    sig = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    if inverse and onesided:
        return np.fft.irfft(sig, n=n, axis=axis)[..., None]
    y = (np.fft.ifft if inverse else np.fft.fft)(sig, n=n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], -1)


@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("axis,n", [(1, None), (2, None), (1, 12), (2, 5), (-2, 9)])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_dft_opset20(complex_in, axis, n, inverse, onesided):
    if inverse and onesided and not complex_in:
        pytest.skip("an inverse one-sided transform takes a complex spectrum")
    rng = np.random.default_rng(abs(axis) * 100 + (n or 0) + 7 * inverse + 3 * onesided)
    shape = (2, 8, 6, 2 if complex_in else 1)
    x = rng.standard_normal(shape).astype(np.float32)
    inputs = ["x", "n" if n else "", "axis"]
    inits = [numpy_helper.from_array(np.array(axis, np.int64), "axis")]
    if n:
        inits.append(numpy_helper.from_array(np.array(n, np.int64), "n"))
    node = helper.make_node("DFT", inputs, ["y"], inverse=inverse, onesided=onesided)
    m = _model([node], [_f("x", shape)], [_f("y", [None] * 4)], 20, inits)
    (got,) = run_kiln(m, {"x": x})
    a = axis % 4
    length = n or (2 * (shape[a] - 1) if inverse and onesided else shape[a])
    want = _dft_ref(x.astype(np.float64), a, length, inverse, onesided)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_dft_opset17_axis_attribute():
    rng = np.random.default_rng(17)
    x = rng.standard_normal((3, 10, 2)).astype(np.float32)
    m = _model([helper.make_node("DFT", ["x"], ["y"], axis=1, onesided=1)], [_f("x", x.shape)],
               [_f("y", [None] * 3)], 17)
    (got,) = run_kiln(m, {"x": x})
    np.testing.assert_allclose(got, _dft_ref(x.astype(np.float64), 1, 10, 0, 1), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("window,onesided", [(False, 1), (True, 0), (True, 1)])
def test_stft(window, onesided):
    rng = np.random.default_rng(window * 2 + onesided)
    length, frame, step = 64, 16, 6
    x = rng.standard_normal((2, length, 1)).astype(np.float32)
    w = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(step, np.int64), "step"),
             numpy_helper.from_array(np.array(frame, np.int64), "frame")]
    inputs = [_f("x", x.shape)]
    feeds = {"x": x}
    if window:
        inputs.append(_f("w", [frame]))
        feeds["w"] = w
    node = helper.make_node("STFT", ["x", "step", "w" if window else "", "frame"], ["y"],
                            onesided=onesided)
    m = _model([node], inputs, [_f("y", [None] * 4)], 17, inits)
    (got,) = run_kiln(m, feeds)
    frames = 1 + (length - frame) // step
    idx = np.arange(frames)[:, None] * step + np.arange(frame)
    framed = x[:, idx, 0].astype(np.float64) * (w if window else 1.0)
    spec = np.fft.fft(framed, axis=-1)
    if onesided:
        spec = spec[..., : frame // 2 + 1]
    want = np.stack([spec.real, spec.imag], -1)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=5e-5)


@pytest.mark.parametrize("bins,dft,rate,lo,hi", [(8, 64, 8000, 20.0, 4000.0),
                                                 (20, 512, 16000, 0.0, 8000.0),
                                                 (5, 32, 1000, 100.0, 300.0)])
def test_mel_weight_matrix(bins, dft, rate, lo, hi):
    ints = [numpy_helper.from_array(np.array(v, np.int64), k)
            for k, v in [("bins", bins), ("dft", dft), ("rate", rate)]]
    floats = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in [("lo", lo), ("hi", hi)]]
    node = helper.make_node("MelWeightMatrix", ["bins", "dft", "rate", "lo", "hi"], ["y"])
    x = np.zeros((1,), np.float32)
    m = _model([node, helper.make_node("Identity", ["x"], ["x_out"])], [_f("x", [1])],
               [_f("y", [None, None]), _f("x_out", [1])], 17, ints + floats)
    got, _ = run_kiln(m, {"x": x})
    (want, _) = ReferenceEvaluator(m).run(None, {"x": x})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def _stft_ref(x, step, frame, w, onesided):
    frames = 1 + (x.shape[1] - frame) // step
    idx = np.arange(frames)[:, None] * step + np.arange(frame)
    sig = x[..., 0] + (1j * x[..., 1] if x.shape[2] == 2 else 0)
    spec = np.fft.fft(sig[:, idx].astype(np.complex128) * w, axis=-1)
    if onesided:
        spec = spec[..., : frame // 2 + 1]
    return np.stack([spec.real, spec.imag], -1)


@pytest.mark.parametrize("window,onesided", [(False, 1), (True, 0), (True, 1)])
def test_stft_by_run_time_step_and_length_from_one_library(tmp_path, window, onesided):
    # Step and frame length (or the window, whose length is the frame's) given per run, the
    # signal's length left to run time: one VM library, each run against numpy's FFT with
    # outputs poisoned between runs; a step of 0 or a frame past the signal is refused.
    from test_vm import _run, _vm
    inputs = [_f("x", [2, "n", 1]), helper.make_tensor_value_info("step", TensorProto.INT64, [])]
    names = ["x", "step", "", "frame"]
    if window:
        inputs.append(_f("w", ["k"]))
        names = ["x", "step", "w"]
    else:
        inputs.append(helper.make_tensor_value_info("frame", TensorProto.INT64, []))
    m = _model([helper.make_node("STFT", names, ["y"], onesided=onesided)], inputs,
               [_f("y", [None] * 4)], 17)
    dims = {"n": "any", "k": "any"} if window else {"n": "any"}
    gm = _vm(m, None, tmp_path, dims=dims)
    rng = np.random.default_rng(window * 2 + onesided + 40)
    for length, frame, step in ((64, 16, 6), (50, 9, 4), (20, 20, 3), (64, 16, 6)):
        x = rng.standard_normal((2, length, 1)).astype(np.float32)
        w = rng.uniform(0.5, 1.0, frame).astype(np.float32) if window else np.ones(frame)
        feeds = {"x": x, "step": np.array(step, np.int64)}
        if window:
            feeds["w"] = w
        else:
            feeds["frame"] = np.array(frame, np.int64)
        (got,) = _run(gm, feeds, 1)
        want = _stft_ref(x, step, frame, w, onesided)
        assert got.shape == want.shape, (length, frame, step)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=5e-5)
    for bad in (dict(feeds, step=np.array(0, np.int64)),
                dict(feeds, x=np.zeros((2, 8, 1), np.float32))):
        with pytest.raises(ValueError, match=r"do not fit"):
            _run(gm, bad, 1)


def test_mel_weight_matrix_of_run_time_parameters_from_one_library(tmp_path):
    # Every parameter given per run (the result's extents with them), against ONNX's
    # reference; a non-positive bin count is refused.
    from test_vm import _run, _vm
    i64 = TensorProto.INT64
    inputs = [helper.make_tensor_value_info(k, i64, []) for k in ("bins", "dft", "rate")]
    inputs += [_f("lo", []), _f("hi", [])]
    node = helper.make_node("MelWeightMatrix", ["bins", "dft", "rate", "lo", "hi"], ["y"])
    m = _model([node], inputs, [_f("y", [None, None])], 17)
    gm = _vm(m, None, tmp_path)
    ref = ReferenceEvaluator(m)
    for bins, dft, rate, lo, hi in ((8, 64, 8000, 20.0, 4000.0), (20, 512, 16000, 0.0, 8000.0),
                                    (5, 32, 1000, 100.0, 300.0), (8, 64, 8000, 20.0, 4000.0)):
        feeds = {"bins": np.array(bins, np.int64), "dft": np.array(dft, np.int64),
                 "rate": np.array(rate, np.int64), "lo": np.array(lo, np.float32),
                 "hi": np.array(hi, np.float32)}
        (got,) = _run(gm, feeds, 1)
        (want,) = ref.run(None, feeds)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"do not fit"):
        _run(gm, dict(feeds, bins=np.array(0, np.int64)), 1)


@pytest.mark.parametrize("onesided", [0, 1])
def test_dft_along_a_run_time_axis_from_one_library(tmp_path, onesided):
    # The axis given per run (either spelling), the length fixed: one VM library whose If
    # chain picks the transform; the last axis and axes out of range are refused.
    from test_vm import _run, _vm
    inits = [numpy_helper.from_array(np.array(10, np.int64), "n")]
    m = _model([helper.make_node("DFT", ["x", "n", "axis"], ["y"], onesided=onesided)],
               [_f("x", [2, 8, 6, 1]), helper.make_tensor_value_info("axis", TensorProto.INT64, [])],
               [_f("y", [None] * 4)], 20, inits)
    gm = _vm(m, None, tmp_path)
    rng = np.random.default_rng(71 + onesided)
    for axis in (1, -2, 0, -3, 2, 1):
        x = rng.standard_normal((2, 8, 6, 1)).astype(np.float32)
        (got,) = _run(gm, {"x": x, "axis": np.array(axis, np.int64)}, 1)
        want = _dft_ref(x.astype(np.float64), axis % 4, 10, 0, onesided)
        assert got.shape == want.shape, axis
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5, err_msg=str(axis))
    for bad in (3, -1, 4, -5):
        with pytest.raises(ValueError, match=r"do not fit"):
            _run(gm, {"x": x, "axis": np.array(bad, np.int64)}, 1)
