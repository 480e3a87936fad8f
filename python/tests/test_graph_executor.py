"""The graph executor from Python (kiln.graph_executor), with C kernels compiled here by ``cc``
(the same kernels and graph as the Rust tests, ``crates/kiln-runtime/tests/graph_executor_support``):
factory, export_library to one .so, load_module, GraphModule, params, zero copy, errors, debug
profile, benchmark, threads."""

import json
import os
import shutil
import subprocess
import threading

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUPPORT = os.path.join(ROOT, "crates", "kiln-runtime", "tests", "graph_executor_support")
KERNELS = ["dense", "relu", "relu1d", "add", "split2", "fail"]
RNG = np.random.default_rng()

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def graph_json():
    with open(os.path.join(SUPPORT, "mlp_graph.json")) as f:
        return f.read()


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    d = tmp_path_factory.mktemp("graph_kernels")
    src = os.path.join(SUPPORT, "kernels.c")
    obj, so = str(d / "kernels.o"), str(d / "kernels.so")
    subprocess.run(["cc", "-c", "-fPIC", "-O2", "-o", obj, src], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", so, src], check=True)
    return {"o": obj, "so": so, "dir": d}


def weights():
    return {
        "w": RNG.standard_normal((16, 8)).astype("float32"),
        "b": RNG.standard_normal(16).astype("float32"),
    }


def inputs():
    return {
        "x": RNG.standard_normal((4, 8)).astype("float32"),
        "r": RNG.standard_normal((4, 16)).astype("float32"),
    }


def reference(x, w, b, r):
    h = np.maximum(x @ w.T + b, 0) + r
    return h[:, :8], np.maximum(h[:, 8:], 0)


@pytest.fixture(scope="module")
def deploy(kernels):
    """A factory over the kernels, exported to one .so and loaded back."""
    params = weights()
    lib = kiln.graph_executor.factory(
        graph_json(), kiln.graph_executor.load_static_library(kernels["o"], KERNELS), params
    )
    path = str(kernels["dir"] / "deploy.so")
    lib.export_library(path)
    return kiln.load_module(path), params


def run_and_check(m, params):
    data = inputs()
    for i in range(2):
        m.get_output(i).copyfrom(np.full((4, 8), np.nan, "float32"))
    m.run(**data)
    lo, hi = reference(data["x"], params["w"], params["b"], data["r"])
    np.testing.assert_allclose(m.get_output(0).numpy(), lo, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.get_output(1).numpy(), hi, rtol=1e-5, atol=1e-5)


def test_exported_factory_runs_in_one_so(deploy):
    lib, params = deploy
    assert lib.kind == "GraphExecutorFactory"
    assert [m.kind for m in lib.imports] == ["library"]
    assert json.loads(lib["get_graph_json"]())["arg_nodes"] == [0, 1, 2, 3]
    assert sorted(lib["list_params"]()) == ["b", "w"]
    assert lib["get_lib"]().kind == "library"
    m = GraphModule(lib["default"](kiln.cpu()))
    assert m.get_num_inputs() == 4 and m.get_num_outputs() == 2
    for _ in range(3):
        run_and_check(m, params)
    saved = lib["get_graph_params"]()
    np.testing.assert_array_equal(saved["w"].numpy(), params["w"])


def test_executor_without_factory(kernels):
    params = weights()
    m = kiln.graph_executor.create(graph_json(), kiln.load_module(kernels["so"]), kiln.cpu())
    m.set_input(**params)
    run_and_check(m, params)
    tvm_name = kiln.get_global_func("tvm.graph_executor.create")
    m2 = GraphModule(tvm_name(graph_json(), kiln.load_module(kernels["so"]), 1, 0))
    m2.set_input("w", params["w"])
    m2.set_input(2, params["b"])
    run_and_check(m2, params)


def test_inputs_outputs_and_their_errors(deploy):
    lib, params = deploy
    m = GraphModule(lib["default"](kiln.cpu()))
    assert m.get_input_index("r") == 3 and m.get_input_index("nope") == -1
    shapes, dtypes = m.get_input_info()
    assert shapes == {"x": (4, 8), "w": (16, 8), "b": (16,), "r": (4, 16)}
    assert set(dtypes.values()) == {"float32"}
    assert m.get_output_info() == ([(4, 8), (4, 8)], ["float32", "float32"])
    np.testing.assert_array_equal(m.get_input("w").numpy(), params["w"])
    with pytest.raises(ValueError, match=r'input "x" \(#0\): expected shape \[4, 8\]'):
        m.set_input("x", np.zeros((8, 4), "float32"))
    with pytest.raises(TypeError, match="expected dtype float32 but got float64"):
        m.set_input("x", np.zeros((4, 8)))
    with pytest.raises(KeyError, match="no input named"):
        m.set_input("y", np.zeros((4, 8), "float32"))
    with pytest.raises(IndexError, match="out of range"):
        m.set_input(7, np.zeros((4, 8), "float32"))
    with pytest.raises(IndexError):
        m.get_output(2)
    with pytest.raises(TypeError, match=r"takes 2 arguments but got 1"):
        m["set_input"]("x")
    # Lists are converted to the input's dtype.
    m.set_input("b", [0.5] * 16)
    np.testing.assert_array_equal(m.get_input("b").numpy(), np.full(16, 0.5, "float32"))
    m.set_input("b", params["b"])
    data = inputs()
    m.run(**data)
    lo, hi = reference(data["x"], params["w"], params["b"], data["r"])
    out = np.full((4, 8), np.nan, "float32")
    assert m.get_output(1, out) is out
    np.testing.assert_allclose(out, hi, rtol=1e-5, atol=1e-5)
    t = kiln.empty((4, 8))
    m.get_output(0, t)
    np.testing.assert_allclose(t.numpy(), lo, rtol=1e-5, atol=1e-5)


def test_zero_copy(deploy):
    lib, params = deploy
    m = GraphModule(lib["default"](kiln.cpu()))
    data = inputs()
    x = kiln.tensor(data["x"])
    out = kiln.empty((4, 8))
    m.set_input_zero_copy("x", x)
    m.set_output_zero_copy(0, out)
    m.run(r=data["r"])
    np.testing.assert_allclose(
        out.numpy(), reference(data["x"], params["w"], params["b"], data["r"])[0], rtol=1e-5, atol=1e-5
    )
    x2 = RNG.standard_normal((4, 8)).astype("float32")
    x.copyfrom(x2)  # seen by the next run without set_input
    m.run()
    np.testing.assert_allclose(
        out.numpy(), reference(x2, params["w"], params["b"], data["r"])[0], rtol=1e-5, atol=1e-5
    )
    # numpy arrays share their memory; a misaligned one is refused rather than copied.
    buf = np.zeros(64, "float32")
    off = next(i for i in range(16) if (buf.ctypes.data + 4 * i) % 64 != 0)
    arr = buf[off : off + 32].reshape(4, 8)
    with pytest.raises(ValueError, match="aligned to 64 bytes"):
        m.set_input_zero_copy("x", arr)
    aligned = np.zeros(64 + 16, "float32")
    start = (-aligned.ctypes.data % 64) // 4
    shared = aligned[start : start + 32].reshape(4, 8)
    shared[...] = data["x"]
    m.set_input_zero_copy("x", shared)
    shared *= 2  # the executor reads the array's memory
    m.run()
    want = reference(2 * data["x"], params["w"], params["b"], data["r"])[0]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="expected shape"):
        m.set_input_zero_copy("x", kiln.empty((8, 4)))
    with pytest.raises(TypeError, match="expected dtype"):
        m.set_input_zero_copy("x", kiln.empty((4, 8), "int32"))


def test_params_format_and_sharing(deploy):
    lib, params = deploy
    blob = kiln.graph_executor.save_param_dict(params)
    assert blob[:8] == (0xF7E58D4F05049CB7).to_bytes(8, "little")
    back = kiln.graph_executor.load_param_dict(blob)
    np.testing.assert_array_equal(back["w"].numpy(), params["w"])
    fresh = weights()
    a = GraphModule(lib["default"](kiln.cpu()))
    a.load_params(kiln.graph_executor.save_param_dict(fresh))
    run_and_check(a, fresh)
    b = GraphModule(lib["default"](kiln.cpu()))
    b.share_params(a, blob)
    assert b.get_input("w").data_ptr == a.get_input("w").data_ptr
    run_and_check(b, fresh)
    with pytest.raises(ValueError, match="byte offset"):
        a.load_params(blob[:-5])
    with pytest.raises(ValueError, match="not a params file"):
        kiln.graph_executor.load_param_dict(b"\0" * 16)


def test_bad_graphs_and_libraries(kernels):
    so = kiln.load_module(kernels["so"])
    bad = graph_json().replace(
        '"storage_id": ["list_int", [0, 1, 2, 3, 4, 5, 4, 5, 6, 4]]',
        '"storage_id": ["list_int", [0, 1, 2, 3, 4, 5, 4, 5, 6, 99]]',
    )
    with pytest.raises(ValueError, match=r"storage_id\[9\] = 99 .*fused_relu_flat"):
        kiln.graph_executor.create(bad, so, kiln.cpu())
    with pytest.raises(ValueError, match="invalid JSON at line 1"):
        kiln.graph_executor.create("{nodes", so, kiln.cpu())
    missing = graph_json().replace('"func_name": "split2"', '"func_name": "split3"')
    with pytest.raises(AttributeError, match=r'nodes\[7\] \("fused_split"\) calls `split3`'):
        kiln.graph_executor.create(missing, so, kiln.cpu())
    failing = graph_json().replace('"func_name": "relu"', '"func_name": "fail"')
    m = kiln.graph_executor.create(failing, so, kiln.cpu())
    with pytest.raises(ValueError, match=r"always fails"):
        m.run()
    with pytest.raises(KeyError, match="not an input"):
        kiln.graph_executor.factory(graph_json(), so, {"q": np.zeros(3, "float32")})
    with pytest.raises(ValueError, match="ELF"):
        kiln.graph_executor.load_static_library(os.path.join(SUPPORT, "kernels.c"))


def test_debug_profile_and_benchmark(deploy, capsys):
    lib, _ = deploy
    m = GraphModule(lib["default"](kiln.cpu()))
    m.set_input(**inputs())
    rows = m.debug(number=3)
    table = capsys.readouterr().out
    for name in ("fused_dense", "fused_split", "relu1d", "Total", "Time (%)"):
        assert name in table
    assert sorted(r["name"] for r in rows) == sorted(
        ["fused_dense", "fused_relu", "fused_add", "fused_split", "fused_relu_flat"]
    )
    assert abs(sum(r["percent"] for r in rows) - 100.0) < 1e-6
    times = m.run_individual(2, 1, 0)
    assert len(times) == 9 and times[0] == 0.0 and all(t > 0 for t in times[4:])
    outs = m.debug_get_output("fused_split")
    assert [tuple(t.shape) for t in outs] == [(4, 8), (4, 8)]
    res = m.benchmark(kiln.cpu(), repeat=3, number=2)
    assert len(res.results) == 3 and res.min > 0
    e2e = m.benchmark(kiln.cpu(), repeat=2, number=1, end_to_end=True, **inputs())
    assert len(e2e.results) == 2


def test_executors_run_concurrently(deploy):
    lib, params = deploy
    errors = []

    def work():
        try:
            m = GraphModule(lib["default"](kiln.cpu()))
            for _ in range(20):
                run_and_check(m, params)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_reshapes_of_computed_values_run_no_kernel():
    """A reshape after a product (a MatMul on 3-D data runs as a 2-D dense product, then its
    result is reshaped back) is a `__nop` node whose output shares the product's storage; the
    results match numpy, across runs with fresh inputs and with the output poisoned."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng()
    w = rng.standard_normal((48, 40)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "views", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 48])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 40])],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(rng.standard_normal((40, 40)).astype("float32"), "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    w2 = numpy_helper.to_array(model.graph.initializer[1])
    lib = kiln.onnx.compile(model.SerializeToString(), target="llvm")
    nodes = json.loads(lib["get_graph_json"]())["nodes"]
    assert any(n.get("attrs", {}).get("func_name") == "__nop" for n in nodes), nodes
    gm = GraphModule(lib["default"](kiln.cpu()))
    for _ in range(2):
        x = rng.standard_normal((2, 5, 48)).astype("float32")
        gm.set_input("x", x)
        got = np.full((2, 5, 40), np.nan, "float32")
        gm.run()
        gm.get_output(0, got)
        want = np.maximum(x @ w, 0) @ w2
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_zero_copy_through_reshapes_at_the_graph_edges():
    """An output that is a reshape of a product (a `__nop` view of the product's storage) bound
    to outside memory, with the input too: the view copies into that memory, so the output
    array holds the result (poisoned before each run), also after the input goes back to the
    executor's memory."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng()
    w = rng.standard_normal((4, 5)).astype("float32")
    b = rng.standard_normal(5).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Add", ["h", "b"], ["y"])],
        "edges", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    lib = kiln.onnx.compile(model.SerializeToString(), target="llvm")
    nodes = json.loads(lib["get_graph_json"]())["nodes"]
    assert nodes[-1].get("attrs", {}).get("func_name") == "__nop", nodes
    gm = GraphModule(lib["default"](kiln.cpu()))
    x = kiln.empty((2, 3, 4))
    out = kiln.empty((2, 3, 5))
    gm.set_input_zero_copy("x", x)
    gm.set_output_zero_copy(0, out)
    for _ in range(2):
        xv = rng.standard_normal((2, 3, 4)).astype("float32")
        x.copyfrom(xv)
        out.copyfrom(np.full((2, 3, 5), np.nan, "float32"))
        gm.run()
        np.testing.assert_allclose(out.numpy(), xv @ w + b, rtol=1e-5, atol=1e-5)
    xv = rng.standard_normal((2, 3, 4)).astype("float32")
    gm.set_input("x", xv)  # back to the executor's memory
    out.copyfrom(np.full((2, 3, 5), np.nan, "float32"))
    gm.run()
    np.testing.assert_allclose(out.numpy(), xv @ w + b, rtol=1e-5, atol=1e-5)
