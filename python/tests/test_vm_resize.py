"""Resize with its scales, sizes or region given at run time, or an input whose height and
width are left to run time: ONE library runs every target, each against onnxruntime on fresh
random inputs with outputs poisoned between runs (a library exported and loaded again)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from test_vm import _model, _ort, _run, _vm  # noqa: E402

F = TensorProto.FLOAT
# Scales whose target lengths on an 8 x 4 image are whole (where a length is fractional,
# align_corners follows ONNX's reference, which divides by it, and onnxruntime does not).
SCALES = ([1, 1, 2.0, 2.0], [1, 1, 0.75, 1.25], [1, 1, 0.5, 0.5], [1, 1, 1.25, 0.75],
          [1, 1, 2.0, 2.0])


def _resize_model(inputs, attrs, x_shape=(2, 3, 8, 4), dtype=F, inits=()):
    names = {"roi": "", "scales": "", "sizes": ""}
    names.update({k: k for k in inputs})
    node = helper.make_node("Resize", ["x", names["roi"], names["scales"], names["sizes"]],
                            ["y"], **attrs)
    vi = [helper.make_tensor_value_info("x", dtype, list(x_shape))]
    kinds = {"roi": (F, [8]), "scales": (F, [4]), "sizes": (TensorProto.INT64, [4])}
    vi += [helper.make_tensor_value_info(k, *kinds[k]) for k in inputs]
    return _model([node], vi, [helper.make_tensor_value_info("y", dtype, [None] * 4)], inits)


def _check(gm, sess, feeds, exact=False):
    (got,) = _run(gm, feeds, 1)
    (want,) = sess.run(None, feeds)
    assert got.shape == want.shape, (got.shape, want.shape)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


SAMPLINGS = [
    dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    dict(mode="nearest", coordinate_transformation_mode="half_pixel",
         nearest_mode="round_prefer_ceil"),
    dict(mode="nearest", coordinate_transformation_mode="pytorch_half_pixel",
         nearest_mode="ceil"),
    dict(mode="nearest", coordinate_transformation_mode="align_corners"),
    dict(mode="linear", coordinate_transformation_mode="half_pixel"),
    dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    dict(mode="linear", coordinate_transformation_mode="align_corners"),
    dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"),
    dict(mode="linear", antialias=1),
    dict(mode="cubic", coordinate_transformation_mode="asymmetric"),
    dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
    dict(mode="cubic", antialias=1),
]


@pytest.mark.parametrize("attrs", SAMPLINGS, ids=lambda a: "-".join(map(str, a.values())))
def test_resize_by_run_time_scales_from_one_library(tmp_path, attrs):
    m = _resize_model(["scales"], attrs)
    gm, sess = _vm(m, None, tmp_path), _ort(m)
    rng = np.random.default_rng(11)
    for s in SCALES:
        feeds = {"x": rng.standard_normal((2, 3, 8, 4)).astype(np.float32),
                 "scales": np.array(s, np.float32)}
        _check(gm, sess, feeds, exact=attrs["mode"] == "nearest")


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_resize_by_run_time_sizes_along_given_axes(tmp_path, policy):
    # Sizes for axes (3, 2) in that order; the policies keep the aspect ratio.
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                            axes=[3, 2], keep_aspect_ratio_policy=policy)
    m = _model([node], [helper.make_tensor_value_info("x", F, [1, 2, 6, 9]),
                        helper.make_tensor_value_info("sizes", TensorProto.INT64, [2])],
               [helper.make_tensor_value_info("y", F, [None] * 4)])
    gm, sess = _vm(m, None, tmp_path), _ort(m)
    rng = np.random.default_rng(13)
    for sizes in ([18, 12], [4, 3], [9, 6], [5, 11], [18, 12]):
        feeds = {"x": rng.standard_normal((1, 2, 6, 9)).astype(np.float32),
                 "sizes": np.array(sizes, np.int64)}
        _check(gm, sess, feeds)


def test_tf_crop_and_resize_by_a_run_time_region(tmp_path):
    # The region and sizes per run; positions outside the input take the extrapolation value.
    m = _resize_model(["roi", "sizes"], dict(mode="linear",
                                             coordinate_transformation_mode="tf_crop_and_resize",
                                             extrapolation_value=-7.0))
    gm, sess = _vm(m, None, tmp_path), _ort(m)
    rng = np.random.default_rng(17)
    for roi, sizes in (([0, 0, 0.2, 0.1, 1, 1, 0.8, 0.9], [2, 3, 5, 7]),
                       ([0, 0, -0.5, 0.25, 1, 1, 1.5, 0.75], [2, 3, 9, 3]),
                       ([0, 0, 0, 0, 1, 1, 1, 1], [2, 3, 1, 1])):
        feeds = {"x": rng.standard_normal((2, 3, 8, 4)).astype(np.float32),
                 "roi": np.array(roi, np.float32), "sizes": np.array(sizes, np.int64)}
        _check(gm, sess, feeds)


def test_nearest_resize_of_integers_by_run_time_scales(tmp_path):
    m = _resize_model(["scales"], dict(mode="nearest"), dtype=TensorProto.INT32)
    gm, sess = _vm(m, None, tmp_path), _ort(m)
    rng = np.random.default_rng(19)
    for s in SCALES:
        feeds = {"x": rng.integers(-1000, 1000, (2, 3, 8, 4), dtype=np.int32),
                 "scales": np.array(s, np.float32)}
        _check(gm, sess, feeds, exact=True)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsampling_an_image_of_any_size_from_one_library(tmp_path, mode):
    # A detector's neck: Conv, Split of its channels (as C2f blocks do), Resize of one part
    # by constant scales 2 (nearest, as YOLO exports it, or linear), then Concat with a skip
    # path; height and width left to run time.
    rng = np.random.default_rng(23)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Split", ["c", "parts"], ["c1", "c2"], axis=1),
             helper.make_node("Resize", ["c2", "", "scales"], ["u"], mode=mode),
             helper.make_node("Concat", ["u", "x"], ["y"], axis=1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [1, 3, "h", "w"])],
               [helper.make_tensor_value_info("y", F, [1, 6, None, None])],
               [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
                                        "w"),
                numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
                numpy_helper.from_array(np.array([1, 3], np.int64), "parts")])
    gm, sess = _vm(m, None, tmp_path, dims={"h": "any", "w": "any"}), _ort(m)
    for h, w in ((8, 8), (16, 10), (32, 24), (8, 8)):
        _check(gm, sess, {"x": rng.standard_normal((1, 3, h, w)).astype(np.float32)})
    # An odd extent: the upsampled path is one longer than the skip path; Concat names it.
    with pytest.raises(ValueError, match=r"[Mm]ismatch|do not fit|must"):
        _run(gm, {"x": rng.standard_normal((1, 3, 9, 8)).astype(np.float32)}, 1)
    _check(gm, sess, {"x": rng.standard_normal((1, 3, 12, 6)).astype(np.float32)})


def test_scales_that_empty_an_axis_are_refused_and_the_machine_stays_usable(tmp_path):
    m = _resize_model(["scales"], dict(mode="linear"))
    gm, sess = _vm(m, None, tmp_path), _ort(m)
    x = np.random.default_rng(29).standard_normal((2, 3, 8, 4)).astype(np.float32)
    for bad in ([1, 1, 0.1, 1], [1, 1, 0, 1], [1, 1, -2, 1], [1, 1, np.nan, 1]):
        with pytest.raises(ValueError, match=r"do not fit"):
            _run(gm, {"x": x, "scales": np.array(bad, np.float32)}, 1)
    _check(gm, sess, {"x": x, "scales": np.array([1, 1, 2, 0.5], np.float32)})
