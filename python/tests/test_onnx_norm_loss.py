"""ONNX GroupNormalization (opsets 18 and 21), RotaryEmbedding and the loss operators through
Kiln on random inputs, against numpy references written here, onnx's reference evaluator and
onnxruntime; and the errors for bad attributes."""

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from onnx_run import run_kiln  # noqa: E402

TARGET = "llvm"
NP_TO_ONNX = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64}


def single_node_model(op, feeds, out_shapes, opset, **attrs):
    """A model of one `op` node over `feeds` (name -> array) with float outputs."""
    node = helper.make_node(op, list(feeds), [f"y{i}" for i in range(len(out_shapes))], **attrs)
    inputs = [
        helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype.type], a.shape) for n, a in feeds.items()
    ]
    outputs = [
        helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, s) for i, s in enumerate(out_shapes)
    ]
    graph = helper.make_graph([node], op, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def group_norm_reference(x, scale, bias, groups, eps, per_group):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1).astype(np.float64)
    y = (g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)
    if per_group:
        y = y * scale[:, None] + bias[:, None]
        return y.reshape(x.shape)
    shape = (c,) + (1,) * (x.ndim - 2)
    return y.reshape(x.shape) * scale.reshape(shape) + bias.reshape(shape)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm(opset):
    rng = np.random.default_rng(opset)
    groups, eps = 3, 1e-3
    x = rng.standard_normal((2, 6, 3, 4)).astype("float32") * 3 + 1
    params = groups if opset == 18 else 6
    scale = rng.standard_normal(params).astype("float32")
    bias = rng.standard_normal(params).astype("float32")
    feeds = dict(x=x, scale=scale, bias=bias)
    model = single_node_model(
        "GroupNormalization", feeds, [x.shape], opset, num_groups=groups, epsilon=eps
    )
    (got,) = run_kiln(model, feeds)
    expected = group_norm_reference(x, scale, bias, groups, eps, per_group=opset == 18)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    if opset == 21:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(got, sess.run(None, feeds)[0], rtol=1e-4, atol=1e-5)


def test_group_norm_groups_must_divide_channels():
    x = np.zeros((1, 6, 2), "float32")
    feeds = dict(x=x, scale=np.ones(6, "float32"), bias=np.zeros(6, "float32"))
    model = single_node_model("GroupNormalization", feeds, [x.shape], 21, num_groups=4)
    with pytest.raises(Exception, match="num_groups"):
        kiln.onnx.from_onnx(model)


@pytest.mark.parametrize("interleaved,rotary_dim,rank", [(0, 0, 4), (1, 4, 3), (0, 6, 3), (1, 0, 4)])
def test_rotary_embedding(interleaved, rotary_dim, rank):
    rng = np.random.default_rng(rotary_dim + rank)
    batch, heads, seq, head, max_pos = 2, 3, 5, 8, 11
    half = (rotary_dim or head) // 2
    shape = (batch, heads, seq, head) if rank == 4 else (batch, seq, heads * head)
    x = rng.standard_normal(shape).astype("float32")
    angles = rng.uniform(0, 2 * np.pi, (max_pos, half))
    feeds = dict(
        x=x,
        cos_cache=np.cos(angles).astype("float32"),
        sin_cache=np.sin(angles).astype("float32"),
        position_ids=rng.integers(0, max_pos, (batch, seq)).astype("int64"),
    )
    attrs = dict(interleaved=interleaved, rotary_embedding_dim=rotary_dim)
    if rank == 3:
        attrs["num_heads"] = heads
    model = single_node_model("RotaryEmbedding", feeds, [x.shape], 23, **attrs)
    (got,) = run_kiln(model, feeds)
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-5, atol=1e-5)
    # The features past rotary_embedding_dim pass through.
    if rotary_dim:
        tail = got.reshape(batch, -1, heads, head)[..., rotary_dim:] if rank == 3 else got[..., rotary_dim:]
        src = x.reshape(batch, -1, heads, head)[..., rotary_dim:] if rank == 3 else x[..., rotary_dim:]
        np.testing.assert_array_equal(tail, src)


def nll_reference(logp, target, weight, ignore_index, reduction):
    """Naive loops over the batch and positions of `logp` [N, C, d...]."""
    n, c = logp.shape[:2]
    lp = logp.reshape(n, c, -1).astype(np.float64)
    t = target.reshape(n, -1)
    loss = np.zeros(t.shape)
    w = np.zeros(t.shape)
    for i in range(n):
        for d in range(t.shape[1]):
            if t[i, d] == ignore_index:
                continue
            w[i, d] = 1.0 if weight is None else weight[t[i, d]]
            loss[i, d] = -lp[i, t[i, d], d] * w[i, d]
    if reduction == "none":
        return loss.reshape(target.shape)
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


@pytest.mark.parametrize("op", ["SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_losses(op, reduction, weighted):
    rng = np.random.default_rng(len(op) + len(reduction) + weighted)
    n, c, d1, d2, ignore = 3, 5, 4, 2, 2
    x = rng.standard_normal((n, c, d1, d2)).astype("float32")
    target = rng.integers(0, c, (n, d1, d2)).astype("int64")
    target[0, 0, 0] = ignore
    feeds = dict(x=x, target=target)
    weight = None
    if weighted:
        weight = rng.uniform(0.1, 2.0, c).astype("float32")
        feeds["weight"] = weight
    loss_shape = target.shape if reduction == "none" else ()
    out_shapes = [loss_shape] + ([x.shape] if op == "SoftmaxCrossEntropyLoss" else [])
    model = single_node_model(op, feeds, out_shapes, 13, reduction=reduction, ignore_index=ignore)
    got = run_kiln(model, feeds)
    if op == "SoftmaxCrossEntropyLoss":
        shifted = x - x.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        np.testing.assert_allclose(got[1], logp, rtol=1e-5, atol=1e-5)
    else:
        logp = x
    expected = nll_reference(logp, target, weight, ignore, reduction)
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-5)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, e in zip(got, sess.run(None, feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_loss_bad_reduction():
    feeds = dict(x=np.zeros((2, 3), "float32"), target=np.zeros(2, "int64"))
    model = single_node_model("NegativeLogLikelihoodLoss", feeds, [()], 13, reduction="avg")
    with pytest.raises(Exception, match="reduction"):
        kiln.onnx.from_onnx(model)


def test_rotary_embedding_3d_needs_num_heads():
    feeds = dict(
        x=np.zeros((1, 2, 8), "float32"),
        cos_cache=np.ones((1, 2, 4), "float32"),
        sin_cache=np.zeros((1, 2, 4), "float32"),
    )
    model = single_node_model("RotaryEmbedding", feeds, [(1, 2, 8)], 23)
    with pytest.raises(Exception, match="num_heads"):
        kiln.onnx.from_onnx(model)


@pytest.mark.parametrize("shape", [(4, 3), (2, 5, 7), (3, 2, 4, 5)])
def test_batch_norm_training_mode(shape):
    """BatchNormalization with training_mode=1: normalized by the batch's statistics, running
    statistics updated with momentum; against numpy and onnxruntime on fresh inputs."""
    rng = np.random.default_rng()
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype("float32")
    scale, bias = rng.standard_normal(c).astype("float32"), rng.standard_normal(c).astype("float32")
    mean, var = rng.standard_normal(c).astype("float32"), rng.random(c).astype("float32") + 0.5
    feeds = dict(x=x, scale=scale, bias=bias, mean=mean, var=var)
    eps, momentum = 1e-3, 0.8
    model = single_node_model("BatchNormalization", feeds, [shape, (c,), (c,)], 15,
                              training_mode=1, epsilon=eps, momentum=momentum)
    got = run_kiln(model, feeds)
    axes = tuple(a for a in range(len(shape)) if a != 1)
    bshape = (1, c) + (1,) * (len(shape) - 2)
    m64, v64 = x.astype(np.float64).mean(axis=axes), x.astype(np.float64).var(axis=axes)
    y = (x - m64.reshape(bshape)) / np.sqrt(v64.reshape(bshape) + eps)
    want = [y * scale.reshape(bshape) + bias.reshape(bshape),
            mean * momentum + m64 * (1 - momentum), var * momentum + v64 * (1 - momentum)]
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, w, o in zip(got, want, ref.run(None, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g, o, rtol=1e-4, atol=1e-5)
