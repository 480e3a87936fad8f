"""Whole models compiled with symbolic dimensions left to run time (`dims={"n": "any"}`): ONE
library, its kernels compiled with run-time extents, runs every shape; run-time extents that
must agree (a product's inner dimensions, attention's batch and head dimensions) are checked
when each kernel is called. Each model against onnxruntime on fresh random inputs, outputs
poisoned between runs, from a library exported and loaded again."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from test_vm import _bert, _ort, _run, _vm  # noqa: E402


def test_bert_encoder_at_any_length_and_batch_from_one_library(tmp_path):
    # Positions from Shape -> Gather -> Range, attention products whose batch, head and
    # sequence extents are all known only at run time, layer norms over run-time rows.
    m = _bert()
    gm = _vm(m, None, tmp_path, dims={"seq": "any", "batch": "any"})
    assert gm.get_input_info()[0]["ids"] == (-1, -1)
    sess = _ort(m)
    rng = np.random.default_rng(23)
    for batch, seq in ((1, 7), (4, 128), (4, 7), (1, 64), (4, 16), (1, 128), (3, 33), (1, 7)):
        ids = rng.integers(0, 50, (batch, seq)).astype(np.int64)
        mask = np.ones((batch, seq), np.int64)
        mask[:, seq - seq // 3:] = 0  # padding at the end of each row
        (got,) = _run(gm, {"ids": ids, "mask": mask}, 1)
        (want,) = sess.run(None, {"ids": ids, "mask": mask})
        assert got.shape == (batch, seq, 32)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{batch}x{seq}")
    # Inputs that disagree: named, and the machine stays usable.
    gm.set_input("ids", np.zeros((1, 7), np.int64))
    gm.set_input("mask", np.zeros((1, 8), np.int64))
    with pytest.raises(ValueError, match=r"do not broadcast.*7.*8"):
        gm.run()
    (got,) = _run(gm, {"ids": ids, "mask": mask}, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
