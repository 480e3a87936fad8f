"""Every element type ONNX allows, through the operators real models use: for each operator,
the dtypes come from its ONNX schema (opset 21 type constraints), the inputs are fresh random
values of that dtype, and the reference is ONNX's own reference evaluator (numpy). Outputs must
have the dtype ONNX prescribes and the reference's values."""

import numpy as np
import pytest

from onnx_run import run_kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, defs, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

OPSET = 21
T = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
     "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32,
     "tensor(int64)": np.int64, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
     "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_}
UNARY = ["Abs", "Neg", "Relu", "Sigmoid", "Exp", "Log", "Sqrt", "Floor", "Ceil", "Round", "Sign",
         "Reciprocal", "Tanh", "Erf", "Not", "Identity", "Softplus", "Sin", "Cos", "IsNaN", "IsInf",
         "BitwiseNot", "HardSwish", "Elu", "Selu", "LeakyRelu"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater",
          "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr",
          "BitwiseXor", "Mod", "PRelu", "BitShift"]
REDUCE = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ArgMax", "ArgMin",
          "ReduceL1", "ReduceSumSquare", "CumSum"]
OTHER = ["Transpose", "Flatten", "Concat", "Tile", "Expand", "Where", "Gather", "Slice", "Clip",
         "MatMul", "Softmax", "TopK", "Trilu", "Pad", "Resize", "MaxPool", "AveragePool", "Conv"]
POSITIVE = {"Log", "Sqrt", "Reciprocal", "Pow", "Div", "Mod"}


def rand(dt, shape, rng, positive=False):
    """Random values of `dt`: signed integers in [-20, 20), unsigned in [0, 20), floats normal
    (shifted above 0.5 when `positive`)."""
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dt, np.integer):
        lo = 1 if positive else (0 if np.issubdtype(dt, np.unsignedinteger) else -20)
        return rng.integers(lo, 20, shape).astype(dt)
    v = rng.standard_normal(shape)
    return (np.abs(v) + 0.5 if positive else v).astype(dt)


class _Builder:
    """The inputs, initializers and attributes of a one-node model."""

    def __init__(self):
        self.feeds, self.inputs, self.inits, self.names, self.attrs = {}, [], [], [], {}

    def inp(self, name, arr):
        self.feeds[name] = arr
        elem = helper.np_dtype_to_tensor_dtype(arr.dtype)
        self.inputs.append(helper.make_tensor_value_info(name, elem, arr.shape))
        self.names.append(name)

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        self.names.append(name)


def model(op, dt, rng):
    """A one-node model of `op` on inputs of `dt`, and its feeds."""
    b = _Builder()
    s = (3, 4)
    is_int = np.issubdtype(dt, np.integer)
    if op in UNARY:
        b.inp("a", rand(dt, s, rng, op in POSITIVE))
    elif op in BINARY:
        b.inp("a", rand(dt, s, rng, op in POSITIVE))
        if op in ("BitShift",) or (op == "Pow" and is_int):
            b.inp("b", rng.integers(0, 3, (4,)).astype(dt))
        else:
            b.inp("b", rand(dt, (4,), rng, op in POSITIVE))
        if op == "BitShift":
            b.attrs["direction"] = "LEFT"
        if op == "Mod" and not is_int:
            b.attrs["fmod"] = 1
    elif op in REDUCE:
        b.inp("a", rand(dt, (3, 4, 5), rng))
        if op == "CumSum":
            b.const("axis", np.array(1, np.int64))
        elif op in ("ArgMax", "ArgMin"):
            b.attrs["axis"] = 1
        else:
            b.const("axes", np.array([1], np.int64))
    elif op in ("Transpose", "Softmax", "Trilu", "TopK", "Slice", "Pad", "Gather", "Tile",
                "Clip", "Concat", "MatMul"):
        b.inp("a", rand(dt, s, rng))
        if op == "Transpose":
            b.attrs["perm"] = [1, 0]
        elif op == "TopK":
            b.const("k", np.array([2], np.int64))
        elif op == "Slice":
            b.const("starts", np.array([1], np.int64))
            b.const("ends", np.array([3], np.int64))
        elif op == "Pad":
            b.const("pads", np.array([1, 0, 0, 2], np.int64))
        elif op == "Gather":
            b.const("indices", np.array([2, 0, 1], np.int64))
        elif op == "Tile":
            b.const("repeats", np.array([2, 1], np.int64))
        elif op == "Clip":
            lo = 2 if np.issubdtype(dt, np.unsignedinteger) else -3
            b.const("lo", np.array(lo).astype(dt))
            b.const("hi", np.array(5).astype(dt))
        elif op == "Concat":
            b.inp("b", rand(dt, s, rng))
            b.attrs["axis"] = 0
        elif op == "MatMul":
            b.inp("b", rand(dt, (4, 2), rng))
    elif op == "Flatten":
        b.inp("a", rand(dt, (2, 3, 4), rng))
    elif op == "Expand":
        b.inp("a", rand(dt, (4,), rng))
        b.const("shape", np.array([3, 4], np.int64))
    elif op == "Where":
        b.inp("c", rand(np.bool_, s, rng))
        b.inp("a", rand(dt, s, rng))
        b.inp("b", rand(dt, s, rng))
    elif op == "Resize":
        b.inp("a", rand(dt, (1, 1, 3, 4), rng))
        b.names += ["", ""]
        b.const("sizes", np.array([1, 1, 6, 8], np.int64))
        b.attrs["mode"] = "nearest"
    elif op in ("MaxPool", "AveragePool"):
        b.inp("a", rand(dt, (1, 2, 5, 5), rng))
        b.attrs["kernel_shape"] = [2, 2]
    elif op == "Conv":
        b.inp("a", rand(dt, (1, 2, 5, 5), rng))
        b.inp("b", rand(dt, (3, 2, 3, 3), rng))
    outs = ["y", "i"] if op == "TopK" else ["y"]
    node = helper.make_node(op, b.names, outs, **b.attrs)
    g = helper.make_graph([node], "g", b.inputs,
                          [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                           for o in outs], b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 10
    return m, b.feeds


def _data_input(op):
    sch = defs.get_schema(op, OPSET)
    return sch, sch.inputs[1 if op == "Where" else 0].type_str


def _types(op):
    """The dtypes (of `T`) the schema allows for the operator's data input."""
    sch, first = _data_input(op)
    allowed = [tc.allowed_type_strs for tc in sch.type_constraints if tc.type_param_str == first]
    return [t for t in (allowed[0] if allowed else []) if t in T]


def _same_type_output(op):
    """Whether the schema gives the output the data input's type."""
    sch, first = _data_input(op)
    return sch.outputs[0].type_str == first


@pytest.mark.parametrize("op", UNARY + BINARY + REDUCE + OTHER)
def test_every_dtype(op):
    rng = np.random.default_rng(sum(map(ord, op)))
    failures = []
    tested = 0
    for t in _types(op):
        dt = T[t]
        m, feeds = model(op, dt, rng)
        try:
            want = [np.asarray(w) for w in ReferenceEvaluator(m).run(None, feeds)]
        except Exception:  # noqa: BLE001 - the reference has no implementation for it
            continue
        tested += 1
        if _same_type_output(op):
            # The reference's numpy sometimes widens (a sum of squares of int32 is int64).
            want[0] = want[0].astype(dt)
        got = run_kiln(m, feeds)
        tol = dict(rtol=1e-2, atol=1e-2) if dt == np.float16 else dict(rtol=1e-4, atol=1e-5)
        for g, w in zip(got, want):
            if g.dtype != w.dtype or g.shape != w.shape:
                failures.append(f"{t}: got {g.dtype}{g.shape}, want {w.dtype}{w.shape}")
            elif not np.allclose(g.astype(np.float64), w.astype(np.float64), equal_nan=True,
                                 **tol):
                failures.append(f"{t}: values differ: {g.ravel()[:6]} vs {w.ravel()[:6]}")
    assert not failures, "\n".join(failures)
    assert tested > 0
