"""The narrow ONNX element types through Kiln (float8 E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ/E8M0,
float4 E2M1, int4/uint4, int2/uint2): compiled Cast models round-trip random float32 inputs
(NaN, infinities and out-of-range values included) and are compared exactly with ml_dtypes, as
the ONNX reference evaluator computes them; ml_dtypes arrays go in and come out of kiln.tensor
and GraphModule unchanged; a float8 initializer and a packed int4 initializer decode."""

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnx_run import run_kiln  # noqa: E402

TARGET = "llvm"
TYPES = [
    (TensorProto.FLOAT8E4M3FN, "float8_e4m3fn"),
    (TensorProto.FLOAT8E4M3FNUZ, "float8_e4m3fnuz"),
    (TensorProto.FLOAT8E5M2, "float8_e5m2"),
    (TensorProto.FLOAT8E5M2FNUZ, "float8_e5m2fnuz"),
    (TensorProto.FLOAT8E8M0, "float8_e8m0fnu"),
    (TensorProto.FLOAT4E2M1, "float4_e2m1fn"),
    (TensorProto.INT4, "int4"),
    (TensorProto.UINT4, "uint4"),
    (TensorProto.INT2, "int2"),
    (TensorProto.UINT2, "uint2"),
]
FLOAT8 = {TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
          TensorProto.FLOAT8E5M2FNUZ}


def cast_model(to, attrs, n):
    """x (float32) -> y = Cast(x, to) -> z = Cast(y, float32)."""
    nodes = [
        helper.make_node("Cast", ["x"], ["y"], to=to, **attrs),
        helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "narrow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", to, [n]), helper.make_tensor_value_info("z", TensorProto.FLOAT, [n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 11
    return model


def inputs(seed, n=600):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-14, 18, n))).astype(np.float32)
    x[:12] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-30, 464.0, 61440.0, 7.5]
    return x


def same_values(got, want):
    """Equal as float32 values, NaN where NaN (and the same dtype)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("to,name", TYPES, ids=[t[1] for t in TYPES])
def test_cast_round_trip_matches_ml_dtypes(to, name):
    modes = [{}]
    if to in FLOAT8:
        modes.append({"saturate": 0})
    if to == TensorProto.FLOAT8E8M0:
        modes = [{"round_mode": m, "saturate": s} for m in ("up", "down", "nearest") for s in (0, 1)]
    x = inputs(hash(name) % 1000)
    for attrs in modes:
        model = cast_model(to, attrs, x.size)
        y, z = run_kiln(model, {"x": x})
        want_y, want_z = ReferenceEvaluator(model).run(None, {"x": x})
        assert want_y.dtype == np.dtype(getattr(ml_dtypes, name))
        same_values(y, want_y)
        same_values(z, want_z)
        if to in FLOAT8 and attrs.get("saturate", 1):
            # Independently of the reference evaluator: clip, then ml_dtypes' rounding.
            info = ml_dtypes.finfo(want_y.dtype)
            same_values(y, np.clip(x, info.min, info.max).astype(want_y.dtype))


@pytest.mark.parametrize("name", [t[1] for t in TYPES])
def test_ml_dtypes_arrays_pass_through_kiln_tensors(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    ncodes = {"int2": 4, "uint2": 4, "int4": 16, "uint4": 16, "float4_e2m1fn": 16}.get(name, 256)
    codes = np.arange(ncodes, dtype=np.uint8)
    a = codes.view(dt)
    t = kiln.tensor(a)
    assert str(t.dtype) == name
    assert t.nbytes == a.size
    b = t.numpy()
    assert b.dtype == dt
    assert b.view(np.uint8).tolist() == codes.tolist()


@pytest.mark.parametrize("to,name", TYPES, ids=[t[1] for t in TYPES])
def test_narrow_inputs_decode_every_code(to, name):
    dt = np.dtype(getattr(ml_dtypes, name))
    ncodes = {"int2": 4, "uint2": 4, "int4": 16, "uint4": 16, "float4_e2m1fn": 16}.get(name, 256)
    x = np.arange(ncodes, dtype=np.uint8).view(dt)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        "decode",
        [helper.make_tensor_value_info("x", to, [ncodes])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ncodes])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 11
    (y,) = run_kiln(model, {"x": x})
    np.testing.assert_array_equal(y, x.astype(np.float32))


def test_narrow_initializers_decode():
    e4 = np.array([0.5, -3.0, 448.0, np.nan], dtype=ml_dtypes.float8_e4m3fn)
    i4 = np.array([-8, 7, 3], dtype=ml_dtypes.int4)  # three elements: packed into two bytes
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["x", "wf"], ["y"]),
            helper.make_node("Cast", ["q"], ["z"], to=TensorProto.FLOAT),
        ],
        "inits",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
        initializer=[numpy_helper.from_array(e4, "w"), numpy_helper.from_array(i4, "q")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 11
    x = np.arange(4, dtype=np.float32)
    y, z = run_kiln(model, {"x": x})
    np.testing.assert_array_equal(y, x + e4.astype(np.float32))
    np.testing.assert_array_equal(z, i4.astype(np.float32))
