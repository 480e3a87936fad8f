"""Tensors from Python: numpy round trips for many dtypes, zero-copy DLPack both ways, arrays
passed where tensors are expected, tensors reaching Python callbacks, and bad input."""

import gc
import os
import sys

import pytest
from conftest import needs_globals, ref_count

import kiln

np = pytest.importorskip("numpy")
ktensor = sys.modules["kiln.tensor"]  # the module (kiln.tensor is the function)

pytestmark = needs_globals("runtime.TensorEmpty", "runtime.TensorCopyFromTo", "runtime.TensorView")

SEED = int.from_bytes(os.urandom(4), "little")


@pytest.fixture
def rng():
    print("random seed", SEED)
    return np.random.default_rng(SEED)


def random_array(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(size=shape).astype(dtype)


DTYPES = ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint64", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (2, 3, 4), (0, 4)])
def test_numpy_round_trip(rng, dtype, shape):
    a = random_array(rng, shape, dtype)
    t = kiln.tensor(a)
    assert isinstance(t, kiln.Tensor)
    assert t.shape == shape
    assert t.dtype == dtype
    assert t.device == kiln.cpu()
    assert t.size == a.size and t.nbytes == a.nbytes
    back = t.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)
    # copyfrom replaces the contents
    b = random_array(rng, shape, dtype)
    assert t.copyfrom(b) is t
    np.testing.assert_array_equal(t.numpy(), b)


def test_bfloat16_with_ml_dtypes(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = rng.standard_normal((4, 6)).astype(ml_dtypes.bfloat16)
    t = kiln.tensor(a)
    assert t.dtype == "bfloat16"
    back = t.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back.view(np.uint16), a.view(np.uint16))
    # zero-copy view of a bfloat16 array through its raw bits
    v = kiln.from_dlpack(a)
    assert v.dtype == "bfloat16" and v.shape == (4, 6)
    a[0, 0] = 3.0
    assert float(v.numpy()[0, 0]) == 3.0


def test_bfloat16_as_raw_uint16_without_ml_dtypes(monkeypatch, rng):
    monkeypatch.setattr(ktensor, "_bfloat16_dtype", lambda: None)
    t = kiln.empty((5,), "bfloat16")
    t.copyfrom(np.array([1.0, -2.0, 0.5, 3.0, 1.00390625], dtype=np.float32))
    bits = t.numpy()
    assert bits.dtype == np.uint16
    # bfloat16 keeps the top 16 bits of float32 (1.00390625 rounds to even: 1.0)
    expected = np.array([1.0, -2.0, 0.5, 3.0, 1.0], dtype=np.float32).view(np.uint32) >> 16
    np.testing.assert_array_equal(bits, expected.astype(np.uint16))
    raw = rng.integers(0, 1 << 16, size=5, dtype=np.uint16)
    t.copyfrom(raw)
    np.testing.assert_array_equal(t.numpy(), raw)


def test_vector_dtype_has_a_lanes_axis(rng):
    t = kiln.empty((3,), "float32x4")
    a = random_array(rng, (3, 4), "float32")
    t.copyfrom(a)
    assert t.numpy().shape == (3, 4)
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.nbytes == 48


def test_empty_and_devices():
    t = kiln.empty((2, 3))
    assert t.dtype == "float32" and t.shape == (2, 3) and t.strides == (3, 1)
    assert t.data_ptr % 64 == 0 and t.byte_offset == 0
    assert kiln.empty(4, "int8").shape == (4,)
    assert kiln.device("cpu", 0) == kiln.cpu() == kiln.device(1, 0)
    assert kiln.cpu().exist
    assert kiln.cpu().multi_processor_count >= 1
    assert not kiln.device("vulkan", 0).exist
    assert kiln.empty((2,), device=kiln.device("cpu", 0)).device == kiln.cpu(0)
    assert "shape=(2, 3)" in repr(t) and "float32" in repr(t)
    with pytest.raises(TypeError):
        kiln.Tensor()


def test_from_dlpack_is_zero_copy_both_ways(rng):
    a = random_array(rng, (4, 5), "float32")
    t = kiln.from_dlpack(a)
    assert t.data_ptr == a.__array_interface__["data"][0]
    a[1, 2] = 123.0
    assert t.numpy()[1, 2] == 123.0
    b = np.from_dlpack(t)
    b[0, 0] = -7.0
    assert a[0, 0] == -7.0
    # the array keeps the tensor alive, the tensor keeps the array alive
    del a, t
    gc.collect()
    assert b[0, 0] == -7.0

    k = kiln.tensor(random_array(rng, (3,), "int64"))
    c = np.from_dlpack(k)
    c[1] = 99
    assert k.numpy()[1] == 99
    del k
    gc.collect()
    assert c[1] == 99


def test_capsules_legacy_versioned_and_unconsumed():
    t = kiln.tensor(np.arange(6, dtype=np.int32))
    assert ref_count(t) == 1
    for capsule in (t.__dlpack__(), t.__dlpack__(max_version=(1, 0))):
        u = kiln.from_dlpack(capsule)
        assert u.same_as(t)  # Kiln's own export comes back as the same object
        with pytest.raises(ValueError):
            kiln.from_dlpack(capsule)  # a capsule is consumed once
        del u
    unused = t.__dlpack__(max_version=(1, 2))
    assert ref_count(t) == 2
    del unused
    gc.collect()
    assert ref_count(t) == 1
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    copied = kiln.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert not copied.same_as(t)
    assert copied.numpy().tolist() == list(range(6))


def test_non_contiguous_arrays(rng):
    a = random_array(rng, (4, 6), "float64")
    at = a.T
    # copied into a compact tensor
    t = kiln.tensor(at)
    np.testing.assert_array_equal(t.numpy(), at)
    # or viewed with strides, then read back correctly
    v = kiln.from_dlpack(at)
    assert v.strides == (1, 6) and not v.is_contiguous
    np.testing.assert_array_equal(v.numpy(), at)
    with pytest.raises(ValueError, match="not contiguous"):
        kiln.from_dlpack(at, require_contiguous=True)
    # copyfrom a strided array and into a tensor view
    dst = kiln.empty((6, 4), "float64")
    dst.copyfrom(at)
    np.testing.assert_array_equal(dst.numpy(), at)
    v.copyfrom(np.zeros((6, 4)))
    assert not a.any()
    # negative strides
    r = random_array(rng, (5, 6), "int32")[::-1, ::-2]
    np.testing.assert_array_equal(kiln.from_dlpack(r).numpy(), r)
    np.testing.assert_array_equal(kiln.tensor(r).numpy(), r)


def test_copyfrom_and_copyto_errors_and_paths(rng):
    t = kiln.empty((2, 3), "float32")
    with pytest.raises(ValueError, match=r"array shape \(3, 2\) does not match the tensor shape \(2, 3\)"):
        t.copyfrom(np.zeros((3, 2), np.float32))
    t.copyfrom([[1, 2, 3], [4, 5, 6]])  # lists are converted to the tensor's dtype
    assert t.numpy().tolist() == [[1, 2, 3], [4, 5, 6]]
    other = kiln.empty((3, 2), "float32")
    with pytest.raises(ValueError, match="shape mismatch"):
        other.copyfrom(t)
    ints = kiln.empty((2, 3), "int32")
    with pytest.raises(TypeError, match="dtype mismatch"):
        ints.copyfrom(t)
    same = kiln.empty((2, 3), "float32")
    assert t.copyto(same) is same
    np.testing.assert_array_equal(same.numpy(), t.numpy())
    moved = t.copyto(kiln.cpu())
    assert not moved.same_as(t)
    np.testing.assert_array_equal(moved.numpy(), t.numpy())
    with pytest.raises(TypeError):
        t.copyto("cpu")


def test_views_share_memory():
    t = kiln.tensor(np.arange(6, dtype=np.int32))
    v = t.view((2, 3))
    assert v.shape == (2, 3) and v.dtype == "int32"
    b = t.view((24,), "uint8")
    v.copyfrom(np.full((2, 3), 7, np.int32))
    assert t.numpy().tolist() == [7] * 6
    assert b.numpy()[:4].tolist() == [7, 0, 0, 0]
    with pytest.raises(ValueError, match="larger than the tensor"):
        t.view((7,))


def test_bad_input_errors():
    with pytest.raises(ValueError, match="negative"):
        kiln.empty((2, -1))
    with pytest.raises(ValueError):
        kiln.empty((1 << 40, 1 << 40))
    with pytest.raises(ValueError, match="vulkan:0"):
        kiln.empty((2,), device=kiln.device("vulkan", 0))
    with pytest.raises(ValueError, match="notatype"):
        kiln.empty((2,), "notatype")
    with pytest.raises(ValueError, match=r"empty: shape \(2, 'x'\) must be an int or a sequence of ints"):
        kiln.empty((2, "x"))
    with pytest.raises(TypeError, match=r"empty: shape None"):
        kiln.empty(None)
    with pytest.raises(TypeError):
        kiln.from_dlpack(object())
    with pytest.raises(TypeError):
        kiln.empty((2,), "handle").numpy()


def test_returned_tensors_and_tensor_arguments(testing, rng):
    t = kiln.tensor(random_array(rng, (3,), "float32"))
    echoed = testing.echo(t)
    assert isinstance(echoed, kiln.Tensor) and echoed.same_as(t)
    # a numpy array passed where a value is expected arrives as a tensor
    a = random_array(rng, (2, 2), "int16")
    seen = []

    def callback(x):
        seen.append((type(x), x.shape, x.dtype))
        x.copyfrom(np.full((2, 2), 5, np.int16))
        return x.numpy().sum()

    assert testing.apply(callback, a) == 20
    assert seen == [(kiln.Tensor, (2, 2), "int16")]
    assert (a == 5).all(), "writes reach the caller's array"


def test_arrays_are_passed_zero_copy_or_through_an_aligned_copy(rng):
    copy = kiln.get_global_func("runtime.TensorCopyFromTo")
    src = random_array(rng, (1000,), "float32")
    # aligned, contiguous destination: passed as a view
    buf = np.empty(1000 + 16, np.float32)
    start = (-buf.__array_interface__["data"][0] % 64) // 4
    aligned = buf[start : start + 1000]
    assert aligned.__array_interface__["data"][0] % 64 == 0
    copy(src, aligned)
    np.testing.assert_array_equal(aligned, src)
    # misaligned destination: copied in, then back
    misaligned = buf[start + 1 : start + 1001]
    copy(src, misaligned)
    np.testing.assert_array_equal(misaligned, src)
    # non-contiguous destination too
    wide = np.zeros((1000, 2), np.float32)
    copy(src, wide[:, 1])
    np.testing.assert_array_equal(wide[:, 1], src)
    assert not wide[:, 0].any()
    with pytest.raises(ValueError, match="shape mismatch"):
        copy(src, np.zeros(999, np.float32))
    # a read-only array is never written: the call writes into a temporary copy
    frozen = np.zeros(1000, np.float32)
    frozen.flags.writeable = False
    copy(src, frozen)
    assert not frozen.any()


def test_dltensor_pointer_reaches_a_callback_as_a_view(rng):
    t = kiln.tensor(random_array(rng, (2, 3), "float64"))
    got = []

    def callback(x):
        got.append((x.shape, x.dtype, x.numpy().copy()))
        x.copyfrom(np.ones((2, 3)))

    f = kiln.Function.from_callable(callback)
    dl_address = t.handle + 24  # the DLTensor inside the object
    kiln.core.call_function(f.handle, [ktensor._DLTensorPtr(dl_address)])
    assert got[0][0] == (2, 3) and got[0][1] == "float64"
    assert (t.numpy() == 1).all()


def test_thread_count_globals():
    get = kiln.get_global_func("runtime.GetNumThreads")
    set_ = kiln.get_global_func("runtime.SetNumThreads")
    before = get()
    assert before >= 1
    set_(3)
    assert get() == 3 == kiln.get_global_func("runtime.NumThreads")()
    set_(0)
    assert get() == before
    with pytest.raises(ValueError):
        set_(-1)


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"KILN_NUM_THREADS": "3", "TVM_NUM_THREADS": "5", "OMP_NUM_THREADS": "7"}, 3),
        ({"TVM_NUM_THREADS": "5", "OMP_NUM_THREADS": "7"}, 5),
        ({"OMP_NUM_THREADS": "7,2"}, 7),
        ({"KILN_NUM_THREADS": "junk", "OMP_NUM_THREADS": "4"}, 4),
    ],
)
def test_thread_count_from_the_environment(env, expected):
    import subprocess

    clean = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    clean.update(env)
    code = "import kiln; print(kiln.get_global_func('runtime.GetNumThreads')())"
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code], env=clean, cwd=here, capture_output=True, text=True, check=True
    )
    assert int(out.stdout.strip()) == expected
