"""kiln.te: tensor expressions, schedules, kiln.lower (printed TIR) and kiln.build (numerics
against numpy on fresh random data, outputs poisoned with NaN before each run)."""

import os

import numpy as np
import pytest
from conftest import has_globals

import kiln
from kiln import te, tir

pytestmark = pytest.mark.skipif(
    not has_globals("te.ComputeOp", "te.Lower", "transform.RunPass"),
    reason="the runtime library has no tensor expressions (te.* globals)",
)

HAS_BUILD = has_globals(kiln.driver.CODEGEN_BUILD)
needs_build = pytest.mark.skipif(not HAS_BUILD, reason="no codegen.Build in the runtime library")
TARGETS = ["llvm", "c"]


def _lower_text(s, args, **kw):
    return str(kiln.lower(s, args, simple_mode=True, **kw))


def _matmul(m=64, n=64, k=64):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C, r


# ---------------------------------------------------------------------------
# Building tensor expressions
# ---------------------------------------------------------------------------
def test_placeholder_and_compute():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    assert isinstance(A, te.Tensor) and isinstance(A, tir.Buffer)
    assert A.dtype == "float32" and A.ndim == 2 and A.name == "A"
    assert A.shape[0].same_as(n) and int(A.shape[1]) == 4
    assert isinstance(A.op, te.PlaceholderOp) and A.op.name == "A"
    B = te.compute((n,), lambda row: A[row, 0] * 2.0 + A[row][1], name="B", tag="ew")
    assert isinstance(B.op, te.ComputeOp) and B.op.tag == "ew"
    axis = B.op.axis
    assert len(axis) == 1 and isinstance(axis[0], te.IterVar)
    assert axis[0].var.name == "row" and axis[0].iter_type == 0
    assert str(B.op.body[0]) == "A[row, 0] * T.float32(2.0) + A[row, 1]"
    assert B.op.input_tensors == [A]
    assert B.op.output(0) == B and hash(B.op.output(0)) == hash(B)
    assert B != A and B.op.num_outputs == 1
    assert str(B.axis[0]) == 'T.iter_var(row, T.Range(0, n), "DataPar", "")'
    const = te.compute((3,), lambda i: 1.5, name="K")
    assert str(const.op.body[0]) == "T.float32(1.5)"
    dtype = te.compute((3,), lambda i: i, name="I")
    assert dtype.dtype == "int32"


def test_compute_arity_multiple_outputs_and_varargs():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(ValueError, match="compute 'B': fcompute takes 1 arguments but the shape has 2 dim"):
        te.compute((4, 5), lambda i: A[i, 0], name="B")
    X, Y = te.compute((4, 5), lambda i, j: (A[i, j] + 1.0, A[i, j] * 2.0), name="XY")
    assert X.op.same_as(Y.op) and (X.value_index, Y.value_index) == (0, 1) and X != Y
    Z = te.compute((4, 5), lambda *idx: A[idx], name="Z")
    assert [iv.var.name for iv in Z.op.axis] == ["i0", "i1"]


def test_iter_var_in_expressions():
    k = te.reduce_axis((0, 8), name="k")
    assert isinstance(k, te.IterVar) and k.iter_type == 2
    assert str(k + 1) == "k + 1" and str(2 * k) == "2 * k"
    assert str(k // 4) == "k // 4"
    assert str(k) == 'T.iter_var(k, T.Range(0, 8), "CommReduce", "")'
    assert str(te.reduce_axis(tir.Range(2, 6), name="r").dom.extent) == "4"


def _row_reduce(fn, A, k):
    return te.compute((A.shape[0],), lambda i: fn(A[i, k], axis=k), name="B")


def test_reductions():
    A = te.placeholder((8, 16), name="A")
    k = te.reduce_axis((0, 16), name="k")
    for fn, combine in ((te.sum, "x + y"), (te.max, "T.max(x, y)"), (te.min, "T.min(x, y)")):
        B = _row_reduce(fn, A, k)
        assert combine in str(B.op.body[0])
        assert len(B.op.reduce_axis) == 1
    # with two expressions, max/min are elementwise
    assert str(te.max(A[0, 0], 1.0)) == "T.max(A[0, 0], T.float32(1.0))"
    cond = te.compute((8,), lambda i: te.sum(A[i, k], axis=k, where=k > i), name="W")
    assert "k > i" in str(cond.op.body[0])
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1, t), name="prod")
    P = te.compute((8,), lambda i: prod(A[i, k], axis=[k]), name="P")
    assert "x * y" in str(P.op.body[0])


# ---------------------------------------------------------------------------
# Schedules and lowered text
# ---------------------------------------------------------------------------
def test_lower_naive_matmul_prints_loops():
    A, B, C, _ = _matmul()
    s = te.create_schedule(C.op)
    mod = kiln.lower(s, [A, B, C], simple_mode=True)
    assert isinstance(mod, tir.IRModule) and mod.keys() == ["main"]
    text = str(mod)
    assert 'def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: ' in text
    assert (
        "for i in range(0, 64):\n"
        "            for j in range(0, 64):\n"
        "                C_1[i * 64 + j] = T.float32(0.0)\n"
        "                for k in range(0, 64):\n"
        "                    C_1[i * 64 + j] = C_1[i * 64 + j] + A_1[i * 64 + k] * B_1[k * 64 + j]"
    ) in text
    assert "calling_conv" not in text


def test_lower_full_mode_is_packed_api():
    A, B, C, _ = _matmul(4, 4, 4)
    s = te.create_schedule(C.op)
    text = str(kiln.lower(s, [A, B, C], name="mm"))
    assert "def mm(" in text and '"calling_conv": 1' in text
    assert "Expected 3 arguments" in text


def test_split_reorder_fuse_unroll_parallel_vectorize():
    A, B, C, k = _matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=16)
    jo, ji = s[C].split(j, nparts=4)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    assert [iv.var.name for iv in s[C].leaf_iter_vars] == [
        "i.outer",
        "j.outer",
        "k.outer",
        "i.inner",
        "k.inner",
        "j.inner",
    ]
    fused = s[C].fuse(io, jo)
    assert fused.var.name == "i.outer.j.outer.fused"
    s[C].parallel(fused)
    s[C].unroll(ki)
    s[C].vectorize(ji)
    text = _lower_text(s, [A, B, C])
    assert "for i.outer.j.outer.fused in T.parallel(0, 16):" in text
    assert "for k.outer in range(0, 16):" in text
    assert "for i.inner in range(0, 16):" in text
    assert "k.inner" not in text  # unrolled
    assert "T.Ramp(" in text  # vectorized
    with tir.transform.PassContext(config={"tir.disable_vectorize": True}):
        assert "T.Ramp(" not in _lower_text(s, [A, B, C])


def test_tile_and_pragma():
    A, B, C, _ = _matmul()
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    assert [iv.var.name for iv in (xo, yo, xi, yi)] == ["i.outer", "j.outer", "i.inner", "j.inner"]
    s[C].pragma(xo, "auto_unroll_max_step", 16)
    text = _lower_text(s, [A, B, C])
    assert "for i.outer in range(0, 8):" in text
    assert "for j.outer in range(0, 4):" in text
    assert "for j.inner in range(0, 16):" in text
    assert "pragma_auto_unroll_max_step" in text


def test_compute_inline_and_compute_at():
    A = te.placeholder((32, 32), name="A")
    B = te.compute((32, 32), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((32, 32), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    text = _lower_text(s, [A, C])
    assert "B" not in text.replace("T.Buffer", "")
    assert "(A_1[i * 32 + j] + T.float32(1.0)) * T.float32(2.0)" in text
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    text = _lower_text(s, [A, C])
    assert text.index("for i.outer in range(0, 8):") < text.index("B_1 = T.decl_buffer((128,)")


def test_cache_read_and_cache_write():
    A, B, C, _ = _matmul(32, 32, 32)
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "global", [C])
    assert isinstance(AA, te.Tensor) and AA.op.name == "A.global"
    CC = s.cache_write(C, "global")
    _, yo, _, _ = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[CC].compute_at(s[C], yo)
    text = _lower_text(s, [A, B, C])
    assert "A.global" in text and "C.global" in text
    assert str(s[CC]) == "Stage(C.global)"


def test_schedule_errors():
    A, _, C, _ = _matmul(8, 8, 8)
    s = te.create_schedule(C.op)
    with pytest.raises(ValueError):
        s[C].split(C.op.axis[0])
    with pytest.raises(TypeError):
        s["C"]
    with pytest.raises(ValueError):
        kiln.lower(s)
    with pytest.raises(TypeError):
        kiln.lower(42, [A])


def test_build_without_codegen_is_not_implemented(monkeypatch):
    A, B, C, _ = _matmul(4, 4, 4)
    s = te.create_schedule(C.op)
    monkeypatch.setattr(kiln.driver, "CODEGEN_BUILD", "codegen.NoSuchBuild")
    with pytest.raises(NotImplementedError, match="codegen.NoSuchBuild"):
        kiln.build(s, [A, B, C])


# ---------------------------------------------------------------------------
# Numerics (need code generation)
# ---------------------------------------------------------------------------
@pytest.fixture
def rng():
    """A generator on fresh entropy (the seed is in the test's output on failure)."""
    seed = int.from_bytes(os.urandom(4), "little")
    print("numpy seed", seed)
    return np.random.default_rng(seed)


def _build(s, args, target, name):
    try:
        return kiln.build(s, args, target=target, name=name)[name]
    except ValueError as exc:
        if target != "llvm" and "not available" in str(exc):
            pytest.skip("target %s: %s" % (target, exc))
        raise


def _poisoned(shape):
    return np.full(shape, np.nan, dtype="float32")


def _random(rng, shape):
    return rng.standard_normal(shape, dtype="float32")


def _numeric(test):
    """Marks a numeric test: needs code generation, runs for each target."""
    return needs_build(pytest.mark.parametrize("target", TARGETS)(test))


@_numeric
def test_elementwise_broadcast(target, rng):
    n = te.var("n")
    A = te.placeholder((n, 5), name="A")
    B = te.placeholder((5,), name="B")
    C = te.compute((n, 5), lambda i, j: te.exp(A[i, j]) * B[j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    f = _build(s, [A, B, C], target, "bcast")
    for rows in (1, 7):
        a, b, c = _random(rng, (rows, 5)), _random(rng, 5), _poisoned((rows, 5))
        f(a, b, c)
        np.testing.assert_allclose(c, np.exp(a) * b + 1.0, rtol=1e-5, atol=1e-6)
    ta, tb, tc = kiln.tensor(a), kiln.tensor(b), kiln.tensor(_poisoned((rows, 5)))
    f(ta, tb, tc)
    np.testing.assert_allclose(tc.numpy(), np.exp(a) * b + 1.0, rtol=1e-5, atol=1e-6)


@_numeric
def test_reduction(target, rng):
    A = te.placeholder((13, 37), name="A")
    k = te.reduce_axis((0, 37), name="k")
    S = te.compute((13,), lambda i: te.sum(A[i, k], axis=k), name="S")
    k2 = te.reduce_axis((0, 37), name="k2")
    M = te.compute((13,), lambda i: te.max(A[i, k2], axis=k2), name="M")
    s = te.create_schedule([S.op, M.op])
    s[S].split(k, factor=8)
    f = _build(s, [A, S, M], target, "rowstats")
    a, out_s, out_m = _random(rng, (13, 37)), _poisoned(13), _poisoned(13)
    f(a, out_s, out_m)
    np.testing.assert_allclose(out_s, a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out_m, a.max(1))


def _schedule_naive(A, B, C, k):
    return te.create_schedule(C.op)


def _schedule_tiled(A, B, C, k):
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 16)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    s[C].unroll(ki)
    s[C].vectorize(yi)
    s[C].parallel(xo)
    return s


def _schedule_cache_write(A, B, C, k):
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, _, _ = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 16)
    fused = s[C].fuse(xo, yo)
    s[C].parallel(fused)
    s[CC].compute_at(s[C], fused)
    xc, yc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kc, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    return s


@_numeric
@pytest.mark.parametrize("schedule", [_schedule_naive, _schedule_tiled, _schedule_cache_write])
def test_matmul_schedules(target, schedule, rng):
    A, B, C, k = _matmul(64, 48, 80)
    s = schedule(A, B, C, k)
    f = _build(s, [A, B, C], target, "matmul")
    a, b, c = _random(rng, (64, 80)), _random(rng, (80, 48)), _poisoned((64, 48))
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@_numeric
def test_conv2d_with_padding(target, rng):
    n, ci, h, w, co, kh, kw, pad = 2, 3, 9, 7, 4, 3, 3, 1
    X = te.placeholder((n, ci, h, w), name="X")
    W = te.placeholder((co, ci, kh, kw), name="W")
    Xp = te.compute(
        (n, ci, h + 2 * pad, w + 2 * pad),
        lambda b, c, y, x: te.if_then_else(
            te.all(y >= pad, y < h + pad, x >= pad, x < w + pad), X[b, c, y - pad, x - pad], 0.0
        ),
        name="Xp",
    )
    rc = te.reduce_axis((0, ci), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    Y = te.compute(
        (n, co, h, w),
        lambda b, f, y, x: te.sum(Xp[b, rc, y + ry, x + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="Y",
    )
    s = te.create_schedule(Y.op)
    s[Xp].compute_inline()
    s[Y].parallel(Y.op.axis[1])
    f = _build(s, [X, W, Y], target, "conv2d")
    x, wt, y = _random(rng, (n, ci, h, w)), _random(rng, (co, ci, kh, kw)), _poisoned((n, co, h, w))
    f(x, wt, y)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ref = np.zeros((n, co, h, w), dtype="float64")
    for i in range(kh):
        for j in range(kw):
            ref += np.einsum("nchw,fc->nfhw", xp[:, :, i : i + h, j : j + w], wt[:, :, i, j])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


@_numeric
def test_softmax(target, rng):
    n, m = 16, 33
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    mx = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="mx")
    e = te.compute((n, m), lambda i, j: te.exp(A[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, m), name="k2")
    total = te.compute((n,), lambda i: te.sum(e[i, k2], axis=k2), name="total")
    out = te.compute((n, m), lambda i, j: e[i, j] / total[i], name="out")
    s = te.create_schedule(out.op)
    s[out].parallel(out.op.axis[0])
    f = _build(s, [A, out], target, "softmax")
    a, o = _random(rng, (n, m)) * 4, _poisoned((n, m))
    f(a, o)
    ref = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(o, ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@needs_build
def test_built_function_checks_arguments():
    A, B, C, _ = _matmul(4, 4, 4)
    f = kiln.build(te.create_schedule(C.op), [A, B, C], name="mm")
    assert isinstance(f, kiln.Module)
    a = np.zeros((4, 4), "float32")
    with pytest.raises(TypeError, match="Expected 3 arguments"):
        f["mm"](a, a)
    with pytest.raises(TypeError, match="dtype"):
        f["mm"](a.astype("float64"), a, a)
    # a module from kiln.lower (either mode) builds too
    mod = kiln.lower(te.create_schedule(C.op), [A, B, C], name="mm2", simple_mode=True)
    g = kiln.build(mod)["mm2"]
    b, c = np.eye(4, dtype="float32"), _poisoned((4, 4))
    a = np.arange(16, dtype="float32").reshape(4, 4)
    g(a, b, c)
    np.testing.assert_array_equal(c, a)
