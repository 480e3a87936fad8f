"""Expressions of the tensor IR (``PrimExpr`` and its node classes) with Python operators.

Operators build IR through the runtime's folding builders, as TVM's ``ExprOp`` does through
``_ffi_api._Op*``: ``x + 1``, ``x * y``, ``x // 4`` (floor division), ``x % 4`` (floor
modulo), comparisons, ``-x``, ``x ** 2.0`` (floats), ``&``/``|``/``~`` (logical on ``bool``,
bitwise on integers), ``<<``/``>>``/``^``. A Python ``int``/``float``/``bool`` operand adapts
to the other operand's type (``f + 1`` with a ``float32`` ``f`` is ``f + T.float32(1.0)``);
operands of different types raise ``TypeError`` (cast explicitly with :meth:`ExprOp.astype`).
``/`` of two integers raises, as in TVM: say which division is meant (``//``,
:func:`kiln.tir.truncdiv`, ...).

``a == b`` returns an :class:`EqualOp`: usable as an expression (it becomes ``a == b`` in IR)
and, in a boolean context, True when ``a`` and ``b`` are the same object, so expressions work
as dict keys and in ``in`` tests. Any other expression refuses ``bool()`` (use
:func:`kiln.tir.all` / :func:`kiln.tir.any` for ``and`` / ``or``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, Union

from .. import core
from ..core import ObjectBase
from . import _ffi_api
from .node import Node, register_node

if TYPE_CHECKING:
    from .function import Buffer

_PLAIN = (bool, int, float)


def as_expr(value: Any) -> Any:
    """``value`` as something the IR globals accept as an expression.

    Expressions and Python numbers are returned unchanged; objects standing for an expression
    (an ``IterVar`` stands for its variable, an :class:`EqualOp` for its comparison) are
    converted through their ``asexpr()`` method.
    """
    if isinstance(value, (PrimExpr,) + _PLAIN):
        return value
    convert = getattr(value, "asexpr", None)
    if convert is not None:
        return convert()
    return value


def dtype_of(value: Any) -> str:
    """The IR type of an expression or Python literal (``int`` -> ``"int32"`` or ``"int64"``,
    ``float`` -> ``"float32"``, ``bool`` -> ``"bool"``)."""
    value = as_expr(value)
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int32" if -(2**31) <= value < 2**31 else "int64"
    if isinstance(value, float):
        return "float32"
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        raise TypeError("expected an expression, got %s" % type(value).__name__)
    return str(dtype)


def _is_int_type(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _binary(builder: str, a: Any, b: Any) -> Any:
    return getattr(_ffi_api, builder)(as_expr(a), as_expr(b))


def _bitwise(name: str, a: Any, b: Any) -> Any:
    a, b = as_expr(a), as_expr(b)
    da, db = dtype_of(a), dtype_of(b)
    if isinstance(a, int) and _is_int_type(db):
        a, da = _ffi_api.IntImm(db, int(a)), db
    if isinstance(b, int) and _is_int_type(da):
        b, db = _ffi_api.IntImm(da, int(b)), da
    if not (_is_int_type(da) and da == db):
        raise TypeError("%s needs integer operands of one type, got %s and %s" % (name, da, db))
    return _ffi_api.Call(da, "tir." + name, [a, b])


class ExprOp:
    """Python operators building IR; mixed into :class:`PrimExpr` and into classes that stand
    for an expression (``te.IterVar``, :class:`EqualOp`), which define ``asexpr()``."""

    __slots__ = ()

    def asexpr(self) -> Any:
        """The expression this object stands for (the expression itself for a ``PrimExpr``)."""
        return self

    def __add__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpAdd", self, other)

    def __radd__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpAdd", other, self)

    def __sub__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpSub", self, other)

    def __rsub__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpSub", other, self)

    def __mul__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpMul", self, other)

    def __rmul__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpMul", other, self)

    def __truediv__(self, other: ExprLike) -> PrimExpr:
        _check_true_div(self, other)
        return _binary("_OpDiv", self, other)

    def __rtruediv__(self, other: ExprLike) -> PrimExpr:
        _check_true_div(other, self)
        return _binary("_OpDiv", other, self)

    def __floordiv__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpFloorDiv", self, other)

    def __rfloordiv__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpFloorDiv", other, self)

    def __mod__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpFloorMod", self, other)

    def __rmod__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpFloorMod", other, self)

    def __pow__(self, other: ExprLike) -> PrimExpr:
        from .op import power

        return power(self, other)

    def __rpow__(self, other: ExprLike) -> PrimExpr:
        from .op import power

        return power(other, self)

    def __neg__(self) -> PrimExpr:
        expr = self.asexpr()
        dtype = dtype_of(expr)
        zero = 0.0 if dtype.startswith(("float", "bfloat")) else 0
        return _binary("_OpSub", zero, expr)

    def __lt__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpLT", self, other)

    def __le__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpLE", self, other)

    def __gt__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpGT", self, other)

    def __ge__(self, other: ExprLike) -> PrimExpr:
        return _binary("_OpGE", self, other)

    def __eq__(self, other: object) -> EqualOp:  # type: ignore[override]  # builds IR
        return EqualOp(self, other)

    def __ne__(self, other: object) -> NotEqualOp:  # type: ignore[override]  # builds IR
        return NotEqualOp(self, other)

    __hash__ = ObjectBase.__hash__

    def __and__(self, other: ExprLike) -> PrimExpr:
        return _and_or("_OpAnd", "bitwise_and", self, other)

    def __rand__(self, other: ExprLike) -> PrimExpr:
        return _and_or("_OpAnd", "bitwise_and", other, self)

    def __or__(self, other: ExprLike) -> PrimExpr:
        return _and_or("_OpOr", "bitwise_or", self, other)

    def __ror__(self, other: ExprLike) -> PrimExpr:
        return _and_or("_OpOr", "bitwise_or", other, self)

    def __xor__(self, other: ExprLike) -> PrimExpr:
        return _bitwise("bitwise_xor", self, other)

    def __rxor__(self, other: ExprLike) -> PrimExpr:
        return _bitwise("bitwise_xor", other, self)

    def __lshift__(self, other: ExprLike) -> PrimExpr:
        return _bitwise("shift_left", self, other)

    def __rlshift__(self, other: ExprLike) -> PrimExpr:
        return _bitwise("shift_left", other, self)

    def __rshift__(self, other: ExprLike) -> PrimExpr:
        return _bitwise("shift_right", self, other)

    def __rrshift__(self, other: ExprLike) -> PrimExpr:
        return _bitwise("shift_right", other, self)

    def __invert__(self) -> PrimExpr:
        expr = self.asexpr()
        dtype = dtype_of(expr)
        if dtype == "bool":
            return _ffi_api.Not(expr)
        if not _is_int_type(dtype):
            raise TypeError("~ needs a bool or integer operand, got %s" % dtype)
        return _ffi_api.Call(dtype, "tir.bitwise_not", [expr])

    def __bool__(self):
        raise ValueError(
            "Cannot use and / or / not operator to Expr, hint: use kiln.tir.all / kiln.tir.any instead"
        )

    def equal(self, other: ExprLike) -> PrimExpr:
        """The IR comparison ``self == other`` (a ``tir.EQ`` node, folded when constant)."""
        return _binary("_OpEQ", self, other)

    def astype(self, dtype: str) -> PrimExpr:
        """``self`` cast to ``dtype`` (the expression itself when it has that type already)."""
        from .op import cast

        return cast(self, dtype)


def _and_or(logical: str, bitwise: str, a: Any, b: Any) -> Any:
    if dtype_of(a) == "bool" or dtype_of(b) == "bool":
        return _binary(logical, a, b)
    return _bitwise(bitwise, a, b)


def _check_true_div(a: Any, b: Any) -> None:
    if _is_int_type(dtype_of(a)) and _is_int_type(dtype_of(b)):
        raise RuntimeError(
            "Kiln supports multiple types of integer divisions, please call div, indexdiv/"
            "indexmod, floordiv/floormod or truncdiv/truncmod directly to avoid ambiguity "
            "in the code (or use // and % for floor division and modulo)"
        )


#: What operands of expressions may be: expressions, objects standing for one (``te.IterVar``,
#: :class:`EqualOp`) and Python numbers (which adapt to the other operand's type).
ExprLike = Union[ExprOp, int, float, bool]


class EqualOp(ExprOp):
    """The result of ``a == b`` on expressions: an expression when used as one, and in a
    boolean context whether ``a`` and ``b`` are the same object (TVM's ``EqualOp``)."""

    __slots__ = ("a", "b")
    _builder = "_OpEQ"

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def asexpr(self) -> PrimExpr:
        """The IR comparison node."""
        return _binary(self._builder, self.a, self.b)

    asobject = asexpr

    @property
    def dtype(self) -> str:
        """Always ``"bool"``."""
        return "bool"

    def _same(self) -> bool:
        a, b = self.a, self.b
        if isinstance(a, ObjectBase) and isinstance(b, ObjectBase):
            return a.same_as(b)
        if isinstance(a, ObjectBase) or isinstance(b, ObjectBase):
            return False
        return a == b

    def __bool__(self):
        return self._same()

    def __str__(self):
        return str(self.asexpr())

    __repr__ = __str__
    __hash__ = None  # type: ignore[assignment]  # unhashable (its == is an expression), as in TVM


class NotEqualOp(EqualOp):
    """The result of ``a != b`` on expressions (see :class:`EqualOp`)."""

    __slots__ = ()
    _builder = "_OpNE"

    def __bool__(self):
        return not self._same()


def _w_expr_like(buf: Any, off: int, value: Any, temps: list[Any]) -> None:
    expr = value.asexpr()
    core._IncRef(expr._handle)
    temps.append(expr._handle)
    core._w_object(buf, off, expr, temps)


core.add_writer(EqualOp, _w_expr_like)


# ---------------------------------------------------------------------------
# Node classes
# ---------------------------------------------------------------------------
@register_node("tir.PrimExpr")
class PrimExpr(ExprOp, Node):
    """Base class of expressions (reflected field ``dtype``)."""

    __slots__ = ()
    __hash__ = ObjectBase.__hash__
    __str__ = Node.__str__
    __repr__ = Node.__repr__


@register_node("tir.Var")
class Var(PrimExpr):
    """A variable: ``Var(name, dtype)`` (fields ``name_hint``, ``dtype``)."""

    __slots__ = ()

    def __init__(self, name: str, dtype: str = "int32") -> None:
        self.__init_handle_by_constructor__(_ffi_api.Var, name, dtype)

    @property
    def name(self) -> str:
        """The variable's name (its ``name_hint``)."""
        return self.name_hint


@register_node("tir.SizeVar")
class SizeVar(Var):
    """A variable known to be non-negative (a symbolic dimension): ``SizeVar(name, dtype)``."""

    __slots__ = ()

    def __init__(self, name: str, dtype: str = "int32") -> None:
        self.__init_handle_by_constructor__(_ffi_api.SizeVar, name, dtype)


@register_node("tir.IntImm")
class IntImm(PrimExpr):
    """An integer (or ``bool``) constant: ``IntImm(dtype, value)`` (fields ``dtype``, ``value``)."""

    __slots__ = ()

    def __init__(self, dtype: str, value: int) -> None:
        self.__init_handle_by_constructor__(_ffi_api.IntImm, dtype, int(value))

    def __int__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return self.value != 0


@register_node("tir.FloatImm")
class FloatImm(PrimExpr):
    """A float constant: ``FloatImm(dtype, value)`` (fields ``dtype``, ``value``)."""

    __slots__ = ()

    def __init__(self, dtype: str, value: float) -> None:
        self.__init_handle_by_constructor__(_ffi_api.FloatImm, dtype, float(value))

    def __float__(self) -> float:
        return float(self.value)


@register_node("tir.StringImm")
class StringImm(PrimExpr):
    """A string constant (arguments of calls): ``StringImm(value)``."""

    __slots__ = ()

    def __init__(self, value: str) -> None:
        self.__init_handle_by_constructor__(_ffi_api.StringImm, value)


class BinaryOpExpr(PrimExpr):
    """Base of the binary nodes (fields ``a``, ``b``). The constructors build exactly the node
    (no folding; operands must have one type, literals adapt)."""

    __slots__ = ()

    def __init__(self, a: ExprLike, b: ExprLike) -> None:
        self.__init_handle_by_constructor__(getattr(_ffi_api, type(self).__name__), as_expr(a), as_expr(b))


@register_node("tir.Add")
class Add(BinaryOpExpr):
    """``a + b``."""

    __slots__ = ()


@register_node("tir.Sub")
class Sub(BinaryOpExpr):
    """``a - b``."""

    __slots__ = ()


@register_node("tir.Mul")
class Mul(BinaryOpExpr):
    """``a * b``."""

    __slots__ = ()


@register_node("tir.Div")
class Div(BinaryOpExpr):
    """``a / b`` (truncated for integers)."""

    __slots__ = ()


@register_node("tir.Mod")
class Mod(BinaryOpExpr):
    """Truncated remainder of ``a / b``."""

    __slots__ = ()


@register_node("tir.FloorDiv")
class FloorDiv(BinaryOpExpr):
    """``floor(a / b)``."""

    __slots__ = ()


@register_node("tir.FloorMod")
class FloorMod(BinaryOpExpr):
    """``a - floor(a / b) * b``."""

    __slots__ = ()


@register_node("tir.Min")
class Min(BinaryOpExpr):
    """``min(a, b)``."""

    __slots__ = ()


@register_node("tir.Max")
class Max(BinaryOpExpr):
    """``max(a, b)``."""

    __slots__ = ()


class CmpExpr(BinaryOpExpr):
    """Base of the comparisons (type ``bool``)."""

    __slots__ = ()


@register_node("tir.EQ")
class EQ(CmpExpr):
    """``a == b``."""

    __slots__ = ()


@register_node("tir.NE")
class NE(CmpExpr):
    """``a != b``."""

    __slots__ = ()


@register_node("tir.LT")
class LT(CmpExpr):
    """``a < b``."""

    __slots__ = ()


@register_node("tir.LE")
class LE(CmpExpr):
    """``a <= b``."""

    __slots__ = ()


@register_node("tir.GT")
class GT(CmpExpr):
    """``a > b``."""

    __slots__ = ()


@register_node("tir.GE")
class GE(CmpExpr):
    """``a >= b``."""

    __slots__ = ()


@register_node("tir.And")
class And(BinaryOpExpr):
    """Logical ``a and b`` of bools."""

    __slots__ = ()


@register_node("tir.Or")
class Or(BinaryOpExpr):
    """Logical ``a or b`` of bools."""

    __slots__ = ()


@register_node("tir.Not")
class Not(PrimExpr):
    """Logical ``not a``: ``Not(a)``."""

    __slots__ = ()

    def __init__(self, a: ExprLike) -> None:
        self.__init_handle_by_constructor__(_ffi_api.Not, as_expr(a))


@register_node("tir.Cast")
class Cast(PrimExpr):
    """``value`` converted to ``dtype``: ``Cast(dtype, value)``."""

    __slots__ = ()

    def __init__(self, dtype: str, value: ExprLike) -> None:
        self.__init_handle_by_constructor__(_ffi_api.Cast, dtype, as_expr(value))


@register_node("tir.Select")
class Select(PrimExpr):
    """``condition ? true_value : false_value`` with both sides evaluated:
    ``Select(condition, true_value, false_value)``."""

    __slots__ = ()

    def __init__(self, condition: ExprLike, true_value: ExprLike, false_value: ExprLike) -> None:
        self.__init_handle_by_constructor__(
            _ffi_api.Select, as_expr(condition), as_expr(true_value), as_expr(false_value)
        )


@register_node("tir.Let")
class Let(PrimExpr):
    """``body`` with ``var`` bound to ``value``: ``Let(var, value, body)``."""

    __slots__ = ()

    def __init__(self, var: Var, value: ExprLike, body: ExprLike) -> None:
        self.__init_handle_by_constructor__(_ffi_api.Let, var, as_expr(value), as_expr(body))


@register_node("tir.BufferLoad")
class BufferLoad(PrimExpr):
    """An element of a buffer: ``BufferLoad(buffer, indices)``."""

    __slots__ = ()

    def __init__(self, buffer: Buffer, indices: Sequence[ExprLike]) -> None:
        self.__init_handle_by_constructor__(_ffi_api.BufferLoad, buffer, [as_expr(i) for i in indices])


@register_node("tir.Ramp")
class Ramp(PrimExpr):
    """The vector ``[base, base + stride, ...]`` of ``lanes`` lanes: ``Ramp(base, stride, lanes)``."""

    __slots__ = ()

    def __init__(self, base: ExprLike, stride: ExprLike, lanes: int) -> None:
        self.__init_handle_by_constructor__(_ffi_api.Ramp, as_expr(base), as_expr(stride), lanes)


@register_node("tir.Broadcast")
class Broadcast(PrimExpr):
    """``value`` repeated in ``lanes`` lanes: ``Broadcast(value, lanes)``."""

    __slots__ = ()

    def __init__(self, value: ExprLike, lanes: int) -> None:
        self.__init_handle_by_constructor__(_ffi_api.Broadcast, as_expr(value), lanes)


@register_node("tir.Call")
class Call(PrimExpr):
    """A call of an intrinsic or builtin by name: ``Call(dtype, op, args)`` (``op`` like
    ``"tir.exp"``). No type checks: prefer the functions of :mod:`kiln.tir.op`."""

    __slots__ = ()

    def __init__(self, dtype: str, op: str, args: Sequence[ExprLike]) -> None:
        self.__init_handle_by_constructor__(_ffi_api.Call, dtype, op, [as_expr(a) for a in args])
