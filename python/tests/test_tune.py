"""Tuning from Python (``kiln.tune.tune``) and compiling with its records
(``kiln.onnx.compile(..., tuning_records=...)``) on a two-layer convolutional model: the records
file names this CPU and holds each distinct layer with its times, a second tuning resumes with
nothing left to do, the tuned library (and one built with a hand-set knob) matches
onnxruntime on fresh random inputs, and bad records, arguments and models are refused with a
clear error."""

import json

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper

rng = np.random.default_rng(41)


def two_layer_model():
    """3x3 conv 16 -> 32 + ReLU, then 1x1 conv 32 -> 64 + bias, on 1x16x14x14."""
    w1 = (rng.standard_normal((32, 16, 3, 3)) / 12).astype("float32")
    w2 = (rng.standard_normal((64, 32, 1, 1)) / 6).astype("float32")
    b2 = rng.standard_normal(64).astype("float32")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Conv", ["b", "w2", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 16, 14, 14])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
                     numpy_helper.from_array(b2, "b2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


MODEL = two_layer_model()


def check_against_onnxruntime(lib):
    gm = GraphModule(lib["default"](kiln.cpu()))
    sess = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    for _ in range(2):
        x = rng.standard_normal((1, 16, 14, 14)).astype("float32")
        gm.set_input("x", x)
        gm.run()
        got = gm.get_output(0).numpy()
        want = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_tune_writes_resumable_records_and_compiles_with_them(tmp_path):
    records = tmp_path / "model.tuning.json"
    events = []
    tuned = kiln.tune.tune(MODEL, records, runs=2,
                           progress=lambda done, total, layer: events.append((done, total, layer)))
    assert len(tuned) == 2, [t["signature"] for t in tuned]
    assert [e[:2] for e in events] == [(0, 2), (1, 2), (2, 2)]
    assert events[-1][2] == "" and all(e[2].startswith("nn.conv2d") for e in events[:-1])
    for t in tuned:
        assert 0 < t["ms"] <= t["heuristic_ms"], t
    saved = json.loads(records.read_text())
    assert saved["cpu"].split(" [")[0], saved["cpu"]
    assert set(saved["layers"]) == {t["signature"] for t in tuned}
    for t in tuned:
        layer = saved["layers"][t["signature"]]
        assert layer["ms"] == pytest.approx(t["ms"])
        assert layer["heuristic_ms"] == pytest.approx(t["heuristic_ms"])
        assert layer["records"] == t["records"]
    # Resumed: every layer is in the file, nothing is measured again, the file is untouched.
    before = records.read_text()
    assert kiln.tune.tune(MODEL, records) == []
    assert records.read_text() == before
    check_against_onnxruntime(kiln.onnx.compile(MODEL, tuning_records=records))


def test_hand_set_knobs_compile_correctly(tmp_path):
    records = tmp_path / "r.json"
    kiln.tune.tune(MODEL, records, runs=1)
    saved = json.loads(records.read_text())
    # The channel-blocked workloads of both layers (blocks of 8 and of 16 lanes), given
    # register tiles of one block and two columns and two channel blocks a pass.
    knobs = {"blocks": 1, "cols": 2, "chunk": 2 * 8}
    for sig in saved["layers"]:
        recs = {}
        for b in (8, 16):
            if "(64, 32, 1, 1)" in sig:
                key = f"conv2d_nchwc:1x{64 // b}x14x14x{b}:1x32x14x14:{64 // b}x32x1x1x{b}"
            else:
                key = f"conv2d_nchwc:1x{32 // b}x14x14x{b}:1x16x16x16:{32 // b}x16x3x3x{b}"
            recs[key] = knobs
        saved["layers"][sig]["records"] = recs
    records.write_text(json.dumps(saved))
    check_against_onnxruntime(kiln.onnx.compile(MODEL, tuning_records=records))


def test_bad_records_arguments_and_models_are_refused(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"cpu": "some-other-cpu [avx2]", "layers": {}}))
    with pytest.raises(ValueError, match="another CPU"):
        kiln.tune.tune(MODEL, other)
    # Compiling with another CPU's records takes the heuristics.
    check_against_onnxruntime(kiln.onnx.compile(MODEL, tuning_records=other))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json"):
        kiln.tune.tune(MODEL, broken)
    with pytest.raises(ValueError, match="broken.json"):
        kiln.onnx.compile(MODEL, tuning_records=broken)
    assert broken.read_text() == "{not json", "a bad records file is left as it was"
    with pytest.raises(ValueError, match="runs"):
        kiln.tune.tune(MODEL, tmp_path / "r.json", runs=0)
    with pytest.raises(ValueError, match="one target"):
        kiln.onnx.compile(MODEL, target=["llvm", "llvm -mcpu=x86-64-v3"],
                          tuning_records=tmp_path / "r.json")
    with pytest.raises(ValueError):
        kiln.tune.tune(b"not a model", tmp_path / "r.json")
    with pytest.raises(ValueError, match="tune.Tune.*negative"):
        kiln.tune.tune(MODEL, tmp_path / "r.json", shape_dict={"x": [1, -16, 14, 14]})
    assert not (tmp_path / "r.json").exists(), "nothing is written for a refused call"


def test_a_failing_progress_callback_stops_the_call(tmp_path):
    def progress(done, total, layer):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        kiln.tune.tune(MODEL, tmp_path / "r.json", runs=1, progress=progress)
