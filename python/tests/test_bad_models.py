"""Bad input through the Python API: garbage and truncated models, unsupported opsets, unknown
operators, wrong inputs at run time, garbage and truncated libraries. Each must raise a Python
exception of the right type whose message names what is wrong and where; library loading runs
in a child process so that a crash (not an exception) is reported as a failure, not the end of
the test session. (The same cases for the `kiln` binary: crates/kiln-cli/tests/cli_errors.rs.)
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "examples", "model", "model.onnx")


def small_model(nodes, opset=13, domains=()):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    )
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=ops)
    model.ir_version = 8
    return model


def test_garbage_and_truncated_models(tmp_path):
    with pytest.raises(ValueError, match="not a valid ONNX model"):
        kiln.onnx.from_onnx(b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff garbage")
    data = open(MODEL, "rb").read()
    for cut in [0, 1, 7, 100, 1000, len(data) // 2, len(data) - 1]:
        path = tmp_path / f"cut{cut}.onnx"
        path.write_bytes(data[:cut])
        why = "has no graph" if cut == 0 else "not a valid ONNX model"
        with pytest.raises(ValueError, match=why) as info:
            kiln.onnx.compile(str(path))
        assert f"cut{cut}.onnx" in str(info.value)  # the file is named, not '<bytes>'
        with pytest.raises(ValueError, match=why):
            kiln.onnx.from_onnx(data[:cut])


@pytest.mark.parametrize("opset", [0, 99])
def test_unsupported_opset(opset, tmp_path):
    model = small_model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], opset=opset)
    path = tmp_path / f"opset{opset}.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ValueError, match=f"uses opset {opset}; Kiln supports opsets") as info:
        kiln.onnx.compile(path)
    assert f"opset{opset}.onnx" in str(info.value)


def test_unknown_operators_are_all_listed():
    model = small_model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="relu0"),
            helper.make_node("MyCustomOp", ["a"], ["b"], name="custom0", domain="com.example"),
            helper.make_node("MyCustomOp", ["b"], ["c"], name="custom1", domain="com.example"),
            helper.make_node("FooBar", ["c"], ["y"], name="foo0"),
        ],
        domains=["com.example"],
    )
    with pytest.raises(ValueError) as info:
        kiln.onnx.compile(model)
    msg = str(info.value)
    assert "2 unsupported operator type(s) in 3 node(s)" in msg, msg
    lines = msg.splitlines()
    custom = next(line for line in lines if "com.example.MyCustomOp" in line)
    assert "2 node(s), first: 'custom0'" in custom, msg
    foo = next(line for line in lines if "FooBar" in line)
    assert "1 node(s), first: 'foo0'" in foo, msg
    assert "Relu" not in msg


@pytest.fixture(scope="module")
def bundled():
    """An executor of the bundled model, compiled here."""
    return GraphModule(kiln.onnx.compile(MODEL, target="llvm")["default"](kiln.cpu()))


def test_wrong_inputs_at_run_time(bundled):
    gm = bundled
    with pytest.raises(ValueError, match=r'input "input" \(#0\): expected shape \[1, 3, 32, 32\]'):
        gm.set_input("input", np.zeros((1, 3, 8, 8), np.float32))
    with pytest.raises(ValueError, match=r"expected shape \[1, 3, 32, 32\]"):
        gm.set_input("input", np.zeros(3072, np.float32))
    with pytest.raises(TypeError, match="expected dtype float32 but got int64"):
        gm.set_input("input", np.zeros((1, 3, 32, 32), np.int64))
    with pytest.raises(TypeError, match="expected dtype float32 but got float64"):
        gm.set_input("input", np.zeros((1, 3, 32, 32)))
    with pytest.raises(KeyError, match='no input named "nope"'):
        gm.set_input("nope", np.zeros((1, 3, 32, 32), np.float32))
    with pytest.raises(IndexError, match="out of range"):
        gm.set_input(99, np.zeros((1, 3, 32, 32), np.float32))
    # After the errors the executor still runs and matches onnxruntime.
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng().uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    gm.set_input("input", x)
    gm.run()
    want = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-4, atol=1e-5)


LOAD = """
import sys, kiln
try:
    kiln.load_module(sys.argv[1])
except Exception as e:
    print(type(e).__name__ + ": " + str(e))
else:
    print("loaded")
"""


def load_in_child(path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               KILN_LIBRARY_PATH=os.path.dirname(os.path.abspath(kiln.LIB_PATH)))
    p = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, f"loading {path} crashed (exit {p.returncode}):\n{p.stderr}"
    return p.stdout.strip()


def test_garbage_and_truncated_libraries(tmp_path):
    lib = tmp_path / "deploy.so"
    kiln.onnx.compile(MODEL, target="llvm").export_library(str(lib))
    assert load_in_child(lib) == "loaded"
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"this is not a shared library")
    out = load_in_child(garbage)
    assert "garbage.so" in out and "Error" in out, out
    data = lib.read_bytes()
    for cut in [0, 40, 1000, len(data) // 4, len(data) // 2]:
        path = tmp_path / f"cut{cut}.so"
        path.write_bytes(data[:cut])
        out = load_in_child(path)
        assert out.startswith(("ValueError", "RuntimeError")) and f"cut{cut}.so" in out, out
