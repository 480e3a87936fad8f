"""Whole models compiled for the ``opencl`` target and run on the OpenCL device (PoCL on CI):
the bundled CNN and the onnx wheel's squeezenet (seeded random weights, ``tests/zoo/make_zoo.py``)
built by ``kiln.onnx.compile`` and by ``kiln compile --target opencl``, exported, loaded, and run
by the graph executor created on ``kiln.opencl(0)`` (params and intermediates on the device,
inputs copied from numpy). Outputs are poisoned with NaN before each run and compared with
onnxruntime on fresh random inputs (rtol 1e-4, atol 1e-5 after dividing by the reference's
largest magnitude). Operators without a device schedule (Det, LSTM, GRU, RNN, TreeEnsemble) run
on the host CPU with copies between the device and the host; bad target strings are errors.

By default the bundled model, squeezenet and shufflenet run; ``KILN_OPENCL_ALL=1`` adds the
transformer layer, the architecture networks (YOLO-, DBNet-, SVTR-, BERT-style), inception_v1
and resnet50 (a few minutes on PoCL).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.onnx
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLED = os.path.join(ROOT, "examples", "model", "model.onnx")
MAKE_ZOO = os.path.join(ROOT, "tests", "zoo", "make_zoo.py")
KILN_CLI = os.path.join(os.path.dirname(os.path.abspath(kiln.LIB_PATH)), "kiln")
GENERATORS = {
    "make_zoo.py": ["squeezenet", "shufflenet", "inception_v1", "resnet50"],
    "make_transformer.py": ["transformer_2d"],
    "make_arch.py": ["yolo", "dbnet", "svtr", "bert"],
}
DEFAULT_MODELS = ["bundled", "squeezenet", "shufflenet"]
ALL_MODELS = DEFAULT_MODELS + ["transformer_2d", "yolo", "dbnet", "svtr", "bert", "inception_v1",
                               "resnet50"]
MODELS = ALL_MODELS if os.environ.get("KILN_OPENCL_ALL") == "1" else DEFAULT_MODELS
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def cl():
    dev = kiln.opencl(0)
    if not dev.exist:
        pytest.skip("no OpenCL device (scripts/setup.sh installs PoCL)")
    return dev


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """``name -> path`` of a model, generated on first use by its ``tests/zoo`` script."""
    d = tmp_path_factory.mktemp("zoo")
    made = {"bundled": BUNDLED}

    def get(name):
        if name not in made:
            script = next(s for s, names in GENERATORS.items() if name in names)
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "zoo", script), str(d),
                            name], check=True, capture_output=True)
            made[name] = str(d / f"{name}.onnx")
        return made[name]

    return get


@pytest.fixture(scope="module")
def squeezenet(models):
    return models("squeezenet")


def feeds_of(path, seed):
    """A fresh random value for every graph input that is not an initializer: floats from a
    normal distribution, integers in [0, 10)."""
    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[i.name] = rng.integers(0, 10, shape).astype(dtype)
    return feeds


def onnxruntime_outputs(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_poisoned(gm, feeds):
    """Every output poisoned (NaN) on the device, the inputs set from numpy, one run; the
    outputs."""
    shapes, dtypes = gm.get_output_info()
    for k, (shape, dtype) in enumerate(zip(shapes, dtypes)):
        gm.get_output(k).copyfrom(np.full(shape, np.nan, dtype))
    for name, x in feeds.items():
        gm.set_input(name, x)
    gm.run()
    return [gm.get_output(k).numpy() for k in range(len(shapes))]


def assert_matches_onnxruntime(gm, path, what):
    seed = int.from_bytes(os.urandom(4), "little")
    feeds = feeds_of(path, seed)
    refs = onnxruntime_outputs(path, feeds)
    got = run_poisoned(gm, feeds)
    assert len(got) == len(refs)
    for k, (out, ref) in enumerate(zip(got, refs)):
        label = f"{what} output {k} (seed {seed})"
        assert out.shape == ref.shape and out.dtype == ref.dtype, label
        assert np.isfinite(out).all(), f"{label}: non-finite values"
        scale = max(float(np.abs(ref).max()), 1e-30)
        np.testing.assert_allclose(out / scale, ref / scale, rtol=RTOL, atol=ATOL, err_msg=label)


def device_module(lib):
    """The OpenCL module the factory's host library imports."""
    (host,) = lib.imports
    assert host.kind in ("llvm", "library")
    (dev,) = host.imports
    assert dev.kind == "opencl"
    return dev


def load_on_device(path, cl):
    return GraphModule(kiln.load_module(path)["default"](cl))


@pytest.mark.parametrize("model", MODELS)
def test_model_runs_on_the_opencl_device(cl, model, models, tmp_path):
    path = models(model)
    lib = kiln.onnx.compile(path, target="opencl")
    src = device_module(lib).inspect_source("cl")
    assert "__kernel void fused_" in src and "get_local_id(0)" in src
    out = str(tmp_path / f"{model}_opencl.so")
    lib.export_library(out)
    gm = load_on_device(out, cl)
    assert_matches_onnxruntime(gm, path, model)
    # Twice more on the same executor: params stay on the device between runs.
    assert_matches_onnxruntime(gm, path, f"{model} (second run)")


def test_cli_compile_for_opencl(cl, squeezenet, tmp_path):
    for path, stem in [(BUNDLED, "bundled"), (squeezenet, "squeezenet")]:
        out = str(tmp_path / f"{stem}.so")
        subprocess.run([KILN_CLI, "compile", path, "-o", out, "--target", "opencl"], check=True,
                       capture_output=True)
        assert_matches_onnxruntime(load_on_device(out, cl), path, f"{stem} (kiln compile)")
        info = subprocess.run([KILN_CLI, "inspect", out], check=True, capture_output=True,
                              text=True).stdout
        assert 'module "opencl"' in info and 'placement (device module "opencl")' in info, info
        assert ": host" not in info, info
        assert "fused_nn_conv2d" in info and ": device (1 kernel)" in info, info
        # `kiln run` creates the executor on the OpenCL device by itself.
        run = subprocess.run([KILN_CLI, "run", out, "--output-dir", str(tmp_path / stem),
                              "--seed", "5"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert os.path.exists(tmp_path / stem / "output_0.npy")


def test_max_num_threads_sets_the_block_size(cl, tmp_path):
    lib = kiln.onnx.compile(BUNDLED, target="opencl -max_num_threads=64")
    src = device_module(lib).inspect_source("cl")
    assert "((int)get_group_id(0)) * 64)" in src, src
    out = str(tmp_path / "t64.so")
    lib.export_library(out)
    assert_matches_onnxruntime(load_on_device(out, cl), BUNDLED, "bundled (64 threads)")


def det_model(path):
    """``y = Det(x) * 2`` over a batch of 3x3 matrices: Det's compute is a hand-written loop."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    g = helper.make_graph([helper.make_node("Det", ["x"], ["d"]),
                           helper.make_node("Mul", ["d", "two"], ["y"])],
                          "det", [x], [y], [two])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, path)
    return path


def conv_lstm_model(path):
    """Conv -> Relu (device) -> LSTM over the 4 channels as time steps (host: the recurrent
    kernel is a hand-written loop) -> MatMul -> Add (device); the LSTM's Y is a second
    output, straight from the host."""
    rng = np.random.default_rng(7)
    hidden, steps, feat = 6, 4, 36

    def init(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape,
                                  (rng.standard_normal(shape) * 0.3).astype(np.float32).ravel())

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [steps, 1, 1, hidden])
    inits = [init("cw", [steps, 3, 3, 3]), init("cb", [steps]),
             init("W", [1, 4 * hidden, feat]), init("R", [1, 4 * hidden, hidden]),
             init("B", [1, 8 * hidden]), init("mw", [hidden, 3]), init("mb", [3]),
             helper.make_tensor("seq_shape", TensorProto.INT64, [3], [steps, 1, feat]),
             helper.make_tensor("h_shape", TensorProto.INT64, [2], [1, hidden])]
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "seq_shape"], ["seq"]),
        helper.make_node("LSTM", ["seq", "W", "R", "B"], ["y", "yh"], hidden_size=hidden),
        helper.make_node("Reshape", ["yh", "h_shape"], ["h"]),
        helper.make_node("MatMul", ["h", "mw"], ["m"]),
        helper.make_node("Add", ["m", "mb"], ["out"]),
    ]
    g = helper.make_graph(nodes, "conv_lstm", [x], [out, y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, path)
    return path


def gru_rnn_model(path):
    """Relu (device) -> GRU and RNN over 3 time steps (host) -> Add (device)."""
    rng = np.random.default_rng(8)
    hidden, inputs = 5, 7

    def init(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape,
                                  (rng.standard_normal(shape) * 0.3).astype(np.float32).ravel())

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, inputs])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2, hidden])
    inits = [init("W", [1, 3 * hidden, inputs]), init("R", [1, 3 * hidden, hidden]),
             init("B", [1, 6 * hidden]), init("W2", [1, hidden, inputs]),
             init("R2", [1, hidden, hidden]), init("B2", [1, 2 * hidden])]
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("GRU", ["r", "W", "R", "B"], ["", "g"], hidden_size=hidden),
             helper.make_node("RNN", ["r", "W2", "R2", "B2"], ["", "h"], hidden_size=hidden),
             helper.make_node("Add", ["g", "h"], ["out"])]
    g = helper.make_graph(nodes, "gru_rnn", [x], [out], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, path)
    return path


def tree_model(path):
    """Exp (device) -> a one-split TreeEnsemble (ai.onnx.ml opset 5, host) -> Mul (device)."""
    from onnx import numpy_helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 3])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [6, 1])
    tree = helper.make_node(
        "TreeEnsemble", ["e"], ["y"], domain="ai.onnx.ml", n_targets=1, aggregate_function=1,
        post_transform=0, tree_roots=[0], nodes_featureids=[1],
        nodes_modes=numpy_helper.from_array(np.array([0], np.uint8), "modes"),
        nodes_splits=numpy_helper.from_array(np.array([1.5], np.float32), "splits"),
        nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1],
        leaf_targetids=[0, 0],
        leaf_weights=numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "weights"))
    nodes = [helper.make_node("Exp", ["x"], ["e"]), tree,
             helper.make_node("Mul", ["y", "y"], ["out"])]
    g = helper.make_graph(nodes, "tree", [x], [out])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.onnx.ml", 5)], ir_version=8)
    onnx.save(m, path)
    return path


HOST_MODELS = [("det", det_model, ["det"]), ("conv_lstm", conv_lstm_model, ["lstm"]),
               ("gru_rnn", gru_rnn_model, ["gru", "rnn"]), ("tree", tree_model, ["tree_ensemble"])]


def test_operators_without_device_schedule_run_on_the_host(cl, tmp_path):
    for stem, make, host_ops in HOST_MODELS:
        path = make(str(tmp_path / f"{stem}.onnx"))
        lib = kiln.onnx.compile(path, target="opencl")
        graph = json.loads(lib["get_graph_json"]())
        devs, row = graph["attrs"]["device_index"][1], graph["node_row_ptr"]
        assert set(devs) == {1, 4}, devs  # cpu and opencl
        copies = 0
        for nid, node in enumerate(graph["nodes"]):
            if node["op"] == "null":
                continue
            if node["attrs"]["func_name"] == "__copy":
                copies += 1
                continue
            # Every function reads entries of its own device (copies bring the others).
            for src, idx, _ in node["inputs"]:
                assert devs[row[src] + idx] == devs[row[nid]], (stem, node["name"])
        # Det reads the graph input on the host: one copy (its result, to the device). The LSTM:
        # its input to the host, its two outputs to the device; its weights are on the host.
        want = {"det": 1, "conv_lstm": 3}.get(stem)
        assert copies >= 2 if want is None else copies == want, (stem, copies)
        out = str(tmp_path / f"{stem}.so")
        lib.export_library(out)
        gm = load_on_device(out, cl)
        assert_matches_onnxruntime(gm, path, f"{stem} (device and host)")
        assert_matches_onnxruntime(gm, path, f"{stem} (device and host, second run)")
        # The CPU given explicitly as well.
        gm = GraphModule(kiln.load_module(out)["default"](cl, kiln.cpu(0)))
        assert_matches_onnxruntime(gm, path, f"{stem} (opencl and cpu given)")
        # The CLI builds it too, and inspect shows which functions run on the host.
        cli_out = str(tmp_path / f"{stem}_cli.so")
        subprocess.run([KILN_CLI, "compile", path, "-o", cli_out, "--target", "opencl"],
                       check=True, capture_output=True)
        assert_matches_onnxruntime(load_on_device(cli_out, cl), path, f"{stem} (kiln compile)")
        info = subprocess.run([KILN_CLI, "inspect", cli_out], check=True, capture_output=True,
                              text=True).stdout
        host_lines = [ln for ln in info.splitlines() if ln.rstrip().endswith(": host")]
        device_lines = [ln for ln in info.splitlines() if ": device (" in ln]
        for op in host_ops:
            assert any(op in ln for ln in host_lines), info
            assert not any(op in ln for ln in device_lines), info
        if stem == "conv_lstm":
            assert any("conv2d" in ln for ln in info.splitlines() if ": device (" in ln), info


@pytest.mark.parametrize("target,why", [
    ("openc1", "unknown target kind `openc1`"),
    ("opencl -max_num_threads=0", "must be a positive integer"),
    ("opencl -mcpu=skylake", "unknown flag `-mcpu`"),
    ("opencl -max_num_threads", "needs a value"),
    ("", "the string is empty"),
])
def test_bad_target_strings(target, why):
    with pytest.raises(ValueError, match="invalid target") as e:
        kiln.onnx.compile(BUNDLED, target=target)
    assert why in str(e.value), str(e.value)


def test_opencl_cannot_be_one_of_several_targets():
    with pytest.raises(ValueError, match="cannot be one of several code variants"):
        kiln.onnx.compile(BUNDLED, target=["opencl", "llvm"])


def test_cli_bad_target(tmp_path):
    res = subprocess.run([KILN_CLI, "compile", BUNDLED, "-o", str(tmp_path / "x.so"), "--target",
                          "opencl -foo=1"], capture_output=True, text=True)
    assert res.returncode != 0 and "unknown flag `-foo`" in res.stderr, res.stderr
    assert not os.path.exists(tmp_path / "x.so")
