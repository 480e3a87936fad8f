"""Array, Map and Shape behave like Python sequences / mappings / tuples."""

import pytest

import kiln


def test_array_sequence_protocol(testing):
    arr = testing.echo([10, 20, 30, 40])
    assert len(arr) == 4
    assert arr[0] == 10 and arr[-1] == 40 and arr[-4] == 10
    assert arr[1:3] == [20, 30] and arr[::-1] == [40, 30, 20, 10]
    assert list(arr) == [10, 20, 30, 40]
    assert 30 in arr and 31 not in arr
    assert arr.index(30) == 2 and arr.count(10) == 1
    assert list(reversed(arr)) == [40, 30, 20, 10]
    with pytest.raises(IndexError):
        arr[4]
    with pytest.raises(IndexError):
        arr[-5]
    with pytest.raises(TypeError):
        arr["x"]


def test_array_equality(testing):
    arr = kiln.Array([1, "a", [2, 3]])
    assert arr == [1, "a", [2, 3]] and arr == (1, "a", (2, 3))
    assert [1, "a", [2, 3]] == arr
    assert arr != [1, "a"] and arr != [1, "a", [2, 4]]
    assert arr == kiln.Array([1, "a", [2, 3]])
    assert arr != "not a list"
    assert hash(arr) == hash(arr)


def test_array_constructor_and_repr():
    arr = kiln.Array(range(3))
    assert arr == [0, 1, 2]
    assert "0" in repr(arr) and "2" in repr(arr)
    assert kiln.Array() == []


def test_map_mapping_protocol(testing):
    m = testing.echo({"a": 1, "b": "two", 3: [3]})
    assert len(m) == 3
    assert m["a"] == 1 and m["b"] == "two" and m[3] == [3]
    assert "a" in m and "zzz" not in m and 3 in m
    assert m.get("zzz") is None and m.get("zzz", 5) == 5
    with pytest.raises(KeyError):
        m["zzz"]
    assert sorted(m.keys(), key=str) == [3, "a", "b"]
    assert sorted(map(str, m)) == ["3", "a", "b"]
    assert dict(m.items()) == {"a": 1, "b": "two", 3: [3]}
    assert dict(m)["a"] == 1
    assert m == {"a": 1, "b": "two", 3: [3]}
    assert m != {"a": 1}
    assert m != {"a": 2, "b": "two", 3: [3]}


def test_map_constructor():
    m = kiln.Map({"x": 1})
    assert m == {"x": 1} and isinstance(m, kiln.Map)
    assert kiln.Map([("k", "v")]) == {"k": "v"}
    assert kiln.Map() == {} and len(kiln.Map()) == 0
    assert "x" in repr(m)


def test_nested_containers(testing):
    value = {"layers": [{"name": "conv", "shape": kiln.Shape([1, 3, 224, 224])}, {"name": "relu"}]}
    out = testing.echo(value)
    assert out["layers"][0]["shape"] == (1, 3, 224, 224)
    assert isinstance(out["layers"][0]["shape"], kiln.Shape)
    assert out == value


def test_shape_is_a_tuple():
    s = kiln.Shape([2, 3])
    assert s == (2, 3) and isinstance(s, tuple) and len(s) == 2
    assert repr(s) == "kiln.Shape([2, 3])"
    assert kiln.Shape(x for x in range(3)) == (0, 1, 2)
