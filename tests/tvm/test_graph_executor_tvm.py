"""Kiln's graph executor runs kernels compiled by Apache TVM 0.27 (issue 5, seeds 001/004).

``build_graph_kernels.py`` compiles the kernels with TVM in a child process; this process imports
Kiln only. The graph JSON is the hand-written test graph of the Rust tests
(``crates/kiln-runtime/tests/graph_executor_support/mlp_graph.json``: dense, relu, add, a
two-output split, a flatten_data relu; storage ids shared). Path tested: factory (graph JSON +
params + TVM's object file) -> export_library to one .so -> load_module -> lib["default"](cpu)
-> set_input / run / get_output, on fresh random inputs with the outputs poisoned, against numpy.
Skipped when TVM is not installed.
"""

import importlib.util
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GRAPH = os.path.join(ROOT, "crates", "kiln-runtime", "tests", "graph_executor_support", "mlp_graph.json")
RNG = np.random.default_rng()

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="apache-tvm is not installed")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("tvm_graph_kernels")
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "build_graph_kernels.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "manifest.json") as f:
        manifest = json.load(f)
    manifest["dir"] = out
    return manifest


def graph_json():
    with open(GRAPH) as f:
        return f.read()


def params():
    return {
        "w": RNG.standard_normal((16, 8)).astype("float32"),
        "b": RNG.standard_normal(16).astype("float32"),
    }


def check(m, p, rounds=3):
    for _ in range(rounds):
        x = RNG.standard_normal((4, 8)).astype("float32")
        r = RNG.standard_normal((4, 16)).astype("float32")
        for i in range(m.get_num_outputs()):
            m.get_output(i).copyfrom(np.full((4, 8), np.nan, "float32"))
        m.set_input("x", x)
        m.set_input(3, r)
        m.run()
        h = np.maximum(x @ p["w"].T + p["b"], 0) + r
        np.testing.assert_allclose(m.get_output(0).numpy(), h[:, :8], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(m.get_output(1).numpy(), np.maximum(h[:, 8:], 0), rtol=1e-5, atol=1e-5)


def test_tvm_is_not_loaded_in_this_process():
    assert "tvm" not in sys.modules and "tvm_ffi" not in sys.modules


@pytest.fixture(scope="module")
def deploy(built):
    p = params()
    kernels = kiln.graph_executor.load_static_library(built["dir"] / "kernels.o", built["functions"])
    factory = kiln.graph_executor.factory(graph_json(), kernels, p)
    path = built["dir"] / "deploy.so"
    factory.export_library(path)
    return kiln.load_module(path), p


def test_factory_exported_with_tvm_kernels_runs(deploy):
    lib, p = deploy
    assert lib.kind == "GraphExecutorFactory"
    assert lib.imports[0].kind == "library"
    assert set(lib.imports[0].list_functions()) >= {"dense", "relu", "relu1d", "add", "split2"}
    m = GraphModule(lib["default"](kiln.cpu()))
    check(m, p)
    rows = m.profile(number=2)["rows"]
    assert {r["func_name"] for r in rows} == {"dense", "relu", "relu1d", "add", "split2"}


def test_tvm_exported_library_with_create(built):
    p = params()
    m = kiln.graph_executor.create(graph_json(), kiln.load_module(built["dir"] / "kernels.so"), kiln.cpu())
    m.set_input(**p)
    check(m, p)


def test_tvm_argument_checks_surface_with_the_node(built):
    # Without flatten_data, relu1d (compiled for [32]) gets a [4, 8] tensor: TVM's own check fails.
    text = graph_json().replace('"flatten_data": "1"', '"flatten_data": "0"')
    m = kiln.graph_executor.create(text, kiln.load_module(built["dir"] / "kernels.so"), kiln.cpu())
    m.set_input(**params())
    with pytest.raises(Exception, match=r"fused_relu_flat") as info:
        m.run()
    assert "relu1d" in str(info.value)


def test_executors_over_one_tvm_library_run_concurrently(deploy):
    lib, p = deploy
    errors = []

    def work():
        try:
            check(GraphModule(lib["default"](kiln.cpu())), p, rounds=20)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
