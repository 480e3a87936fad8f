#!/usr/bin/env python3
"""A transformer encoder layer built with onnx.helper, plus onnxruntime references.

    make_transformer.py OUTDIR [NAME ...]

NAME is `transformer` (layer norm as the opset-17 LayerNormalization op, attention scores
scaled by Div), `transformer_decomposed` (layer norm spelled out as
ReduceMean/Sub/Pow/Add/Sqrt/Div/Mul/Add, scores scaled by Mul) or `transformer_2d` (the same
layer on a [SEQ, HIDDEN] input with 2-D MatMuls only: heads by Split/Concat on the feature axis,
one Q.K^T and P.V MatMul pair per head); default: all three. For each, writes
OUTDIR/NAME.onnx, OUTDIR/NAME.input.npy (a seeded random input) and OUTDIR/NAME.expected_0.npy
(onnxruntime's output at one thread), the file layout of make_zoo.py, so tests/zoo/compare.py
and bench/models read them too.

The layer (pre-norm, as in GPT-2 and most recent encoders), input x [1, SEQ, HIDDEN]:

    h  = LayerNorm(x)
    q, k, v = h @ Wq + bq, h @ Wk + bk, h @ Wv + bv        each reshaped to [1, S, HEADS, D]
                                                          and transposed to [1, HEADS, S, D]
    p  = Softmax((q @ k^T) / sqrt(D))                     k transposed to [1, HEADS, D, S]
    a  = (p @ v) transposed back, reshaped to [1, S, HIDDEN], then @ Wo + bo
    x1 = x + a
    f  = LayerNorm(x1) @ W1 + b1                          [1, S, FFN]
    y  = x1 + GELU(f) @ W2 + b2                           GELU(f) = f * 0.5 * (1 + erf(f / sqrt 2))

Weights are seeded normals scaled by 1/sqrt(fan-in); layer-norm scales in [0.5, 1.5].
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ, HIDDEN, HEADS, FFN = 128, 256, 4, 1024
NAMES = ["transformer", "transformer_decomposed", "transformer_2d"]
SEED = 20261123
OPSET = 17


class Builder:
    """Collects nodes and initializers with unique names."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, base, array):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def weight(self, base, shape):
        w = self.rng.standard_normal(shape) / np.sqrt(shape[0])
        return self.const(base, w.astype(np.float32))

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out + "_node", **attrs))
        return out

    def op_n(self, op_type, inputs, n, **attrs):
        """A node with ``n`` outputs."""
        outs = [self.name(op_type.lower()) for _ in range(n)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=outs[0] + "_node", **attrs))
        return outs

    def linear(self, x, n_in, n_out, base):
        w = self.weight(base + "_w", (n_in, n_out))
        b = self.const(base + "_b", self.rng.uniform(-0.1, 0.1, n_out).astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x, decomposed, base):
        gamma = self.const(base + "_gamma", self.rng.uniform(0.5, 1.5, HIDDEN).astype(np.float32))
        beta = self.const(base + "_beta", self.rng.uniform(-0.1, 0.1, HIDDEN).astype(np.float32))
        if not decomposed:
            return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        d = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Pow", [d, self.const("two", np.float32(2.0))])],
                      axes=[-1], keepdims=1)
        std = self.op("Sqrt", [self.op("Add", [var, self.const("eps", np.float32(1e-5))])])
        return self.op("Add", [self.op("Mul", [self.op("Div", [d, std]), gamma]), beta])

    def heads(self, x, perm):
        shape = self.const("heads_shape", np.array([1, SEQ, HEADS, HIDDEN // HEADS], np.int64))
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=perm)


    def scale_scores(self, scores, use_mul):
        scale = float(np.sqrt(HIDDEN // HEADS))
        if use_mul:
            return self.op("Mul", [scores, self.const("inv_sqrt_d", np.float32(1.0 / scale))])
        return self.op("Div", [scores, self.const("sqrt_d", np.float32(scale))])

    def attention(self, h, use_mul):
        """Multi-head self-attention on [1, S, HIDDEN]: heads by Reshape/Transpose, batched
        MatMuls on [1, HEADS, S, D]."""
        q = self.heads(self.linear(h, HIDDEN, HIDDEN, "q"), [0, 2, 1, 3])
        k = self.heads(self.linear(h, HIDDEN, HIDDEN, "k"), [0, 2, 3, 1])
        v = self.heads(self.linear(h, HIDDEN, HIDDEN, "v"), [0, 2, 1, 3])
        probs = self.op("Softmax", [self.scale_scores(self.op("MatMul", [q, k]), use_mul)], axis=-1)
        ctx = self.op("Transpose", [self.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        shape = self.const("merge_shape", np.array([1, SEQ, HIDDEN], np.int64))
        return self.op("Reshape", [ctx, shape])

    def attention_2d(self, h):
        """The same attention on [S, HIDDEN] with 2-D MatMuls only: heads by Split on the
        feature axis, one MatMul pair per head, Concat back."""
        q = self.op_n("Split", [self.linear(h, HIDDEN, HIDDEN, "q")], HEADS, axis=1)
        k = self.op_n("Split", [self.linear(h, HIDDEN, HIDDEN, "k")], HEADS, axis=1)
        v = self.op_n("Split", [self.linear(h, HIDDEN, HIDDEN, "v")], HEADS, axis=1)
        ctx = []
        for i in range(HEADS):
            kt = self.op("Transpose", [k[i]], perm=[1, 0])
            scores = self.scale_scores(self.op("MatMul", [q[i], kt]), False)
            probs = self.op("Softmax", [scores], axis=-1)
            ctx.append(self.op("MatMul", [probs, v[i]]))
        return self.op("Concat", ctx, axis=1)


def make_model(decomposed, seed=SEED, two_d=False):
    """The encoder layer as an onnx.ModelProto (opset 17), weights seeded by ``seed``.

    ``decomposed``: layer norm spelled out and scores scaled by Mul; ``two_d``: input
    [SEQ, HIDDEN] and 2-D MatMuls only (heads split per head), LayerNormalization op."""
    b = Builder(np.random.default_rng(seed))
    x = "x"
    h = b.layer_norm(x, decomposed, "ln1")
    ctx = b.attention_2d(h) if two_d else b.attention(h, use_mul=decomposed)
    x1 = b.op("Add", [x, b.linear(ctx, HIDDEN, HIDDEN, "o")])
    f = b.linear(b.layer_norm(x1, decomposed, "ln2"), HIDDEN, FFN, "ffn1")
    erf = b.op("Erf", [b.op("Div", [f, b.const("sqrt2", np.float32(np.sqrt(2.0)))])])
    gelu = b.op("Mul", [b.op("Mul", [f, b.op("Add", [erf, b.const("one", np.float32(1.0))])]),
                        b.const("half", np.float32(0.5))])
    y = b.op("Add", [x1, b.linear(gelu, FFN, HIDDEN, "ffn2")])
    b.nodes.append(helper.make_node("Identity", [y], ["y"], name="output"))
    graph = helper.make_graph(
        b.nodes,
        "transformer_encoder_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape(two_d))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, input_shape(two_d))],
        initializer=b.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def input_shape(two_d):
    """The input (and output) shape of a variant."""
    return [SEQ, HIDDEN] if two_d else [1, SEQ, HIDDEN]


def make_named(name, seed=SEED):
    """The model called ``name`` (one of :data:`NAMES`)."""
    if name not in NAMES:
        raise ValueError(f"unknown model {name!r} (known: {', '.join(NAMES)})")
    return make_model(decomposed=name.endswith("_decomposed"), seed=seed, two_d=name.endswith("_2d"))


def onnxruntime_output(model, x):
    """onnxruntime's output for input ``x`` at one thread."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    names = sys.argv[2:] or NAMES
    os.makedirs(out, exist_ok=True)
    for name in names:
        try:
            model = make_named(name)
        except ValueError as e:
            raise SystemExit(str(e))
        onnx.save(model, os.path.join(out, f"{name}.onnx"))
        shape = input_shape(name.endswith("_2d"))
        x = np.random.default_rng(SEED + 1).standard_normal(shape).astype(np.float32)
        y = onnxruntime_output(model, x)
        np.save(os.path.join(out, f"{name}.input.npy"), x)
        np.save(os.path.join(out, f"{name}.expected_0.npy"), y)
        print(f"{name}: {len(model.graph.node)} nodes, input x {list(x.shape)} -> y "
              f"{list(y.shape)} |max| {np.abs(y).max():.3g}")


if __name__ == "__main__":
    main()
