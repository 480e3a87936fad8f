"""A small builder of ONNX graphs with seeded random weights, shared by the architecture tests
(python/tests/test_onnx_architectures.py) and the architecture benchmark models
(tests/zoo/make_arch.py)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Net:
    """An ONNX graph under construction, with seeded random weights."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.k = [], [], 0

    def name(self, prefix):
        self.k += 1
        return f"{prefix}{self.k}"

    def weight(self, shape, scale=None, dtype="float32"):
        n = self.name("w")
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
        self.inits.append(numpy_helper.from_array(
            (self.rng.standard_normal(shape) * s).astype(dtype), n))
        return n

    def const(self, values, dtype):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), n))
        return n

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x, cin, cout, k, stride=1, pad=None, bias=True, dims=2, group=1):
        pad = k // 2 if pad is None else pad
        ins = [x, self.weight((cout, cin // group) + (k,) * dims)]
        if bias:
            ins.append(self.weight((cout,), 0.1))
        return self.op("Conv", ins, kernel_shape=[k] * dims, strides=[stride] * dims,
                       pads=[pad] * (2 * dims), group=group)

    def bn(self, x, c):
        scale = self.const(self.rng.uniform(0.5, 1.5, c), "float32")
        bias = self.const(self.rng.standard_normal(c) * 0.1, "float32")
        mean = self.const(self.rng.standard_normal(c) * 0.1, "float32")
        var = self.const(self.rng.uniform(0.5, 1.5, c), "float32")
        return self.op("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5)

    def silu(self, x):
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def linear(self, x, n_in, n_out):
        """`x @ W + b` as PyTorch exports nn.Linear on 3-D activations (MatMul, Add)."""
        return self.op("Add", [self.op("MatMul", [x, self.weight((n_in, n_out))]),
                               self.weight((n_out,), 0.1)])

    def layer_norm(self, x, c):
        return self.op("LayerNormalization",
                       [x, self.const(self.rng.uniform(0.5, 1.5, c), "float32"),
                        self.const(self.rng.standard_normal(c) * 0.1, "float32")], axis=-1)

    def gelu(self, x):
        """GELU as exported: x * 0.5 * (1 + erf(x / sqrt 2))."""
        e = self.op("Erf", [self.op("Div", [x, self.const(np.sqrt(2.0), "float32")])])
        one = self.op("Add", [e, self.const(1.0, "float32")])
        return self.op("Mul", [self.op("Mul", [x, self.const(0.5, "float32")]), one])

    def model(self, inputs, output, out_rank, opset=17, name="net", dtype=TensorProto.FLOAT):
        """The model; `inputs` are `(name, shape)` of `dtype`."""
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, [None] * out_rank)],
            initializer=self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m
