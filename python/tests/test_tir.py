"""kiln.tir: expressions with Python operators, intrinsics, statements, modules, passes."""

import pytest
from conftest import has_globals

import kiln
from kiln import tir

pytestmark = pytest.mark.skipif(
    not has_globals("tir.Var", "tir._OpAdd", "tir.AsText"),
    reason="the runtime library has no tensor IR (tir.* globals)",
)


@pytest.fixture
def xs():
    """Variables of several types."""
    return tir.Var("x"), tir.Var("y", "int32"), tir.Var("f", "float32"), tir.Var("l", "int64")


def test_var_and_constants_have_their_classes(xs):
    x, _, f, _ = xs
    assert type(x) is tir.Var and x.name == "x" and x.dtype == "int32"
    assert str(x) == "x"
    assert type(tir.SizeVar("n")) is tir.SizeVar
    assert isinstance(tir.SizeVar("n"), tir.Var)
    c = tir.const(3)
    assert type(c) is tir.IntImm and c.dtype == "int32" and int(c) == 3
    assert tir.const(2**40).dtype == "int64"
    assert type(tir.const(1.5)) is tir.FloatImm and tir.const(1.5).dtype == "float32"
    assert tir.const(True).dtype == "bool"
    assert tir.const(2, "float16").dtype == "float16"
    assert float(tir.FloatImm("float64", 0.25)) == 0.25
    with pytest.raises(TypeError):
        tir.const(1.5, "int32")
    assert f.dtype == "float32"


def test_operators_build_expected_text(xs):
    x, y, f, _ = xs
    cases = {
        x + 1: "x + 1",
        1 + x: "1 + x",
        x * y - 3: "x * y - 3",
        x // 4: "x // 4",
        x % 4: "x % 4",
        x < y: "x < y",
        x <= y: "x <= y",
        x > 2: "x > 2",
        x >= 2: "x >= 2",
        f * 2: "f * T.float32(2.0)",
        2.0 * f: "T.float32(2.0) * f",
        f / 2: "f / T.float32(2.0)",
        f**2.0: "T.pow(f, T.float32(2.0))",
        x & 3: "T.bitwise_and(x, 3)",
        x << 1: "T.shift_left(x, 1)",
        tir.truncdiv(x, 2): "T.truncdiv(x, 2)",
        tir.truncmod(x, 2): "T.truncmod(x, 2)",
        tir.max(x, 3): "T.max(x, 3)",
        tir.min(x, y): "T.min(x, y)",
    }
    for expr, text in cases.items():
        assert str(expr) == text
    assert type(x + 1) is tir.Add
    assert type(x < y) is tir.LT
    assert type(x // 4) is tir.FloorDiv
    assert str((x < y) & (y < 3)) == "x < y and y < 3"
    assert type((x < y) | (y < 3)) is tir.Or
    assert type(~(x < y)) is tir.Not
    assert "x" in str(-x) and (-x).dtype == "int32"
    assert (-f).dtype == "float32"


def test_literals_adapt_and_constants_fold(xs):
    _, _, f, l64 = xs
    assert str(f + 1) == "f + T.float32(1.0)"
    assert (tir.Var("h", "float16") + 2.0).dtype == "float16"
    assert (l64 + 2**40).dtype == "int64"
    folded = tir.const(2) + 3
    assert type(folded) is tir.IntImm and folded.value == 5
    assert int(tir.const(7) // 2) == 3
    assert int(tir.const(-7) // 2) == -4
    assert int(tir.truncdiv(-7, 2)) == -3
    assert int(tir.const(-7) % 2) == 1


def test_type_errors(xs):
    x, _, f, l64 = xs
    with pytest.raises(TypeError, match="one dtype"):
        x + f
    with pytest.raises(TypeError):
        x + 1.5
    with pytest.raises(TypeError):
        x + l64
    with pytest.raises(TypeError, match="float"):
        tir.exp(x)
    with pytest.raises(TypeError):
        tir.if_then_else(x, 1, 2)
    with pytest.raises(TypeError):
        f & f
    with pytest.raises(RuntimeError, match="integer divisions"):
        x / 2
    with pytest.raises(ValueError, match="tir.all"):
        bool(x < 1)
    with pytest.raises(ValueError):
        if x + 1:
            pass


def test_equality_is_expression_and_identity(xs):
    x, y, _, _ = xs
    eq = x == y
    assert isinstance(eq, tir.EqualOp)
    same = x
    assert not bool(eq) and bool(x == same) and bool(x != y)
    assert str(eq) == "x == y"
    assert type(eq.asexpr()) is tir.EQ
    assert type(x.equal(1)) is tir.EQ
    table = {x: 1, y: 2}
    assert table[x] == 1 and x in [y, x]
    # an EqualOp passed where the IR expects an expression becomes the comparison
    assert str(tir.Select(x == 1, x, y)) == "T.Select(x == 1, x, y)"
    assert str(tir.all(x == 1, y != 2)) == "x == 1 and y != 2"


def test_node_constructors_build_exact_nodes(xs):
    x, y, f, _ = xs
    add = tir.Add(1, 2)  # no folding
    assert type(add) is tir.Add and str(add) == "1 + 2"
    assert str(add.a) == "1" and add.dtype == "int32"
    assert type(tir.Cast("float32", x)) is tir.Cast
    assert x.astype("int32").same_as(x)
    assert str(x.astype("float32")) == 'T.Cast("float32", x)'
    assert type(tir.Select(x < 1, x, y)) is tir.Select
    assert str(tir.Broadcast(f, 4)).startswith("T.Broadcast(f, 4)")
    assert type(tir.Ramp(x, 1, 4)) is tir.Ramp
    assert type(tir.Let(tir.Var("t"), x + 1, x)) is tir.Let
    assert type(tir.StringImm("s")) is tir.StringImm


def test_intrinsics(xs):
    x, _, f, _ = xs
    assert str(tir.exp(f)) == "T.exp(f)"
    assert tir.exp(f).op == "tir.exp"
    assert type(tir.log(f)) is tir.Call
    assert str(tir.sqrt(2.0)) == "T.sqrt(T.float32(2.0))"
    for fn in (tir.exp, tir.log, tir.sqrt, tir.tanh, tir.erf, tir.sigmoid, tir.floor, tir.fabs):
        assert fn(f).dtype == "float32"
    assert str(tir.power(f, 2)) == "T.pow(f, T.float32(2.0))"
    assert str(tir.if_then_else(x < 0, f, 1.0)) == "T.if_then_else(x < 0, f, T.float32(1.0))"
    assert tir.if_then_else(True, x, 1).same_as(x)
    assert str(tir.abs(f)) == "T.fabs(f)"
    assert type(tir.abs(x)) is tir.Select
    assert str(tir.max_value("int8")) == "T.int8(127)"
    assert str(tir.min_value("int8")) == "T.int8(-128)"
    assert tir.min_value("float32").value == pytest.approx(-3.4028234663852886e38)
    assert int(tir.max_value("uint8")) == 255


def test_simplify_and_structural_equality(xs):
    x, y, _, _ = xs
    assert str(tir.simplify((x + 1) - x)) == "1"
    assert str(tir.simplify(x // 8, {x: (0, 8)})) == "0"
    assert tir.structural_equal(x + 1, x + 1)
    assert not tir.structural_equal(x + 1, y + 1)
    assert tir.structural_equal(x + 1, y + 1, map_free_vars=True)
    tir.assert_structural_equal(x * 2, x * 2)
    with pytest.raises(ValueError, match="StructuralEqual"):
        tir.assert_structural_equal(x * 2, x * 3)
    assert tir.structural_hash(x + 1) == tir.structural_hash(x + 1)


def _copy_func():
    n = 16
    a = tir.decl_buffer((n,), "float32", "A")
    b = tir.decl_buffer((n,), "float32", "B")
    i = tir.Var("i")
    body = tir.For(i, 0, n, tir.ForKind.SERIAL, tir.BufferStore(b, tir.Add(a[i] * 2.0, 0.0), [i]))
    return tir.PrimFunc([a.data, b.data], body, buffer_map={a.data: a, b.data: b}), body


def test_statements_functions_and_modules():
    func, body = _copy_func()
    assert type(body) is tir.For and body.kind == tir.ForKind.SERIAL
    assert str(body) == "for i in range(0, 16):\n    B[i] = A[i] * T.float32(2.0) + T.float32(0.0)"
    assert type(body.body) is tir.BufferStore
    assert type(func) is tir.PrimFunc
    mod = tir.IRModule({"copy": func})
    assert type(mod) is tir.IRModule
    assert mod.keys() == ["copy"] and "copy" in mod and list(mod) == ["copy"]
    assert mod["copy"].same_as(func)
    with pytest.raises(KeyError):
        mod["nope"]
    text = str(mod)
    assert text.startswith("@I.ir_module") and "def copy(" in text
    seq = tir.SeqStmt([tir.Evaluate(0), tir.Evaluate(1)])
    assert type(seq) is tir.SeqStmt
    assert type(tir.IfThenElse(tir.Var("c", "bool"), tir.Evaluate(0))) is tir.IfThenElse
    assert type(tir.Buffer) is type and isinstance(tir.decl_buffer((4,)), tir.Buffer)


def test_passes_and_pass_context():
    from kiln.tir import transform

    func, _ = _copy_func()
    mod = tir.IRModule({"copy": func})
    simplify = transform.Simplify()
    assert isinstance(simplify, transform.Pass) and simplify.name == "tir.Simplify"
    assert "+ T.float32(0.0)" not in str(simplify(mod))
    with transform.PassContext(disabled_pass=["tir.Simplify"]):
        assert "+ T.float32(0.0)" in str(simplify(mod))
    seq = transform.Sequential([transform.Simplify(), transform.RemoveNoOp()], "two")
    assert seq.name == "two"
    assert "+ T.float32(0.0)" not in str(seq(mod))
    assert transform.PassContext.current().opt_level == 2


def test_kiln_exports():
    assert kiln.tir is tir
    assert callable(kiln.lower) and callable(kiln.build)
