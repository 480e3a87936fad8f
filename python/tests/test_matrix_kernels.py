"""Matrix products (and the softmax between them) through ``kiln.onnx.compile`` against numpy (float64) on random inputs, in
the shapes that reach every edge of the x86 matrix kernel: a constant right-hand matrix packed
in column blocks with a partial last block, row counts that leave a shorter last row tile,
both at once, batch axes flattened into rows, one row (a classifier's vector), and products
of two runtime inputs. Each library runs twice on different inputs, so an element the second
run does not write still holds the first run's value and fails the comparison."""

import numpy as np
import pytest

import kiln
from kiln.graph_executor import GraphModule

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper

rng = np.random.default_rng(11)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def model_of(nodes, inputs, consts):
    vi = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, v.shape)
          for n, v in inputs.items()]
    graph = helper.make_graph(
        nodes, "g", vi, [helper.make_empty_tensor_value_info("y")],
        initializer=[numpy_helper.from_array(v, n) for n, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def run_twice(model, make_inputs, reference, targets=("llvm",)):
    """Compiles `model` for each of `targets`, runs it on two fresh input sets and checks each
    against `reference(inputs)`."""
    shapes = {k: v.shape for k, v in make_inputs().items()}
    for target in targets:
        lib = kiln.onnx.compile(model.SerializeToString(), shapes, target=target)
        gm = GraphModule(lib["default"](kiln.cpu()))
        for _ in range(2):
            inputs = make_inputs()
            for k, v in inputs.items():
                gm.set_input(k, v)
            gm.run()
            want = reference(inputs)
            got = gm.get_output(0).numpy()
            assert got.shape == want.shape
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * scale, err_msg=target)


@pytest.mark.parametrize("a_shape,n", [
    ((40, 120), 1001),      # shorter last row tile and a partial last column block
    ((48, 64), 77),         # whole row tiles, partial column block
    ((130, 64), 96),        # shorter last row tile, whole column blocks
    ((1, 96), 1000),        # one row: several column blocks a tile
    ((7, 33), 17),          # fewer columns than two vectors on AVX-512
    ((2, 5, 48), 77),       # batch axes flattened into rows
    ((2, 3, 5, 16), 40),
])
def test_matmul_by_a_constant_matrix(a_shape, n):
    b = rand(a_shape[-1], n)
    model = model_of([helper.make_node("MatMul", ["a", "b"], ["y"])],
                     {"a": rand(*a_shape)}, {"b": b})
    run_twice(model, lambda: {"a": rand(*a_shape)},
              lambda x: (x["a"].astype(np.float64) @ b.astype(np.float64)))


@pytest.mark.parametrize("a_shape,n", [
    ((50, 1024), 64),       # one group of row tiles, a shorter last tile
    ((200, 768), 64),       # two groups, the last one shorter
    ((2, 30, 1536), 128),   # batch axes flattened into rows
])
def test_long_reductions_in_chunks(a_shape, n):
    """Products whose column panel of B overflows L1 sum their reduction a chunk at a time
    over a group of row tiles held in a local array; a bias and ReLU follow."""
    b, c = rand(a_shape[-1], n), rand(n)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]),
             helper.make_node("Add", ["p", "c"], ["x"]),
             helper.make_node("Relu", ["x"], ["y"])]
    model = model_of(nodes, {"a": rand(*a_shape)}, {"b": b, "c": c})
    run_twice(model, lambda: {"a": rand(*a_shape)},
              lambda x: np.maximum(x["a"].astype(np.float64) @ b.astype(np.float64) + c, 0),
              targets=("llvm -mcpu=native", "llvm -mcpu=x86-64-v3"))


@pytest.mark.parametrize("m,k,n", [(40, 120, 1001), (3, 64, 250)])
def test_gemm_with_transposed_constant_weight_and_bias(m, k, n):
    w, c = rand(n, k), rand(n)
    model = model_of([helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1)],
                     {"a": rand(m, k)}, {"w": w, "c": c})
    run_twice(model, lambda: {"a": rand(m, k)},
              lambda x: x["a"].astype(np.float64) @ w.T.astype(np.float64) + c)


@pytest.mark.parametrize("a_shape,n", [((1, 40, 64), 6625), ((2, 9, 48), 77), ((3, 16), 40)])
def test_matmul_with_batch_axes_bias_and_gelu(a_shape, n):
    """A transformer's feed-forward product: MatMul of a batched input (flattened into rows and
    reshaped back), a bias and an erf GELU after it, which run in the product's output loop (the
    reshape moved after them); the last column block partial."""
    b, c = rand(a_shape[-1], n), rand(n)
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["p"]),
        helper.make_node("Add", ["p", "c"], ["x"]),
        helper.make_node("Div", ["x", "sqrt2"], ["xs"]),
        helper.make_node("Erf", ["xs"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["x", "e1"], ["xe"]),
        helper.make_node("Mul", ["xe", "half"], ["y"]),
    ]
    consts = {"b": b, "c": c, "sqrt2": np.array(np.sqrt(2.0), "float32"),
              "one": np.array(1.0, "float32"), "half": np.array(0.5, "float32")}
    model = model_of(nodes, {"a": rand(*a_shape)}, consts)

    def reference(x):
        from math import erf
        v = x["a"].astype(np.float64) @ b.astype(np.float64) + c
        return 0.5 * v * (1.0 + np.vectorize(erf)(v / np.sqrt(2.0)))

    run_twice(model, lambda: {"a": rand(*a_shape)}, reference)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((40, 120), (120, 37)),
    # B packed at run time in runs of several column blocks, the last block padded.
    ((24, 64), (64, 190)),
    ((3, 40, 17), (3, 17, 29)),
    ((2, 1, 9, 16), (3, 16, 33)),
])
def test_matmul_of_two_runtime_inputs(a_shape, b_shape):
    model = model_of([helper.make_node("MatMul", ["a", "b"], ["y"])],
                     {"a": rand(*a_shape), "b": rand(*b_shape)}, {})
    run_twice(model, lambda: {"a": rand(*a_shape), "b": rand(*b_shape)},
              lambda x: np.matmul(x["a"].astype(np.float64), x["b"].astype(np.float64)))


@pytest.mark.parametrize("b,h,s,d", [(1, 2, 80, 32), (2, 3, 45, 16), (1, 1, 7, 8)])
def test_attention_scores_fused_with_their_softmax(b, h, s, d):
    """Scaled dot-product attention: the scores' product runs inside the softmax a block of
    rows at a time (rows and columns that do not divide the register tile included)."""
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"]),
        helper.make_node("Mul", ["qk", "scale"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    shape = (b, h, s, d)
    scale = np.array(1.0 / np.sqrt(d), "float32")
    model = model_of(nodes, {n: rand(*shape) for n in "qkv"}, {"scale": scale})

    def reference(x):
        q, k, v = (x[n].astype(np.float64) for n in "qkv")
        a = q @ k.transpose(0, 1, 3, 2) * float(scale)
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    run_twice(model, lambda: {n: rand(*shape) * 2 for n in "qkv"}, reference)


@pytest.mark.parametrize("m,k,n", [(80, 64, 6625), (160, 256, 97), (5, 32, 9)])
def test_classifier_with_its_softmax(m, k, n):
    """A recognizer's classifier: a constant product whose last column block is partial (its
    padded columns computed and never read) and the softmax over its rows."""
    b, c = rand(k, n), rand(n)
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["p"]),
        helper.make_node("Add", ["p", "c"], ["x"]),
        helper.make_node("Softmax", ["x"], ["y"], axis=-1),
    ]
    model = model_of(nodes, {"a": rand(m, k)}, {"b": b, "c": c})

    def reference(x):
        v = x["a"].astype(np.float64) @ b.astype(np.float64) + c
        e = np.exp(v - v.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    run_twice(model, lambda: {"a": rand(m, k) * 3}, reference)


@pytest.mark.parametrize("shape,axis", [((3, 6625), -1), ((2, 2, 13, 40), -1), ((4, 7, 5), 1)])
def test_softmax_rows_in_vectors_with_a_shorter_last_vector(shape, axis):
    """Softmax (the attention and classifier kind) against numpy in float64: rows whose length is
    not a multiple of the vector width, and a softmax over a middle axis."""
    model = model_of([helper.make_node("Softmax", ["a"], ["y"], axis=axis)],
                     {"a": rand(*shape)}, {})

    def reference(x):
        a = x["a"].astype(np.float64) * 1.0
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    run_twice(model, lambda: {"a": rand(*shape) * 4}, reference)
