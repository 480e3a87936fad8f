#!/usr/bin/env python3
"""Model-zoo graphs from the onnx wheel with seeded random weights, plus onnxruntime references.

    make_zoo.py OUTDIR [NAME ...]

For each model (default: all of `onnx/backend/test/data/light/`), writes OUTDIR/NAME.onnx, whose
initializers are replaced by seeded random values of the same shape (the stored ones are all 0.02,
which hides errors; most are made by ConstantOfShape nodes, which become initializers first),
OUTDIR/NAME.input.npy (a seeded random input) and OUTDIR/NAME.expected_K.npy (onnxruntime's
outputs at one thread; output 1 is the final Softmax's input, whose errors the nearly uniform
probabilities would hide). Weights are drawn from a fan-in scaled normal so activations stay O(1)
through deep networks; batch-norm variances and scales are drawn in [0.5, 1.5].
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
SEED = 20261122


def all_names():
    return sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT)
                  if f.startswith("light_") and f.endswith(".onnx"))


def materialize_weights(model):
    """The light models make most weights with ConstantOfShape over a stored shape: turn each such
    node into a float initializer of that shape, so that it can be given random values."""
    inits = {t.name: t for t in model.graph.initializer}
    keep = []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = numpy_helper.to_array(inits[node.input[0]]).astype(np.int64).tolist()
            arr = np.zeros(shape, np.float32)
            model.graph.initializer.append(numpy_helper.from_array(arr, node.output[0]))
        else:
            keep.append(node)
    del model.graph.node[:]
    model.graph.node.extend(keep)
    used = {i for n in model.graph.node for i in n.input}
    unused = [t for t in model.graph.initializer if t.name not in used]
    for t in unused:
        model.graph.initializer.remove(t)
    for inp in [i for i in model.graph.input if i.name in {t.name for t in unused}]:
        model.graph.input.remove(inp)
    return model


def randomize(model, rng):
    """Replace every float initializer with seeded random values of its shape."""
    bn_var = set()
    bn_scale = set()
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            bn_scale.add(node.input[1])
            bn_var.add(node.input[4])
    for i, t in enumerate(model.graph.initializer):
        if t.data_type != onnx.TensorProto.FLOAT:
            continue
        shape = tuple(t.dims)
        if t.name in bn_var:
            arr = rng.uniform(0.5, 1.5, shape)
        elif t.name in bn_scale:
            arr = rng.uniform(0.5, 1.5, shape)
        elif len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            arr = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        else:
            arr = rng.uniform(-0.1, 0.1, shape)
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr.astype(np.float32), t.name))
    return model


def expose_logits(model):
    """Add the input of a final Softmax as a second graph output: the probabilities of random
    weights are nearly uniform, which would hide errors in everything before them."""
    outs = {o.name for o in model.graph.output}
    for node in model.graph.node:
        if node.op_type == "Softmax" and node.output[0] in outs:
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(node.input[0]))
    return model


def input_shape(model):
    inits = {t.name for t in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name not in inits:
            dims = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
            return inp.name, dims
    raise SystemExit("model has no runtime input")


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    names = sys.argv[2:] or all_names()
    os.makedirs(out, exist_ok=True)
    import onnxruntime as ort
    for k, name in enumerate(names):
        rng = np.random.default_rng(SEED + k)
        model = onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))
        model = expose_logits(randomize(materialize_weights(model), rng))
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(model, path)
        iname, dims = input_shape(model)
        x = rng.standard_normal(dims).astype(np.float32)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        ys = sess.run(None, {iname: x})
        np.save(os.path.join(out, f"{name}.input.npy"), x)
        for j, y in enumerate(ys):
            np.save(os.path.join(out, f"{name}.expected_{j}.npy"), y)
        print(f"{name}: input {iname} {dims} -> outputs "
              + ", ".join(f"{list(y.shape)} |max| {np.abs(y).max():.3g}" for y in ys))


if __name__ == "__main__":
    main()
