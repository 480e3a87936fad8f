"""One deploy.so, four hosts: the bundled model compiled by ``kiln compile`` gives the same
outputs, bit for bit, from the command line (``kiln run``), from C (``examples/c/run_model.c``
through the TVM-FFI C ABI) and from Python (``kiln.load_module``), and they match onnxruntime
(rtol 1e-4, atol 1e-5) on a fresh random input. (The Rust host is
``crates/kiln-cli/tests/deploy_runtime.rs``.) Also: executors made from one loaded library,
run concurrently from Python threads, each give their single-threaded result.
"""

import os
import shutil
import subprocess
import threading

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "examples", "model", "model.onnx")
LIB_DIR = os.path.dirname(os.path.abspath(kiln.LIB_PATH))
KILN = os.path.join(LIB_DIR, "kiln")
SHAPE = (1, 3, 32, 32)
# Where scripts/runtime_size.sh leaves the size-built deploy runtime (CI builds it first).
SIZED_RUNTIME_DIR = os.path.join(ROOT, "target", "deploy")


@pytest.fixture(scope="module")
def deploy(tmp_path_factory):
    """The bundled model compiled by the ``kiln`` binary next to the loaded library."""
    if not os.access(KILN, os.X_OK):
        pytest.skip(f"no kiln binary next to {kiln.LIB_PATH} (cargo build -p kiln-cli)")
    d = tmp_path_factory.mktemp("deploy")
    lib = str(d / "deploy.so")
    subprocess.run([KILN, "compile", MODEL, "-o", lib], check=True, capture_output=True)
    return lib


def fresh_input(rng=None):
    rng = rng or np.random.default_rng()
    return rng.uniform(-1, 1, SHAPE).astype(np.float32)


def python_run(lib_path, x):
    gm = GraphModule(kiln.load_module(lib_path)["default"](kiln.cpu()))
    gm.set_input("input", x)
    gm.run()
    return gm.get_output(0).numpy()


def build_c_example(out_dir, lib_dir=LIB_DIR):
    """``examples/c/run_model.c`` built against ``libkiln_runtime.so`` of ``lib_dir``."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    if not os.path.exists(os.path.join(lib_dir, "libkiln_runtime.so")):
        pytest.skip(f"no libkiln_runtime.so in {lib_dir}")
    exe = os.path.join(out_dir, "run_model")
    cmd = ["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
           os.path.join(ROOT, "examples", "c", "run_model.c"), "-I", os.path.join(ROOT, "include"),
           "-L", lib_dir, "-lkiln_runtime", f"-Wl,-rpath,{lib_dir}", "-o", exe]
    subprocess.run(cmd, check=True)
    return exe


def test_cli_c_python_and_onnxruntime_agree(deploy, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    x = fresh_input()
    x_path = str(tmp_path / "x.npy")
    np.save(x_path, x)

    cli_dir = tmp_path / "cli"
    subprocess.run([KILN, "run", deploy, "--input", f"input={x_path}", "--output-dir", str(cli_dir)],
                   check=True, capture_output=True)
    c_dir = tmp_path / "c"
    c_dir.mkdir()
    exe = build_c_example(str(tmp_path))
    subprocess.run([exe, deploy, f"input={x_path}", "-o", str(c_dir)], check=True, capture_output=True)
    py = python_run(deploy, x)

    cli = np.load(cli_dir / "output_0.npy")
    c = np.load(c_dir / "output_0.npy")
    assert cli.dtype == c.dtype == py.dtype == np.float32
    assert cli.shape == c.shape == py.shape
    np.testing.assert_array_equal(c, cli)
    np.testing.assert_array_equal(py, cli)
    # The C writer makes the same file as `kiln run`, byte for byte.
    assert (c_dir / "output_0.npy").read_bytes() == (cli_dir / "output_0.npy").read_bytes()

    sess = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    want = sess.run(None, {"input": x})[0]
    np.testing.assert_allclose(py, want, rtol=1e-4, atol=1e-5)


def test_size_built_runtime_runs_the_model(deploy, tmp_path):
    """The deploy runtime as ``scripts/runtime_size.sh`` ships it (fat LTO, opt-level "z", std
    rebuilt without its backtrace symbolizer) runs the model from C and matches onnxruntime, and
    reports bad inputs as the debug build does."""
    ort = pytest.importorskip("onnxruntime")
    if not os.path.exists(os.path.join(SIZED_RUNTIME_DIR, "libkiln_runtime.so")):
        pytest.skip(f"no {SIZED_RUNTIME_DIR}/libkiln_runtime.so (scripts/runtime_size.sh)")
    exe = build_c_example(str(tmp_path), SIZED_RUNTIME_DIR)
    x = fresh_input()
    x_path = str(tmp_path / "x.npy")
    np.save(x_path, x)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    subprocess.run([exe, deploy, f"input={x_path}", "-o", str(out_dir)], check=True,
                   capture_output=True)
    got = np.load(out_dir / "output_0.npy")
    sess = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    want = sess.run(None, {"input": x})[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    check_bad_inputs(exe, deploy, tmp_path)


def test_c_example_reports_bad_inputs(deploy, tmp_path):
    check_bad_inputs(build_c_example(str(tmp_path)), deploy, tmp_path)


def check_bad_inputs(exe, deploy, tmp_path):
    """Each bad argument to the C example fails with status 1 and a message naming it."""
    wrong = str(tmp_path / "wrong.npy")
    np.save(wrong, np.zeros((1, 3, 8, 8), np.float32))
    garbage = str(tmp_path / "garbage.npy")
    with open(garbage, "wb") as f:
        f.write(b"not an array")
    cases = [
        ([deploy, f"input={wrong}"], 'input "input" (#0): expected shape [1, 3, 32, 32]'),
        ([deploy, f"nope={wrong}"], 'no input named "nope"'),
        ([deploy, f"input={garbage}"], "is not a .npy file"),
        ([str(tmp_path / "missing.so"), f"input={wrong}"], "loading the library"),
    ]
    for args, needle in cases:
        p = subprocess.run([exe, *args], capture_output=True, text=True)
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        assert needle in p.stderr, (args, p.stderr)


def test_executors_from_one_library_run_concurrently(deploy):
    lib = kiln.load_module(deploy)
    rng = np.random.default_rng()
    xs = [fresh_input(rng) for _ in range(4)]
    single = GraphModule(lib["default"](kiln.cpu()))
    expected = []
    for x in xs:
        single.set_input("input", x)
        single.run()
        expected.append(single.get_output(0).numpy())
    errors = []

    def work(i):
        try:
            gm = GraphModule(lib["default"](kiln.cpu()))
            out = np.empty_like(expected[i])
            for _ in range(25):
                out[...] = np.nan
                gm.set_input("input", xs[i])
                gm.run()
                gm.get_output(0, out)
                np.testing.assert_array_equal(out, expected[i])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append((i, exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _if_model():
    """A model whose If decides at run time: y = relu(x * 2) when sum(x) > 0, else tanh(x)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T, helper as h, numpy_helper

    def branch(name, nodes, out):
        return h.make_graph(nodes, name, [], [h.make_tensor_value_info(out, T.FLOAT, [2, 3])])

    then = branch("t", [h.make_node("Mul", ["x", "two"], ["t1"]),
                        h.make_node("Relu", ["t1"], ["t2"])], "t2")
    other = branch("e", [h.make_node("Tanh", ["x"], ["e1"])], "e1")
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                     [numpy_helper.from_array(np.array(0, np.float32), "zero"),
                      numpy_helper.from_array(np.array(2, np.float32), "two")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("runtime_dir", [LIB_DIR, SIZED_RUNTIME_DIR], ids=["dev", "size-built"])
def test_c_example_runs_a_vm_library(tmp_path, runtime_dir):
    """A library for the virtual machine (an If on a run-time condition) runs from C through
    the same executor functions, on the development runtime and on the size-built one, and
    takes each branch as onnxruntime does."""
    ort = pytest.importorskip("onnxruntime")
    m = _if_model()
    lib = kiln.onnx.compile(m, {"x": (2, 3)}, target="llvm")
    path = str(tmp_path / "vm.so")
    lib.export_library(path)
    exe = build_c_example(str(tmp_path), runtime_dir)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng()
    for sign in (1, -1):
        x = (np.abs(rng.standard_normal((2, 3))) * sign).astype(np.float32)
        x_path = str(tmp_path / "x.npy")
        np.save(x_path, x)
        out_dir = tmp_path / f"out{sign}"
        out_dir.mkdir()
        p = subprocess.run([exe, path, f"x={x_path}", "-o", str(out_dir)], capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stderr
        got = np.load(out_dir / "output_0.npy")
        np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
