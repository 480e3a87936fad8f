"""ONNX Attention (opset 23) through Kiln on random inputs: grouped query heads, causal
masking, an attention mask and a key/value cache together, checked against a numpy reference
written here and against onnxruntime."""

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper

from onnx_run import run_kiln  # noqa: E402

TARGET = "llvm"


def attention_reference(q, k, v, mask, past_k, past_v, q_heads, kv_heads, causal, softcap):
    """Scaled dot-product attention per the ONNX spec, in float64 with plain loops over
    heads (3-D inputs `[batch, seq, heads * dim]`)."""
    b, sq, _ = q.shape

    def split(x, heads):
        return x.reshape(b, x.shape[1], heads, -1).transpose(0, 2, 1, 3)

    q, k, v = split(q, q_heads), split(k, kv_heads), split(v, kv_heads)
    k = np.concatenate([past_k, k], axis=2).astype(np.float64)
    v = np.concatenate([past_v, v], axis=2).astype(np.float64)
    present_k, present_v = k, v
    skv, past = k.shape[2], past_k.shape[2]
    bias = np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask.astype(np.float64)
    if causal:
        i = np.arange(sq)[:, None]
        j = np.arange(skv)[None, :]
        bias = bias + np.where(j <= i + past, 0.0, -np.inf)
    bias = np.broadcast_to(bias, (b, q_heads, sq, skv))
    scale = 1.0 / np.sqrt(q.shape[3])
    y = np.zeros((b, q_heads, sq, v.shape[3]))
    for n in range(b):
        for h in range(q_heads):
            g = h // (q_heads // kv_heads)
            s = q[n, h].astype(np.float64) @ k[n, g].T * scale
            if softcap > 0:
                s = softcap * np.tanh(s / softcap)
            s = s + bias[n, h]
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            y[n, h] = (p / p.sum(axis=-1, keepdims=True)) @ v[n, g]
    y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    return y, present_k, present_v


def attention_model(shapes, mask_dtype, q_heads, kv_heads, causal, softcap):
    names = ["Q", "K", "V", "attn_mask", "past_key", "past_value"]
    types = [TensorProto.FLOAT] * 3 + [mask_dtype] + [TensorProto.FLOAT] * 2
    attrs = dict(q_num_heads=q_heads, kv_num_heads=kv_heads, is_causal=int(causal))
    if softcap > 0:
        attrs["softcap"] = softcap
    node = helper.make_node(
        "Attention", names, ["Y", "present_key", "present_value"], name="attn", **attrs
    )
    inputs = [helper.make_tensor_value_info(n, t, s) for n, t, s in zip(names, types, shapes)]
    (b, sq, _), past_k, past_v = shapes[0], shapes[4], shapes[5]
    skv = past_k[2] + shapes[1][1]
    out_shapes = [
        (b, sq, q_heads * past_v[3]),
        (b, kv_heads, skv, past_k[3]),
        (b, kv_heads, skv, past_v[3]),
    ]
    outputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
        for n, s in zip(node.output, out_shapes)
    ]
    graph = helper.make_graph([node], "attention", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


CASES = [
    # q_heads, kv_heads, bool mask, causal, softcap
    (4, 2, True, True, 0.0),
    (6, 2, False, True, 0.0),
    (4, 1, True, False, 3.0),
    (2, 2, False, True, 2.5),
]


@pytest.mark.parametrize("q_heads,kv_heads,bool_mask,causal,softcap", CASES)
def test_attention_gqa_causal_mask_past(q_heads, kv_heads, bool_mask, causal, softcap):
    rng = np.random.default_rng(q_heads * 10 + kv_heads)
    batch, sq, past, dim, dv = 2, 3, 5, 8, 6
    skv = past + sq
    q = rng.standard_normal((batch, sq, q_heads * dim)).astype("float32")
    k = rng.standard_normal((batch, sq, kv_heads * dim)).astype("float32")
    v = rng.standard_normal((batch, sq, kv_heads * dv)).astype("float32")
    past_k = rng.standard_normal((batch, kv_heads, past, dim)).astype("float32")
    past_v = rng.standard_normal((batch, kv_heads, past, dv)).astype("float32")
    if bool_mask:
        mask = rng.random((batch, 1, sq, skv)) < 0.7
        mask[..., 0] = True  # every query keeps a key
        mask_type = TensorProto.BOOL
    else:
        mask = (rng.standard_normal((sq, skv)) * 2).astype("float32")
        mask_type = TensorProto.FLOAT
    feeds = dict(Q=q, K=k, V=v, attn_mask=mask, past_key=past_k, past_value=past_v)
    shapes = [x.shape for x in feeds.values()]
    model = attention_model(shapes, mask_type, q_heads, kv_heads, causal, softcap)

    got = run_kiln(model, feeds)

    expected = attention_reference(
        q, k, v, mask, past_k, past_v, q_heads, kv_heads, causal, softcap
    )
    assert got[0].shape == (batch, sq, q_heads * dv)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, e in zip(got, sess.run(None, feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_attention_3d_needs_head_counts():
    shapes = [(1, 2, 8), (1, 2, 8), (1, 2, 8), (2, 2), (1, 1, 1, 8), (1, 1, 1, 8)]
    model = attention_model(shapes, TensorProto.FLOAT, 1, 1, False, 0.0)
    del model.graph.node[0].attribute[:]
    with pytest.raises(Exception, match="q_num_heads"):
        kiln.onnx.from_onnx(model)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_qk_output_and_fully_masked_rows(mode):
    """4-D GQA with softcap and a run-time bool mask that masks one query row entirely: that
    row of Y is 0, and `qk_matmul_output` is the stage `mode` names; checked against onnx's
    reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(mode)
    b, hq, hk, sq, skv, dim = 2, 4, 2, 3, 5, 8
    mask = rng.random((b, 1, sq, skv)) < 0.6
    mask[..., 0] = True
    mask[1, 0, 2, :] = False  # batch 1, query 2 attends nothing
    feeds = dict(
        Q=rng.standard_normal((b, hq, sq, dim)).astype("float32"),
        K=rng.standard_normal((b, hk, skv, dim)).astype("float32"),
        V=rng.standard_normal((b, hk, skv, dim)).astype("float32"),
        attn_mask=mask,
    )
    node = helper.make_node(
        "Attention", list(feeds), ["Y", "", "", "qk"], softcap=2.0, qk_matmul_output_mode=mode
    )
    types = [TensorProto.FLOAT] * 3 + [TensorProto.BOOL]
    inputs = [helper.make_tensor_value_info(n, t, a.shape) for (n, a), t in zip(feeds.items(), types)]
    outputs = [
        helper.make_tensor_value_info("Y", TensorProto.FLOAT, (b, hq, sq, dim)),
        helper.make_tensor_value_info("qk", TensorProto.FLOAT, (b, hq, sq, skv)),
    ]
    graph = helper.make_graph([node], "attention", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10

    y, qk = run_kiln(model, feeds)
    np.testing.assert_array_equal(y[1, :, 2], 0.0)
    ref_y, ref_qk = ReferenceEvaluator(model).run(None, feeds)
    np.testing.assert_allclose(y, ref_y, rtol=1e-4, atol=1e-5)
    if mode == 0:
        # The spec (and onnxruntime): the raw scaled product, before softcap (onnx's
        # reference evaluator returns it softcapped).
        k = np.repeat(feeds["K"], hq // hk, axis=1)
        ref_qk = feeds["Q"] @ k.transpose(0, 1, 3, 2) / np.sqrt(dim)
    np.testing.assert_allclose(qk, ref_qk, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_nonpad_kv_seqlen(causal):
    """Opset 24's external cache: keys at or past `nonpad_kv_seqlen[b]` are masked, and the
    causal frontier moves with each batch's key count; against onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(causal)
    b, hq, hk, sq, skv, dim = 3, 4, 2, 2, 6, 8
    feeds = dict(
        Q=rng.standard_normal((b, hq, sq, dim)).astype("float32"),
        K=rng.standard_normal((b, hk, skv, dim)).astype("float32"),
        V=rng.standard_normal((b, hk, skv, dim)).astype("float32"),
        nonpad_kv_seqlen=np.array([6, 3, 4], dtype="int64"),
    )
    node = helper.make_node(
        "Attention", ["Q", "K", "V", "", "", "", "nonpad_kv_seqlen"], ["Y"], is_causal=causal
    )
    types = [TensorProto.FLOAT] * 3 + [TensorProto.INT64]
    inputs = [helper.make_tensor_value_info(n, t, a.shape) for (n, a), t in zip(feeds.items(), types)]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (b, hq, sq, dim))]
    graph = helper.make_graph([node], "attention", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    model.ir_version = 10

    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    np.testing.assert_allclose(run_kiln(model, feeds)[0], expected, rtol=1e-4, atol=1e-5)
