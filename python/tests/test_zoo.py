"""Model-zoo graphs (the onnx wheel's light models with seeded random weights, made by
``tests/zoo/make_zoo.py``) compiled by Kiln and compared with onnxruntime.

By default two cheap models run (squeezenet, shufflenet); ``KILN_ZOO_ALL=1`` runs all nine
(several minutes, about 2 GB of temporary files). Each model is checked twice: on
``make_zoo.py``'s stored input against its stored onnxruntime outputs, and on a fresh random
input against onnxruntime run here. Every output is compared after dividing both sides by the
reference's largest magnitude (deep networks with random weights reach large values), with
rtol 1e-4 and atol 1e-5; Kiln's outputs are poisoned with NaN before each run so a kernel that
writes nothing cannot pass.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAKE_ZOO = os.path.join(ROOT, "tests", "zoo", "make_zoo.py")
DEFAULT = ["squeezenet", "shufflenet"]
ALL = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
]
NAMES = ALL if os.environ.get("KILN_ZOO_ALL") == "1" else DEFAULT
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """The directory where ``make_zoo.py`` wrote NAME.onnx, NAME.input.npy and
    NAME.expected_K.npy for every model of :data:`NAMES`."""
    d = tmp_path_factory.mktemp("zoo")
    subprocess.run([sys.executable, MAKE_ZOO, str(d), *NAMES], check=True, capture_output=True)
    return d


def assert_close_scaled(got, ref, what):
    """``got`` equals ``ref`` within rtol/atol after both are divided by max |ref|."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != onnxruntime's {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != onnxruntime's {ref.dtype}"
    assert np.isfinite(got).all(), f"{what}: non-finite values"
    scale = max(float(np.abs(ref).max()), 1e-30)
    np.testing.assert_allclose(got / scale, ref / scale, rtol=RTOL, atol=ATOL, err_msg=what)


def run_poisoned(gm, x):
    """Run ``gm`` on ``x`` with every output poisoned (NaN) beforehand; the outputs as arrays."""
    shapes, dtypes = gm.get_output_info()
    for k, (shape, dtype) in enumerate(zip(shapes, dtypes)):
        gm.get_output(k).copyfrom(np.full(shape, np.nan, dtype))
    gm.set_input(0, x)
    gm.run()
    outs = []
    for k, (shape, dtype) in enumerate(zip(shapes, dtypes)):
        out = np.full(shape, np.nan, dtype)
        outs.append(gm.get_output(k, out))
    return outs


def runtime_input_name(model):
    """The first graph input that is not an initializer (old models list weights as inputs)."""
    inits = {t.name for t in model.graph.initializer}
    return next(i.name for i in model.graph.input if i.name not in inits)


def onnxruntime_outputs(path, name, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {name: x})


@pytest.mark.parametrize("name", NAMES)
def test_zoo_model_matches_onnxruntime(zoo, name):
    path = str(zoo / f"{name}.onnx")
    lib = kiln.onnx.compile(path)
    gm = GraphModule(lib["default"](kiln.cpu()))

    # make_zoo.py's own input and onnxruntime outputs.
    x = np.load(zoo / f"{name}.input.npy")
    got = run_poisoned(gm, x)
    expected = sorted(f for f in os.listdir(zoo) if f.startswith(f"{name}.expected_"))
    assert len(expected) == len(got), (expected, len(got))
    for k, out in enumerate(got):
        ref = np.load(zoo / f"{name}.expected_{k}.npy")
        assert_close_scaled(out, ref, f"{name} output {k} (stored input)")

    # A fresh random input, against onnxruntime run here.
    seed = int.from_bytes(os.urandom(4), "little")
    x2 = np.random.default_rng(seed).standard_normal(x.shape).astype(np.float32)
    input_name = runtime_input_name(onnx.load(path))
    refs = onnxruntime_outputs(path, input_name, x2)
    got = run_poisoned(gm, x2)
    for k, (out, ref) in enumerate(zip(got, refs)):
        assert_close_scaled(out, ref, f"{name} output {k} (random input, seed {seed})")
