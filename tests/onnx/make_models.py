#!/usr/bin/env python3
"""Small ONNX models for kiln-onnx's tests, made with the `onnx` package (fixed seeds).

    make_models.py OUTDIR              write the models into OUTDIR, and OUTDIR/expected.json:
                                       for each valid model, what the onnx package sees in it
    make_models.py --summarize F...    print that same summary (JSON) for existing .onnx files

The summary of a model: ir_version, opsets, nodes (name, op type, domain, inputs, outputs), op
counts, initializers (dims, data type code, sum, values when small), runtime inputs (name, element
type, dims with symbolic names) and output names, and the values of Constant nodes. The Rust
tests (crates/kiln-onnx/tests/onnx_models.rs) compare kiln-onnx's view of the same file to it.
"""
import json
import os
import sys
from collections import Counter

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20240601
MAX_VALUES = 64  # initializers up to this size carry their values in the summary


def to_list(arr):
    return np.asarray(arr).astype(np.float64).reshape(-1).tolist()


def constant_value(node):
    a = node.attribute[0]
    if a.name == "value":
        return list(a.t.dims), to_list(numpy_helper.to_array(a.t))
    if a.name == "value_float":
        return [], [float(a.f)]
    if a.name == "value_int":
        return [], [float(a.i)]
    if a.name == "value_floats":
        return [len(a.floats)], [float(v) for v in a.floats]
    if a.name == "value_ints":
        return [len(a.ints)], [float(v) for v in a.ints]
    return None, None


def summarize(model):
    g = model.graph
    inits = {t.name for t in g.initializer}
    initializers = {}
    for t in g.initializer:
        entry = {"dims": list(t.dims), "data_type": t.data_type,
                 "sum": float(np.asarray(numpy_helper.to_array(t)).astype(np.float64).sum())}
        if int(np.prod(t.dims)) <= MAX_VALUES:
            entry["values"] = to_list(numpy_helper.to_array(t))
        initializers[t.name] = entry

    def dims(v):
        tt = v.type.tensor_type
        if not tt.HasField("shape"):
            return None
        out = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                out.append(d.dim_value)
            elif d.HasField("dim_param") and d.dim_param:
                out.append(d.dim_param)
            else:
                out.append(None)
        return out

    constants = {}
    for n in g.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            shape, values = constant_value(n)
            constants[n.output[0]] = {"dims": shape, "values": values}
    return {
        "ir_version": model.ir_version,
        "opsets": {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import},
        "nodes": [
            {"name": n.name, "op_type": n.op_type, "domain": n.domain,
             "inputs": list(n.input), "outputs": list(n.output)}
            for n in g.node
        ],
        "op_counts": dict(Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                                  for n in g.node)),
        "initializers": initializers,
        "inputs": [{"name": i.name, "elem_type": i.type.tensor_type.elem_type, "dims": dims(i)}
                   for i in g.input if i.name not in inits],
        "outputs": [o.name for o in g.output],
        "constants": constants,
    }


def model(nodes, inputs, outputs, inits=(), opset=13, name="g", check=True):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="kiln-tests")
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    return m


def conv_relu(rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    inits = [
        numpy_helper.from_array(w, "W"),  # raw_data
        helper.make_tensor("B", TensorProto.FLOAT, [4], b.tolist(), raw=False),  # float_data
    ]
    nodes = [
        helper.make_node("Constant", [], ["shape"],
                         value=helper.make_tensor("s", TensorProto.INT64, [2], [0, -1]), name="shape_const"),
        helper.make_node("Constant", [], ["alpha"], value_float=0.5, name="alpha_const"),
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1],
                         strides=[1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "alpha"], ["m"], name="scale"),
        helper.make_node("Reshape", ["m", "shape"], ["y"], name="flatten"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 256])
    m = model(nodes, [x], [y], inits)
    return onnx.shape_inference.infer_shapes(m)


def dtypes(rng):
    inits = []
    specs = [
        (np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16),
        (np.float64, TensorProto.DOUBLE), (np.int8, TensorProto.INT8), (np.int16, TensorProto.INT16),
        (np.int32, TensorProto.INT32), (np.int64, TensorProto.INT64), (np.uint8, TensorProto.UINT8),
        (np.uint16, TensorProto.UINT16), (np.uint32, TensorProto.UINT32),
        (np.uint64, TensorProto.UINT64), (np.bool_, TensorProto.BOOL),
    ]
    for np_t, onnx_t in specs:
        if np_t == np.bool_:
            a = rng.integers(0, 2, (2, 3)).astype(np.bool_)
        elif np.issubdtype(np_t, np.integer):
            info = np.iinfo(np_t)
            a = rng.integers(max(info.min, -1000), min(info.max, 1000), (2, 3), endpoint=True).astype(np_t)
        else:
            a = rng.standard_normal((2, 3)).astype(np_t)
        name = np.dtype(np_t).name
        inits.append(numpy_helper.from_array(a, f"raw_{name}"))
        inits.append(helper.make_tensor(f"typed_{name}", onnx_t, [2, 3], a.reshape(-1).tolist(), raw=False))
    # bfloat16: values exactly representable, raw bits and typed (int32_data) forms.
    vals = np.array([1.5, -2.0, 0.25, 3.0, -0.125, 96.0], dtype=np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
    inits.append(helper.make_tensor("raw_bfloat16", TensorProto.BFLOAT16, [2, 3], bits.tobytes(), raw=True))
    inits.append(helper.make_tensor("typed_bfloat16", TensorProto.BFLOAT16, [2, 3], vals.tolist(), raw=False))
    inits.append(helper.make_tensor("scalar_int64", TensorProto.INT64, [], [7]))
    inits.append(helper.make_tensor("empty_float", TensorProto.FLOAT, [0, 3], []))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    return model([helper.make_node("Identity", ["x"], ["y"], name="id")], [x], [y], inits)


def symbolic():
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4])
    b = helper.make_tensor_value_info("b", TensorProto.INT64, ["batch", "seq"])
    ya = helper.make_tensor_value_info("ya", TensorProto.FLOAT, ["batch", 4])
    yb = helper.make_tensor_value_info("yb", TensorProto.INT64, ["batch", "seq"])
    nodes = [helper.make_node("Identity", ["a"], ["ya"], name="ida"),
             helper.make_node("Identity", ["b"], ["yb"], name="idb")]
    return model(nodes, [a, b], [ya, yb])


def chain(order, opset=13, extra=()):
    """x -> Relu(a) -> Neg(b) -> Abs(y), with the nodes stored in `order`."""
    nodes = {
        "a": helper.make_node("Relu", ["x"], ["a"], name="a"),
        "b": helper.make_node("Neg", ["a"], ["b"], name="b"),
        "c": helper.make_node("Abs", ["b"], ["y"], name="c"),
    }
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    return model([nodes[k] for k in order] + list(extra), [x], [y], opset=opset, check=False)


def main(out):
    rng = np.random.default_rng(SEED)
    os.makedirs(out, exist_ok=True)
    valid = {
        "conv_relu": conv_relu(rng),
        "dtypes": dtypes(rng),
        "symbolic": symbolic(),
        "unsorted": chain("cba"),
    }
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    invalid = {
        "opset0": chain("abc", opset=0),
        "opset26": chain("abc", opset=26),
        "cycle": model([helper.make_node("Add", ["x", "b"], ["a"], name="add"),
                        helper.make_node("Relu", ["a"], ["b"], name="relu"),
                        helper.make_node("Identity", ["a"], ["y"], name="out")], [x], [y], check=False),
        "undefined": model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [y], check=False),
        "duplicate": model([helper.make_node("Relu", ["x"], ["y"], name="r1"),
                            helper.make_node("Neg", ["x"], ["y"], name="r2")], [x], [y], check=False),
        "unsupported": model([
            helper.make_node("Relu", ["x"], ["r0"], name="r0"),
            helper.make_node("Foo", ["r0"], ["f1"], name="foo_1", domain="com.example"),
            helper.make_node("Sin", ["f1"], ["h1"], name="sin_1"),
            helper.make_node("Sin", ["h1"], ["h2"], name="sin_2"),
            helper.make_node("Einsum", ["h2"], ["e1"], equation="i->i"),
            helper.make_node("Foo", ["e1"], ["y"], name="foo_2", domain="com.example"),
        ], [x], [y], check=False),
    }
    invalid["unsupported"].opset_import.append(helper.make_opsetid("com.example", 1))
    expected = {}
    for name, m in {**valid, **invalid}.items():
        onnx.save_model(m, os.path.join(out, f"{name}.onnx"))
        if name in valid:
            expected[name] = summarize(m)
    onnx.save_model(valid["conv_relu"], os.path.join(out, "external.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="external.bin", size_threshold=0)
    data = valid["conv_relu"].SerializeToString()
    with open(os.path.join(out, "truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(out, "garbage.onnx"), "wb") as f:
        f.write(np.random.default_rng(SEED).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--summarize":
        json.dump({p: summarize(onnx.load(p)) for p in sys.argv[2:]}, sys.stdout)
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
