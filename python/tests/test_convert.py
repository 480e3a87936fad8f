"""Every Python value kind round-trips through ``testing.echo``."""

import ctypes
import math

import pytest

import kiln

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, 42, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1, 2**31, -(2**31) - 1, 2**32],
)
def test_int(testing, value):
    out = testing.echo(value)
    assert out == value and type(out) is int


def test_int_overflow_is_clear(testing):
    for value in (INT64_MAX + 1, INT64_MIN - 1, 2**100, -(2**100)):
        with pytest.raises(OverflowError, match="int64"):
            testing.echo(value)
    with pytest.raises(OverflowError):
        testing.echo([1, 2**64])


@pytest.mark.parametrize("value", [True, False])
def test_bool(testing, value):
    out = testing.echo(value)
    assert out is value


@pytest.mark.parametrize(
    "value", [0.0, 1.5, -2.25, 1e300, -1e-300, 5e-324, math.pi, float("inf"), float("-inf")]
)
def test_float(testing, value):
    out = testing.echo(value)
    assert type(out) is float and out == value


def test_float_negative_zero_and_nan(testing):
    out = testing.echo(-0.0)
    assert out == 0.0 and math.copysign(1.0, out) == -1.0
    assert math.isnan(testing.echo(float("nan")))


def test_none(testing):
    assert testing.echo(None) is None


STRINGS = [
    "",
    "a",
    "abcdefg",  # 7 bytes: the longest inline small string
    "abcdefgh",  # 8 bytes: a String object
    "x" * 100,
    "y" * 100000,
    "héllo",
    "日本語のテキスト",
    "emoji 🎉🚀",
    "a\0b",
    "\0",
    "\0" * 9,
    "nul in the middle of a long string \0 with more after",
]


@pytest.mark.parametrize("value", STRINGS, ids=range(len(STRINGS)))
def test_str(testing, value):
    out = testing.echo(value)
    assert type(out) is str and out == value


BYTES = [b"", b"\x00", b"abcdefg", b"abcdefgh", b"\xff\x00\x01" * 50, bytes(range(256)), b"\0" * 8]


@pytest.mark.parametrize("value", BYTES, ids=range(len(BYTES)))
def test_bytes(testing, value):
    out = testing.echo(value)
    assert type(out) is bytes and out == value
    out = testing.echo(bytearray(value))
    assert type(out) is bytes and out == value


def test_str_and_bytes_small_encoding():
    # inline small strings: type index 11/12 with the length in the padding word
    from kiln import core

    slot = core._AnySlot()
    temps = []
    core.write_view(slot, 0, "abcdefg", temps)
    assert bytes(slot) == (11).to_bytes(4, "little") + (7).to_bytes(4, "little") + b"abcdefg\0"
    core.write_view(slot, 0, b"xy", temps)
    assert bytes(slot)[:10] == (12).to_bytes(4, "little") + (2).to_bytes(4, "little") + b"xy"
    assert temps == []
    core.write_view(slot, 0, "abcdefgh", temps)
    assert int.from_bytes(bytes(slot)[:4], "little") == 65 and len(temps) == 1
    core.release(temps)


@pytest.mark.parametrize("text", ["float32", "int8", "uint1", "bool", "float16x4", "bfloat16", "int64"])
def test_dtype(testing, text):
    dtype = kiln.DataType(text)
    out = testing.echo(dtype)
    assert isinstance(out, kiln.DataType) and out == text
    assert (out.type_code, out.bits, out.lanes) == (dtype.type_code, dtype.bits, dtype.lanes)


def test_dtype_fields():
    f = kiln.DataType("float32x4")
    assert (f.type_code, f.bits, f.lanes, f.itemsize) == (2, 32, 4, 16)
    assert isinstance(f, str) and f == "float32x4"
    with pytest.raises(ValueError):
        kiln.DataType("not_a_dtype")


@pytest.mark.parametrize(
    "dev", [kiln.cpu(0), kiln.cpu(3), kiln.cuda(1), kiln.Device(10, 7), kiln.device("cuda:2")]
)
def test_device(testing, dev):
    out = testing.echo(dev)
    assert isinstance(out, kiln.Device) and out == dev
    assert (out.device_type, out.device_id) == (dev.device_type, dev.device_id)


def test_device_helpers():
    assert kiln.device("cuda", 1) == kiln.cuda(1) == kiln.Device(2, 1)
    assert kiln.cpu() == kiln.Device("cpu")
    assert str(kiln.cuda(1)) == "cuda:1"
    assert hash(kiln.cpu(0)) == hash(kiln.Device(1, 0))
    with pytest.raises(ValueError):
        kiln.device("nosuchdevice")


def test_opaque_pointer(testing):
    out = testing.echo(ctypes.c_void_p(0x1234))
    assert isinstance(out, ctypes.c_void_p) and out.value == 0x1234


def test_list_and_tuple_become_arrays(testing):
    out = testing.echo([1, 2.5, "three", None, True, b"bytes", [4, [5]]])
    assert isinstance(out, kiln.Array)
    assert out == [1, 2.5, "three", None, True, b"bytes", [4, [5]]]
    assert isinstance(out[6], kiln.Array) and isinstance(out[6][1], kiln.Array)
    assert testing.echo((1, 2)) == [1, 2]
    assert testing.echo([]) == [] and len(testing.echo(())) == 0


def test_dict_becomes_map(testing):
    value = {"a": 1, "b": [1, 2], "long key name here": {"x": 2.5}, 7: "int key"}
    out = testing.echo(value)
    assert isinstance(out, kiln.Map)
    assert out == value
    assert isinstance(out["long key name here"], kiln.Map)
    assert testing.echo({}) == {}


def test_shape(testing):
    for dims in ([], [1], [2, 3, 4], [INT64_MAX, 0, -1]):
        out = testing.echo(kiln.Shape(dims))
        assert isinstance(out, kiln.Shape) and isinstance(out, tuple)
        assert out == tuple(dims)
        # a returned shape keeps its object and is passed back as is
        again = testing.echo(out)
        assert again == out and again._handle == out._handle


def test_containers_pass_through_unchanged(testing):
    arr = kiln.convert([1, 2])
    m = kiln.convert({"k": "v"})
    assert testing.echo(arr).same_as(arr)
    assert testing.echo(m).same_as(m)
    f = testing.echo(testing.add_one)
    assert f.same_as(testing.add_one) and f(1) == 2


def test_many_arguments(testing):
    args = list(range(40))
    assert testing.apply(lambda *a: list(a), *args) == args


def test_convert():
    assert kiln.convert(1) == 1 and kiln.convert("s") == "s" and kiln.convert(None) is None
    arr = kiln.convert([1, "a"])
    assert isinstance(arr, kiln.Array) and arr == [1, "a"]
    m = kiln.convert({"a": 1})
    assert isinstance(m, kiln.Map) and dict(m) == {"a": 1}
    f = kiln.convert(lambda x: x + 1)
    assert isinstance(f, kiln.Function) and f(1) == 2
    assert kiln.convert(arr).same_as(arr)


def test_unconvertible_value_raises_type_error(testing):
    with pytest.raises(TypeError, match="cannot convert"):
        testing.echo(object())
    with pytest.raises(TypeError):
        testing.echo([1, object()])


def test_numbers_like_values(testing):
    import fractions

    assert testing.echo(fractions.Fraction(1, 2)) == 0.5

    class MyInt(int):
        pass

    assert type(testing.echo(MyInt(5))) is int
