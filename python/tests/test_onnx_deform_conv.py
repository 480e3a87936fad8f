"""DeformConv against onnxruntime on fresh random inputs: offsets that move taps between
pixels and outside the image, masks, groups, offset groups, strides, dilations, padding and
bias."""

import numpy as np
import pytest

from onnx_run import run_kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


@pytest.mark.parametrize("c,o,k,group,og,stride,dil,pads,mask,bias", [
    (3, 4, 3, 1, 1, 1, 1, [1, 1, 1, 1], False, False),
    (4, 6, 3, 2, 2, 1, 1, [0, 0, 0, 0], True, True),
    (4, 4, 2, 1, 4, 2, 1, [1, 0, 0, 1], True, False),
    (6, 6, 3, 3, 1, 1, 2, [2, 2, 2, 2], False, True),
])
def test_deform_conv(c, o, k, group, og, stride, dil, pads, mask, bias):
    rng = np.random.default_rng(c * 100 + o * 10 + k + group + og)
    n, h, w = 2, 9, 8
    oh = (h + pads[0] + pads[2] - dil * (k - 1) - 1) // stride + 1
    ow = (w + pads[1] + pads[3] - dil * (k - 1) - 1) // stride + 1
    feeds = {"x": rng.standard_normal((n, c, h, w)).astype(np.float32),
             # Offsets up to 2.5 pixels: fractional positions, and some taps leave the image.
             "off": rng.uniform(-2.5, 2.5, (n, og * k * k * 2, oh, ow)).astype(np.float32)}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, feeds["x"].shape),
              helper.make_tensor_value_info("off", TensorProto.FLOAT, feeds["off"].shape)]
    inits = [numpy_helper.from_array(
        rng.standard_normal((o, c // group, k, k)).astype(np.float32), "w")]
    names = ["x", "w", "off", "", ""]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(o).astype(np.float32), "b"))
        names[3] = "b"
    if mask:
        feeds["m"] = rng.uniform(0, 1, (n, og * k * k, oh, ow)).astype(np.float32)
        inputs.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, feeds["m"].shape))
        names[4] = "m"
    while names[-1] == "":
        names.pop()
    node = helper.make_node("DeformConv", names, ["y"], kernel_shape=[k, k], group=group,
                            offset_group=og, strides=[stride] * 2, dilations=[dil] * 2,
                            pads=pads)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)],
                              inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    (got,) = run_kiln(m, feeds)
    (want,) = ort.InferenceSession(m.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, feeds)
    assert got.shape == want.shape == (n, o, oh, ow)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
