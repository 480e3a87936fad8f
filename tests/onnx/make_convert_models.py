#!/usr/bin/env python3
"""Small ONNX models for the kiln-onnx converter tests (fixed seeds), with onnxruntime's output shapes.

    make_convert_models.py OUTDIR      write OUTDIR/<name>.onnx and OUTDIR/expected.json:
                                       {name: {"inputs": {name: shape}, "outputs": [[dims]...]}}
                                       for valid models (shapes from onnxruntime), and
                                       {name: {"error": [substrings]}} for models that must fail.
    make_convert_models.py --zoo       print {model path: {"inputs": ..., "outputs": ...}} for the
                                       light model zoo graphs in the onnx wheel (shapes from onnx's
                                       shape inference).

The Rust test (crates/kiln-onnx/tests/convert_models.rs) converts each model with
kiln_onnx::from_onnx, runs InferType and compares the output types.
"""
import glob
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20240602
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_empty_tensor_value_info(o) if isinstance(o, str) else o for o in outputs],
                              initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="kiln-tests")
    m.ir_version = 8
    return m


def init(rng, name, shape, dtype=np.float32):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def node(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, name=f"{outs[0]}_node", **kw)


def conv_block(rng):
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 2, 1, 0], strides=[2, 1], dilations=[1, 2]),
        node("BatchNormalization", ["c1", "g", "b", "m", "v"], ["bn"], epsilon=1e-3),
        node("Relu", ["bn"], ["r"]),
        node("Conv", ["r", "W2"], ["c2"], group=4, auto_pad="SAME_UPPER", strides=[2, 2]),
        node("MaxPool", ["c2"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        node("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
        node("GlobalAveragePool", ["p2"], ["gp"]),
        node("GlobalMaxPool", ["p1"], ["gm"]),
        node("Add", ["gp", "gm"], ["s"]),
        node("Flatten", ["s"], ["f"]),
        node("Gemm", ["f", "Wd", "Bd"], ["y"], transB=1, alpha=0.5, beta=2.0),
        node("Conv", ["x", "W3"], ["y2"], auto_pad="VALID", kernel_shape=[3, 3]),
    ]
    inits = [init(rng, "W1", (8, 3, 3, 3)), init(rng, "B1", (8,)), init(rng, "g", (8,)), init(rng, "b", (8,)),
             init(rng, "m", (8,)), numpy_helper.from_array(rng.random(8).astype(np.float32) + 0.5, "v"),
             init(rng, "W2", (8, 2, 3, 3)), init(rng, "Wd", (10, 8)), init(rng, "Bd", (10,)),
             init(rng, "W3", (4, 3, 3, 3))]
    return model(nodes, [vi("x", ["N", 3, 17, 15])], ["y", "y2"], inits), {"x": [2, 3, 17, 15]}


def conv_misc(rng):
    nodes = [
        node("Conv", ["x1", "W1"], ["y1"], pads=[1, 1], strides=[2]),
        node("ConvTranspose", ["x", "Wt", "Bt"], ["y2"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
        node("ConvTranspose", ["x", "Wt"], ["y3"], strides=[2, 2], output_shape=[10, 12]),
        node("MaxPool", ["x1"], ["y4"], kernel_shape=[2], strides=[2]),
    ]
    inits = [init(rng, "W1", (6, 4, 3)), init(rng, "Wt", (3, 5, 3, 3)), init(rng, "Bt", (5,))]
    return model(nodes, [vi("x", [1, 3, 5, 6]), vi("x1", [2, 4, 9])], ["y1", "y2", "y3", "y4"], inits), {}


def matmuls(rng):
    nodes = [
        node("MatMul", ["a", "B"], ["y1"]),
        node("MatMul", ["a", "b4"], ["y2"]),
        node("MatMul", ["v", "B"], ["y3"]),
        node("MatMul", ["B", "w"], ["y4"]),
        node("MatMul", ["v", "v"], ["y5"]),
        node("Gemm", ["At", "B"], ["y6"], transA=1, alpha=2.0),
        node("Gemm", ["At", "B", "c"], ["y7"], transA=1, beta=0.5),
    ]
    inits = [init(rng, "B", (5, 6)), init(rng, "At", (5, 3)), init(rng, "c", (6,))]
    ins = [vi("a", [2, 3, 4, 5]), vi("b4", [3, 5, 7]), vi("v", [5]), vi("w", [6])]
    return model(nodes, ins, ["y1", "y2", "y3", "y4", "y5", "y6", "y7"], inits), {}


def elementwise(rng, opset):
    un = ["Sigmoid", "Tanh", "Erf", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Neg", "Floor", "Ceil", "Round",
          "Relu", "Identity"]
    if opset < 11:
        un.remove("Round")
    nodes, outs = [], []
    for op in un:
        nodes.append(node(op, ["x"], [f"u_{op}"]))
        outs.append(f"u_{op}")
    for op in ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"]:
        nodes.append(node(op, ["x", "row"], [f"b_{op}"]))
        outs.append(f"b_{op}")
    for op in ["Equal", "Less", "Greater"]:
        if op == "Equal" and opset < 11:  # float Equal is opset 11+
            nodes.append(node("Less", ["row", "x"], [f"c_{op}"]))
        else:
            nodes.append(node(op, ["x", "row"], [f"c_{op}"]))
    nodes += [
        node("Not", ["c_Less"], ["n"]),
        node("And", ["n", "c_Greater"], ["an"]),
        node("Or", ["an", "c_Equal"], ["o"]),
        node("Where", ["o", "x", "row"], ["wh"]),
        node("Cast", ["o"], ["cast"], to=TensorProto.INT32),
        node("HardSigmoid", ["x"], ["hs"], alpha=0.3),
        node("LeakyRelu", ["x"], ["lr"], alpha=0.1),
        node("Dropout", ["x"], ["dr"]),
        node("Max", ["x", "row", "x"], ["max3"]),
    ]
    outs += ["wh", "cast", "hs", "lr", "dr", "max3"]
    if opset >= 14:
        nodes.append(node("HardSwish", ["x"], ["hsw"]))
        outs.append("hsw")
    if opset >= 11:
        nodes += [node("Clip", ["x", "lo", "hi"], ["clip"]), node("Clip", ["x", "", "hi"], ["clip2"])]
        inits = [numpy_helper.from_array(np.array(-0.5, np.float32), "lo"),
                  numpy_helper.from_array(np.array(0.5, np.float32), "hi")]
    else:
        nodes += [node("Clip", ["x"], ["clip"], min=-0.5, max=0.5), node("Clip", ["x"], ["clip2"], max=0.5)]
        inits = []
    outs += ["clip", "clip2"]
    inits.append(init(rng, "row", (5,)))
    return model(nodes, [vi("x", [2, 3, 5])], outs, inits, opset=opset), {}


def softmax(opset):
    nodes = [node("Softmax", ["x"], ["s1"], axis=1), node("Softmax", ["x"], ["s2"]),
             node("LogSoftmax", ["x"], ["s3"], axis=-1)]
    return model(nodes, [vi("x", [2, 3, 4])], ["s1", "s2", "s3"], opset=opset), {}


def reductions(opset):
    nodes, inits = [], []
    if opset >= 18:
        inits.append(ints("ax", [1, -1]))
        for op in ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"]:
            nodes.append(node(op, ["x", "ax"], [op], keepdims=0))
        nodes.append(node("ReduceMean", ["x"], ["all"]))
    else:
        inits.append(ints("ax", [1, -1]))
        nodes += [node("ReduceMean", ["x"], ["ReduceMean"], axes=[1, -1], keepdims=0),
                  node("ReduceSum", ["x", "ax"], ["ReduceSum"]),
                  node("ReduceMax", ["x"], ["ReduceMax"], axes=[0]),
                  node("ReduceMin", ["x"], ["ReduceMin"], axes=[2], keepdims=0),
                  node("ReduceMean", ["x"], ["all"], keepdims=0)]
    nodes += [node("ArgMax", ["x"], ["am"], axis=1), node("ArgMax", ["x"], ["am0"], axis=-1, keepdims=0)]
    outs = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "all", "am", "am0"]
    return model(nodes, [vi("x", [2, 3, 4])], outs, inits, opset=opset), {}


def transformer(rng):
    d, h = 8, 2
    nodes = [
        node("LayerNormalization", ["x", "ln_g", "ln_b"], ["ln"], epsilon=1e-5),
        node("MatMul", ["ln", "Wq"], ["q"]), node("MatMul", ["ln", "Wk"], ["k"]), node("MatMul", ["ln", "Wv"], ["v"]),
        node("Reshape", ["q", "hs"], ["q4"]), node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        node("Reshape", ["k", "hs"], ["k4"]), node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        node("Reshape", ["v", "hs"], ["v4"]), node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
        node("MatMul", ["qt", "kt"], ["sc"]), node("Div", ["sc", "sq"], ["scs"]),
        node("Softmax", ["scs"], ["att"], axis=-1), node("MatMul", ["att", "vt"], ["ctx"]),
        node("Transpose", ["ctx"], ["ctxt"], perm=[0, 2, 1, 3]), node("Reshape", ["ctxt", "flat"], ["ctx3"]),
        node("Add", ["ctx3", "x"], ["res"]),
        node("MatMul", ["res", "W1"], ["h1"]),
        node("Div", ["h1", "sqrt2"], ["hd"]), node("Erf", ["hd"], ["he"]), node("Add", ["he", "one"], ["hp"]),
        node("Mul", ["h1", "hp"], ["hm"]), node("Mul", ["hm", "half"], ["gelu"]),
        node("MatMul", ["gelu", "W2"], ["h2"]), node("Add", ["h2", "res"], ["y"]),
    ]
    sc = lambda n, v: numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    inits = [init(rng, "ln_g", (d,)), init(rng, "ln_b", (d,)), init(rng, "Wq", (d, d)), init(rng, "Wk", (d, d)),
             init(rng, "Wv", (d, d)), ints("hs", [0, 0, h, d // h]), ints("flat", [0, 0, d]),
             sc("sq", np.sqrt(d // h)), sc("sqrt2", np.sqrt(2.0)), sc("one", 1.0), sc("half", 0.5),
             init(rng, "W1", (d, 16)), init(rng, "W2", (16, d))]
    return model(nodes, [vi("x", ["batch", "seq", d])], ["y"], inits, opset=17), {"x": [2, 5, d]}


def shapes(rng, opset):
    nodes = [
        node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        node("Transpose", ["x"], ["t2"]),
        node("Flatten", ["x"], ["fl"], axis=2),
        node("Concat", ["x", "x"], ["cc"], axis=-1),
        node("Gather", ["x", "gi"], ["ga"], axis=1),
        node("Gather", ["x", "gs"], ["gs_out"], axis=3),
        node("Expand", ["row", "es"], ["ex"]),
        node("Identity", ["x"], ["id"]),
    ]
    inits = [ints("gi", [[0, -1], [1, 1]]), numpy_helper.from_array(np.array(-2, np.int64), "gs"),
             init(rng, "row", (1, 6)), ints("es", [3, 2, 1])]
    if opset >= 13:
        inits += [ints("usq_axes", [0, -1]), ints("split", [1, 2]),
                  ints("st", [0, -1, 4]), ints("en", [100, -100, 0]), ints("ax", [0, 2, 3]), ints("sp", [1, -1, -2]),
                  ints("pads", [0, 0, 1, 2, 0, 0, 2, 1]), numpy_helper.from_array(np.array(1.5, np.float32), "pv"),
                  numpy_helper.from_array(np.array([1, 1, 2, 1.5], np.float32), "scales"), ints("sizes", [2, 3, 7, 5])]
        nodes += [
            node("Unsqueeze", ["x", "usq_axes"], ["usq"]),
            node("Squeeze", ["usq", "usq_axes"], ["sq"]),
            node("Split", ["x", "split"], ["sp1", "sp2"], axis=1),
            node("Split", ["x"], ["eq1", "eq2", "eq3"], axis=1),
            node("Slice", ["x", "st", "en", "ax", "sp"], ["sl"]),
            node("Pad", ["x", "pads", "pv"], ["pd"]),
            node("Pad", ["x", "pads"], ["pe"], mode="edge"),
            node("Resize", ["x", "", "scales"], ["rs1"], mode="nearest"),
            node("Resize", ["x", "", "", "sizes"], ["rs2"], mode="linear"),
        ]
    else:
        nodes += [
            node("Unsqueeze", ["x"], ["usq"], axes=[0, -1]),
            node("Squeeze", ["usq"], ["sq"], axes=[0, 5]),
            node("Split", ["x"], ["sp1", "sp2"], axis=1, split=[1, 2]),
            node("Split", ["x"], ["eq1", "eq2", "eq3"], axis=1),
            node("Slice", ["x", "st", "en", "ax", "sp"], ["sl"]),
            node("Pad", ["x", "pads", "pv"], ["pd"]),
            node("Pad", ["x", "pads"], ["pe"], mode="reflect"),
            node("Resize", ["x", "roi", "scales"], ["rs1"], mode="nearest"),
            node("Resize", ["x", "roi", "scales2"], ["rs2"], mode="linear"),
        ]
        inits += [ints("pads", [0, 0, 1, 2, 0, 0, 2, 1]), numpy_helper.from_array(np.array(1.5, np.float32), "pv"),
                  ints("st", [0, -1, 4]), ints("en", [100, -100, 0]), ints("ax", [0, 2, 3]), ints("sp", [1, -1, -2]),
                  numpy_helper.from_array(np.array([], np.float32), "roi"),
                  numpy_helper.from_array(np.array([1, 1, 2, 1.5], np.float32), "scales"),
                  numpy_helper.from_array(np.array([1, 1, 1.5, 2], np.float32), "scales2")]
    outs = ["t", "t2", "fl", "cc", "ga", "gs_out", "ex", "id", "usq", "sq", "sp1", "sp2", "eq1", "eq2", "eq3", "sl",
            "pd", "pe", "rs1", "rs2"]
    return model(nodes, [vi("x", [2, 3, 4, 6])], outs, inits, opset=opset), {}


def shape_fold(rng):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, plus ConstantOfShape and Range."""
    nodes = [
        node("Shape", ["x"], ["s"]),
        node("Gather", ["s", "i0"], ["n"], axis=0),
        node("Unsqueeze", ["n", "ax0"], ["n1"]),
        node("Shape", ["x"], ["s23"], start=2),
        node("ReduceProd", ["s23"], ["hw"], keepdims=1),
        node("Gather", ["s", "i1"], ["c"], axis=0),
        node("Unsqueeze", ["c", "ax0"], ["c1"]),
        node("Mul", ["c1", "two"], ["c2"]),
        node("Div", ["hw", "two"], ["hw2"]),
        node("Concat", ["n1", "c2", "hw2"], ["shp"], axis=0),
        node("Reshape", ["x", "shp"], ["r"]),
        node("Cast", ["hw2"], ["hwf"], to=TensorProto.FLOAT),
        node("ConstantOfShape", ["shp"], ["z"], value=helper.make_tensor("v", F, [1], [0.5])),
        node("Add", ["r", "z"], ["y"]),
        node("Range", ["zero", "c", "one"], ["rg"]),
        node("Slice", ["s", "st", "en"], ["s_tail"]),
        node("Expand", ["x", "s"], ["xe"]),
        node("Size", ["x"], ["sz"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"), numpy_helper.from_array(np.array(1, np.int64), "i1"),
             ints("ax0", [0]), ints("two", [2]), numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one"), ints("st", [-2]), ints("en", [1000])]
    return model(nodes, [vi("x", ["N", 3, 4, 6])], ["y", "hwf", "rg", "s_tail", "xe", "sz"], inits, opset=15), \
        {"x": [2, 3, 4, 6]}


def extra_ops(rng):
    nodes = [
        node("PRelu", ["x", "slope"], ["pr"]), node("Elu", ["x"], ["el"], alpha=0.5), node("Selu", ["x"], ["se"]),
        node("Softplus", ["x"], ["sp"]), node("Mean", ["x", "x", "x"], ["mn"]), node("Tile", ["x", "reps"], ["ti"]),
        node("DepthToSpace", ["x"], ["d2s"], blocksize=2), node("DepthToSpace", ["x"], ["d2c"], blocksize=2, mode="CRD"),
        node("SpaceToDepth", ["x"], ["s2d"], blocksize=2), node("LRN", ["x"], ["lrn"], size=3, alpha=1e-3, beta=0.75),
    ]
    inits = [init(rng, "slope", (8, 1, 1)), ints("reps", [1, 2, 1, 3])]
    outs = ["pr", "el", "se", "sp", "mn", "ti", "d2s", "d2c", "s2d", "lrn"]
    return model(nodes, [vi("x", [2, 8, 4, 6])], outs, inits), {}


def unsupported():
    nodes = [
        node("Relu", ["x"], ["r"]),
        helper.make_node("ImageDecoder", ["r"], ["h1"], name="det_1"),
        helper.make_node("ImageDecoder", ["h1"], ["h2"], name="det_2"),
        helper.make_node("MaxRoiPool", ["h2", "h1"], ["y"], name="roi", pooled_shape=[2, 2]),
    ]
    return model(nodes, [vi("x", [2, 3])], ["y"], []), {}


def type_error(rng):
    nodes = [node("MatMul", ["x", "W"], ["y"])]
    return model(nodes, [vi("x", [2, 3])], ["y"], [init(rng, "W", (4, 5))]), {}


def ort_shapes(m, bind):
    import onnxruntime as ort
    rng = np.random.default_rng(SEED)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {}
    np_types = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(bool)": np.bool_}
    for i in sess.get_inputs():
        shape = bind.get(i.name) or i.shape
        feeds[i.name] = (rng.random(shape) + 0.5).astype(np_types[i.type])
    outs = sess.run(None, feeds)
    return [list(o.shape) for o in outs]


def main(out):
    rng = np.random.default_rng(SEED)
    os.makedirs(out, exist_ok=True)
    valid = {
        "conv_block": conv_block(rng), "conv_misc": conv_misc(rng), "matmuls": matmuls(rng),
        "elementwise_op9": elementwise(rng, 9), "elementwise_op13": elementwise(rng, 13),
        "elementwise_op14": elementwise(rng, 14),
        "softmax_op11": softmax(11), "softmax_op13": softmax(13),
        "reduce_op13": reductions(13), "reduce_op18": reductions(18),
        "transformer": transformer(rng), "shapes_op11": shapes(rng, 11), "shapes_op13": shapes(rng, 13),
        "shape_fold": shape_fold(rng), "extra_ops": extra_ops(rng),
    }
    expected = {}
    for name, (m, bind) in valid.items():
        onnx.save_model(m, os.path.join(out, f"{name}.onnx"))
        expected[name] = {"inputs": bind, "outputs": ort_shapes(m, bind)}
    for name, (m, _), err in [
        ("unsupported", unsupported(), ["ImageDecoder", "2 node", "det_1", "MaxRoiPool", "roi"]),
        ("type_error", type_error(rng), ["y_node", "MatMul", "nn.matmul"]),
    ]:
        onnx.save_model(m, os.path.join(out, f"{name}.onnx"))
        expected[name] = {"error": err}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)


def zoo():
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    res = {}
    for p in sorted(glob.glob(os.path.join(light, "*.onnx"))):
        m = onnx.shape_inference.infer_shapes(onnx.load(p))
        dims = lambda v: [d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
        inits = {i.name for i in m.graph.initializer}
        res[p] = {"inputs": {i.name: dims(i) for i in m.graph.input if i.name not in inits},
                  "outputs": [dims(o) for o in m.graph.output]}
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--zoo":
        zoo()
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
