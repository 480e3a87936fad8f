"""The numeric ai.onnx.ml operators (Binarizer, ArrayFeatureExtractor, TreeEnsemble with every
comparison, set membership, missing values, every aggregate and post transform Kiln has),
TfIdfVectorizer (TF, IDF and TFIDF, skips, batches) and MaxPool's Indices output, against
onnxruntime on fresh random inputs."""

import numpy as np
import pytest

from onnx_run import run_kiln

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(node, inputs, outputs, opsets):
    graph = helper.make_graph([node], "g", inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 10
    return m


def _ort(m, feeds):
    m.ir_version = min(m.ir_version, 10)
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_binarizer_and_array_feature_extractor():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    m = _model(helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.3),
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)], [("ai.onnx.ml", 1)])
    (got,) = run_kiln(m, {"x": x})
    np.testing.assert_array_equal(got, (x > 0.3).astype(np.float32))
    idx = np.array([5, 0, 2], np.int64)
    m = _model(helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml"),
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                helper.make_tensor_value_info("i", TensorProto.INT64, idx.shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], [("ai.onnx.ml", 1)])
    (got,) = run_kiln(m, {"x": x, "i": idx})
    np.testing.assert_array_equal(got, x[:, idx])


def _forest(rng, n_trees, depth, features, n_targets, member=False):
    """Random full binary trees in TreeEnsemble's layout (every comparison mode, some nodes
    sending missing values to the true branch, optional set-membership nodes)."""
    feat, splits, modes, tn, tl, fn, fl, miss, roots, lt, lw, members = ([] for _ in range(12))

    def grow(d):
        i = len(feat)
        feat.append(int(rng.integers(0, features)))
        mode = int(rng.integers(0, 7 if member else 6))
        modes.append(mode)
        splits.append(float(rng.standard_normal()))
        if mode == 6:
            # Whole numbers (onnxruntime's sets hold integers).
            members.extend([float(rng.integers(1, 4) * rng.choice([-1, 1])) for _ in range(3)]
                           + [np.nan])
        miss.append(int(rng.integers(0, 2)))
        tn.append(0), tl.append(0), fn.append(0), fl.append(0)
        for side, ids, leafs in ((0, tn, tl), (1, fn, fl)):
            if d + 1 == depth:
                ids[i] = len(lt)
                leafs[i] = 1
                lt.append(int(rng.integers(0, n_targets)))
                lw.append(float(rng.standard_normal()))
            else:
                ids[i] = grow(d + 1)
        return i

    for _ in range(n_trees):
        roots.append(grow(0))
    return feat, splits, modes, tn, tl, fn, fl, miss, roots, lt, lw, members


@pytest.mark.parametrize("aggregate,post,member", [(1, 0, False), (0, 0, True), (2, 0, False),
                                                   (3, 0, False), (1, 2, True), (1, 1, False)])
def test_tree_ensemble(aggregate, post, member):
    rng = np.random.default_rng(aggregate * 10 + post + member)
    features, targets = 5, 3
    f = _forest(rng, n_trees=7, depth=4, features=features, n_targets=targets, member=member)
    feat, splits, modes, tn, tl, fn, fl, miss, roots, lt, lw, members = f

    def model(post_transform):
        attrs = dict(nodes_featureids=feat,
                     nodes_splits=numpy_helper.from_array(np.array(splits, np.float32)),
                     nodes_modes=numpy_helper.from_array(np.array(modes, np.uint8)),
                     nodes_truenodeids=tn, nodes_trueleafs=tl, nodes_falsenodeids=fn,
                     nodes_falseleafs=fl, nodes_missing_value_tracks_true=miss,
                     tree_roots=roots, leaf_targetids=lt,
                     leaf_weights=numpy_helper.from_array(np.array(lw, np.float32)),
                     n_targets=targets, aggregate_function=aggregate,
                     post_transform=post_transform)
        if member:
            attrs["membership_values"] = numpy_helper.from_array(np.array(members, np.float32))
        return _model(helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attrs),
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [40, features])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [40, targets])],
                      [("ai.onnx.ml", 5), ("", 21)])

    x = np.round(rng.standard_normal((40, features)), 1).astype(np.float32)
    if member:
        # Whole numbers, many of them in the sets (onnxruntime truncates a value to an
        # integer before looking it up in a set, so fractions and NaN would not compare).
        x = rng.integers(-3, 4, x.shape).astype(np.float32)
    else:
        x[rng.random(x.shape) < 0.1] = np.nan
    (got,) = run_kiln(model(post), {"x": x})
    # onnxruntime's raw scores, with the transform ONNX defines (onnxruntime numbers the
    # transforms differently: its post_transform 1 is a logistic).
    (want,) = _ort(model(0), {"x": x})
    if post == 2:
        want = 1 / (1 + np.exp(-want))
    elif post == 1:
        e = np.exp(want - want.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode,skip,shape,weights", [("TF", 0, (2, 9), False), ("TF", 3, (12,), False),
                                                     ("IDF", 2, (3, 10), True), ("TFIDF", 1, (3, 10), True),
                                                     ("TFIDF", 4, (15,), False)])
def test_tfidf_vectorizer(mode, skip, shape, weights):
    rng = np.random.default_rng(skip * 7 + len(shape))
    x = rng.integers(0, 6, shape).astype(np.int64)
    pool = [1, 3, 5,  # unigrams
            0, 1, 2, 2, 3, 4, 5, 5]  # bigrams
    attrs = dict(min_gram_length=1, max_gram_length=2, max_skip_count=skip, mode=mode,
                 ngram_counts=[0, 3], ngram_indexes=[4, 0, 2, 1, 3, 5, 6], pool_int64s=pool)
    if weights:
        attrs["weights"] = [0.5, 1.5, 2.0, 0.25, 1.0, 3.0, 0.75]
    m = _model(helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs),
               [helper.make_tensor_value_info("x", TensorProto.INT64, x.shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [("", 9)])
    (got,) = run_kiln(m, {"x": x})
    (want,) = _ort(m, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("kernel,strides,pads,order", [([3, 3], [1, 1], [1, 1, 1, 1], 0),
                                                       ([2, 2], [2, 2], [0, 0, 0, 0], 1),
                                                       ([3, 2], [2, 1], [1, 0, 1, 1], 0)])
def test_max_pool_indices(kernel, strides, pads, order):
    rng = np.random.default_rng(sum(kernel) + order)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    x[0, 0, :2, :2] = 5.0  # ties: the first in the window wins
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=kernel, strides=strides,
                            pads=pads, storage_order=order)
    m = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("i", TensorProto.INT64, None)], [("", 12)])
    got = run_kiln(m, {"x": x})
    want = _ort(m, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
