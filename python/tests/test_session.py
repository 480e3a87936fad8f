"""kiln.InferenceSession against onnxruntime: outputs, the on-disk cache, symbolic shapes,
threads and the errors a user gets for a wrong feed."""

import gc
import os
import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
import kiln.session

BUNDLED = Path(__file__).resolve().parents[2] / "examples" / "model" / "model.onnx"


def _ort(model):
    data = model if isinstance(model, (str, Path)) else model.SerializeToString()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(data) if isinstance(data, Path) else data, opts,
                                providers=["CPUExecutionProvider"])


def _dynamic_model():
    """x[batch, 8] @ W[8, 5] + b, relu, and a second output: its sum over axis 1."""
    rng = np.random.default_rng(11)
    w = numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["y"]),
        helper.make_node("ReduceSum", ["y", "axes"], ["s"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, ["batch"])],
        [w, b, axes],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_bundled_model_matches_onnxruntime(tmp_path):
    sess = kiln.InferenceSession(str(BUNDLED), cache_dir=str(tmp_path))
    ref = _ort(BUNDLED)
    assert [(a.name, a.shape, a.type) for a in sess.get_inputs()] == [
        (a.name, a.shape, a.type) for a in ref.get_inputs()]
    assert [(a.name, a.shape, a.type) for a in sess.get_outputs()] == [
        (a.name, a.shape, a.type) for a in ref.get_outputs()]
    assert sess.get_providers() == ["CPUExecutionProvider"]
    rng = np.random.default_rng(1)
    name = sess.get_inputs()[0].name
    shape = sess.get_inputs()[0].shape
    # Two runs with different inputs: an output the second run did not write would keep the
    # first run's values and differ from onnxruntime's.
    for _ in range(2):
        feeds = {name: rng.standard_normal(shape).astype(np.float32)}
        _close(sess.run(None, feeds), ref.run(None, feeds))


def test_second_session_loads_the_cache_without_compiling(tmp_path, monkeypatch):
    first = kiln.InferenceSession(str(BUNDLED), cache_dir=str(tmp_path))
    [path] = first.get_cached_libraries()
    assert Path(path).parent == tmp_path and os.path.getsize(path) > 0
    stamp = os.stat(path).st_mtime_ns

    def no_build(*args, **kwargs):
        raise AssertionError("the cached library should have been loaded, not compiled")

    monkeypatch.setattr(kiln.session._onnx, "compile", no_build)
    second = kiln.InferenceSession(BUNDLED.read_bytes(), cache_dir=str(tmp_path))
    assert second.get_cached_libraries() == [path]
    assert os.stat(path).st_mtime_ns == stamp
    feeds = {"input": np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    _close(second.run(None, feeds), _ort(BUNDLED).run(None, feeds))


def test_damaged_cache_entry_is_compiled_again(tmp_path, capfd):
    first = kiln.InferenceSession(str(BUNDLED), cache_dir=str(tmp_path))
    [path] = first.get_cached_libraries()
    # Damaged while no session holds it: the dynamic loader would otherwise hand back the
    # library it already has open under that name.
    del first
    gc.collect()
    damaged = tmp_path / "damaged"
    damaged.write_bytes(b"\x7fELF not a library")
    os.replace(damaged, path)
    again = kiln.InferenceSession(str(BUNDLED), cache_dir=str(tmp_path))
    assert "ignoring the cached library" in capfd.readouterr().err
    feeds = {"input": np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    _close(again.run(None, feeds), _ort(BUNDLED).run(None, feeds))
    assert os.path.getsize(path) > 1000


def test_symbolic_batch_compiles_once_per_shape(tmp_path):
    model = _dynamic_model()
    sess = kiln.InferenceSession(model, cache_dir=str(tmp_path))
    assert sess.get_inputs()[0].shape == ["batch", 8]
    assert sess.get_cached_libraries() == []  # nothing to compile before a shape is known
    ref = _ort(model)
    rng = np.random.default_rng(4)
    for batch in (2, 5, 2):
        feeds = {"x": rng.standard_normal((batch, 8)).astype(np.float32)}
        _close(sess.run(None, feeds), ref.run(None, feeds))
        # Outputs by name, in the order asked for.
        s, y = sess.run(["s", "y"], feeds)
        np.testing.assert_allclose(s, y.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert len(sess.get_cached_libraries()) == 2


def test_input_shapes_compile_up_front(tmp_path):
    sess = kiln.InferenceSession(_dynamic_model(), cache_dir=str(tmp_path),
                                 input_shapes={"x": [3, 8]})
    assert len(sess.get_cached_libraries()) == 1
    with pytest.raises(ValueError, match="not an input"):
        kiln.InferenceSession(_dynamic_model(), cache_dir=str(tmp_path), input_shapes={"z": [1]})
    with pytest.raises(ValueError, match=r"input 'x': expected shape \['batch', 8\]"):
        kiln.InferenceSession(_dynamic_model(), cache_dir=str(tmp_path),
                              input_shapes={"x": [3, 9]})


def test_run_from_several_threads(tmp_path):
    model = _dynamic_model()
    sess = kiln.InferenceSession(model, cache_dir="", input_shapes={"x": [4, 8]})
    assert sess.get_cached_libraries() == []  # cache_dir="": compiled in memory only
    ref = _ort(model)
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.standard_normal((4, 8)).astype(np.float32)} for _ in range(8)]
    want = [ref.run(None, f) for f in feeds]
    errors = []

    def worker(k):
        try:
            for _ in range(20):
                _close(sess.run(None, feeds[k]), want[k])
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(feeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_wrong_feeds_name_the_input(tmp_path):
    sess = kiln.InferenceSession(_dynamic_model(), cache_dir=str(tmp_path))
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(TypeError, match=r"input 'x': expected dtype float32 .* got float64"):
        sess.run(None, {"x": x.astype(np.float64)})
    with pytest.raises(ValueError, match=r"input 'x': expected shape \['batch', 8\].*\[2, 7\]"):
        sess.run(None, {"x": np.zeros((2, 7), np.float32)})
    with pytest.raises(ValueError, match=r"missing input\(s\) \['x'\]"):
        sess.run(None, {})
    with pytest.raises(ValueError, match="not inputs of the model"):
        sess.run(None, {"x": x, "extra": x})
    with pytest.raises(ValueError, match="not outputs of the model"):
        sess.run(["nope"], {"x": x})
    with pytest.raises(ValueError, match="no execution provider"):
        kiln.InferenceSession(_dynamic_model(), providers=["CUDAExecutionProvider"])
    with pytest.raises(TypeError, match="unknown keyword"):
        kiln.InferenceSession(_dynamic_model(), cach_dir="x")


def test_bad_model_names_the_file(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07\x12garbage")
    with pytest.raises(ValueError):
        kiln.InferenceSession(str(bad), cache_dir=str(tmp_path))
    assert bad.read_bytes() == b"\x08\x07\x12garbage"  # the user's file is left as it was


def test_session_runs_a_model_whose_if_decides_at_run_time(tmp_path):
    # The speech-activity model (a sample-rate If over LSTM branches) compiles once for the
    # virtual machine; both rates run from it, outputs as onnxruntime's.
    from test_onnx_if import H, _vad
    m = _vad()
    sess = kiln.InferenceSession(m.SerializeToString(), cache_dir=str(tmp_path))
    ref = _ort(m)
    rng = np.random.default_rng(4)
    state = np.zeros((2, 1, H), np.float32)
    for sr in (16000, 8000, 16000):
        feeds = {"x": rng.standard_normal((1, 1, 256)).astype(np.float32),
                 "sr": np.array([sr], np.int64), "state": state}
        got = sess.run(None, feeds)
        _close(got, ref.run(None, feeds))
        state = got[1]
    assert len(sess.get_cached_libraries()) == 1
