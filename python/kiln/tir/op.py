"""Operators and intrinsics on expressions (TVM's ``tir.op``): constants, casts, math
intrinsics (``exp``, ``log``, ``sqrt``, ...), divisions, ``if_then_else``, ``all``/``any``,
type limits.

A Python number given for an operand adapts to the other operand's type; the float
intrinsics refuse integer operands with ``TypeError`` (cast first).
"""

from __future__ import annotations

import builtins
from typing import Any, Callable, Sequence

from . import _ffi_api
from .expr import ExprLike, IntImm, PrimExpr, as_expr, dtype_of

_FLOAT_PREFIXES = ("float", "bfloat")

_FLOAT_LIMITS = {
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
    "float32": 3.4028234663852886e38,
    "float64": 1.7976931348623157e308,
}


def _is_float(dtype: str) -> bool:
    return dtype.startswith(_FLOAT_PREFIXES)


def _is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def const(value: PrimExpr | int | float | bool, dtype: str | None = None) -> PrimExpr:
    """A constant expression: ``int`` -> ``int32`` (``int64`` when large), ``float`` ->
    ``float32``, ``bool`` -> ``bool``, unless ``dtype`` says otherwise."""
    if isinstance(value, PrimExpr):
        return value if dtype is None else cast(value, dtype)
    if dtype is None:
        dtype = dtype_of(value)
    dtype = str(dtype)
    if _is_float(dtype):
        return _ffi_api.FloatImm(dtype, float(value))
    if isinstance(value, float) and not value.is_integer():
        raise TypeError("cannot make a %s constant of %r" % (dtype, value))
    return _ffi_api.IntImm(dtype, int(value))


def _expr(value: Any, like: Any = None) -> Any:
    """``value`` as an expression; a Python number takes the type of ``like`` when given."""
    value = as_expr(value)
    if isinstance(value, (bool, int, float)):
        return const(value, None if like is None else dtype_of(like))
    return value


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    a, b = as_expr(a), as_expr(b)
    a_plain, b_plain = isinstance(a, (bool, int, float)), isinstance(b, (bool, int, float))
    if a_plain and not b_plain:
        return _expr(a, b), b
    if b_plain and not a_plain:
        return a, _expr(b, a)
    return _expr(a), _expr(b)


def cast(value: ExprLike, dtype: str) -> PrimExpr:
    """``value`` converted to ``dtype`` (unchanged when it has that type already)."""
    expr = _expr(value)
    dtype = str(dtype)
    if dtype_of(expr) == dtype:
        return expr
    return _ffi_api.Cast(dtype, expr)


def _float_call(name: str, args: Sequence[Any]) -> PrimExpr:
    dtypes = [dtype_of(a) for a in args]
    for dtype in dtypes:
        if not _is_float(dtype):
            raise TypeError("tir.%s needs float operands, got %s (cast it first)" % (name, dtype))
    if len(set(dtypes)) != 1:
        raise TypeError("tir.%s needs operands of one type, got %s" % (name, " and ".join(dtypes)))
    return _ffi_api.Call(dtypes[0], "tir." + name, list(args))


def _unary_intrinsic(name: str, doc: str) -> Callable[[ExprLike], PrimExpr]:
    def intrinsic(x: ExprLike) -> PrimExpr:
        return _float_call(name, [_expr(x)])

    intrinsic.__name__ = intrinsic.__qualname__ = name
    intrinsic.__doc__ = "%s of a float expression (``T.%s(x)``)." % (doc, name)
    return intrinsic


exp = _unary_intrinsic("exp", "``e ** x``")
exp2 = _unary_intrinsic("exp2", "``2 ** x``")
exp10 = _unary_intrinsic("exp10", "``10 ** x``")
expm1 = _unary_intrinsic("expm1", "``e ** x - 1``")
log = _unary_intrinsic("log", "Natural logarithm")
log2 = _unary_intrinsic("log2", "Base-2 logarithm")
log10 = _unary_intrinsic("log10", "Base-10 logarithm")
log1p = _unary_intrinsic("log1p", "``log(1 + x)``")
sqrt = _unary_intrinsic("sqrt", "Square root")
rsqrt = _unary_intrinsic("rsqrt", "``1 / sqrt(x)``")
sin = _unary_intrinsic("sin", "Sine")
cos = _unary_intrinsic("cos", "Cosine")
tan = _unary_intrinsic("tan", "Tangent")
sinh = _unary_intrinsic("sinh", "Hyperbolic sine")
cosh = _unary_intrinsic("cosh", "Hyperbolic cosine")
tanh = _unary_intrinsic("tanh", "Hyperbolic tangent")
asin = _unary_intrinsic("asin", "Arc sine")
acos = _unary_intrinsic("acos", "Arc cosine")
atan = _unary_intrinsic("atan", "Arc tangent")
sigmoid = _unary_intrinsic("sigmoid", "``1 / (1 + exp(-x))``")
erf = _unary_intrinsic("erf", "Error function")
fabs = _unary_intrinsic("fabs", "Absolute value")
floor = _unary_intrinsic("floor", "Rounding down")
ceil = _unary_intrinsic("ceil", "Rounding up")
round = _unary_intrinsic("round", "Rounding half away from zero")
nearbyint = _unary_intrinsic("nearbyint", "Rounding half to even")
trunc = _unary_intrinsic("trunc", "Rounding toward zero")


def power(x: ExprLike, y: ExprLike) -> PrimExpr:
    """``x ** y`` of floats (``T.pow(x, y)``)."""
    return _float_call("pow", list(_pair(x, y)))


pow = power


def atan2(y: ExprLike, x: ExprLike) -> PrimExpr:
    """Arc tangent of ``y / x`` using the signs of both (floats)."""
    return _float_call("atan2", list(_pair(y, x)))


def fmod(x: ExprLike, y: ExprLike) -> PrimExpr:
    """Float remainder of ``x / y`` with the sign of ``x``."""
    return _float_call("fmod", list(_pair(x, y)))


def copysign(x: ExprLike, y: ExprLike) -> PrimExpr:
    """``|x|`` with the sign of ``y`` (floats)."""
    return _float_call("copysign", list(_pair(x, y)))


def hypot(x: ExprLike, y: ExprLike) -> PrimExpr:
    """``sqrt(x * x + y * y)`` (floats)."""
    return _float_call("hypot", list(_pair(x, y)))


def abs(x: ExprLike) -> PrimExpr:
    """``|x|``: ``fabs`` for floats, ``select(x >= 0, x, -x)`` for signed integers."""
    expr = _expr(x)
    dtype = dtype_of(expr)
    if _is_float(dtype):
        return fabs(expr)
    if dtype.startswith("uint"):
        return expr
    return _ffi_api.Select(expr >= 0, expr, -expr)


def min(a: ExprLike, b: ExprLike) -> PrimExpr:
    """The smaller of two expressions (folded when constant)."""
    return _ffi_api._OpMin(as_expr(a), as_expr(b))


def max(a: ExprLike, b: ExprLike) -> PrimExpr:
    """The larger of two expressions (folded when constant)."""
    return _ffi_api._OpMax(as_expr(a), as_expr(b))


def floordiv(a: ExprLike, b: ExprLike) -> PrimExpr:
    """``floor(a / b)``."""
    return _ffi_api._OpFloorDiv(as_expr(a), as_expr(b))


def floormod(a: ExprLike, b: ExprLike) -> PrimExpr:
    """``a - floordiv(a, b) * b`` (the sign of ``b``)."""
    return _ffi_api._OpFloorMod(as_expr(a), as_expr(b))


def truncdiv(a: ExprLike, b: ExprLike) -> PrimExpr:
    """``a / b`` rounded toward zero (C division)."""
    return _ffi_api._OpDiv(as_expr(a), as_expr(b))


def truncmod(a: ExprLike, b: ExprLike) -> PrimExpr:
    """The remainder of :func:`truncdiv` (C ``%``)."""
    return _ffi_api._OpMod(as_expr(a), as_expr(b))


def div(a: ExprLike, b: ExprLike) -> PrimExpr:
    """``a / b``: truncated for integers, exact for floats."""
    return _ffi_api._OpDiv(as_expr(a), as_expr(b))


indexdiv = floordiv
indexmod = floormod


def select(condition: ExprLike, true_value: ExprLike, false_value: ExprLike) -> PrimExpr:
    """``condition ? true_value : false_value``, both sides evaluated (a ``tir.Select``)."""
    t, f = _pair(true_value, false_value)
    return _ffi_api.Select(_expr(condition), t, f)


def if_then_else(cond: ExprLike, t: ExprLike, f: ExprLike) -> PrimExpr:
    """``cond ? t : f`` evaluating only the chosen side (folded when ``cond`` is constant)."""
    cond = _expr(cond)
    if dtype_of(cond) != "bool":
        raise TypeError("if_then_else needs a bool condition, got %s" % dtype_of(cond))
    t_expr, f_expr = _pair(t, f)
    if dtype_of(t_expr) != dtype_of(f_expr):
        raise TypeError(
            "if_then_else needs both values of one type, got %s and %s"
            % (dtype_of(t_expr), dtype_of(f_expr))
        )
    if isinstance(cond, IntImm):
        return t_expr if cond.value else f_expr
    return _ffi_api.Call(dtype_of(t_expr), "tir.if_then_else", [cond, t_expr, f_expr])


def likely(cond: ExprLike) -> PrimExpr:
    """Marks a condition as usually true (a branch hint; the value is ``cond``)."""
    cond = _expr(cond)
    return _ffi_api.Call(dtype_of(cond), "tir.likely", [cond])


def all(*args: ExprLike) -> PrimExpr:
    """Logical and of bool expressions (at least one)."""
    if not args:
        raise ValueError("all needs at least one argument")
    result = _expr(args[0])
    for arg in args[1:]:
        result = _ffi_api._OpAnd(result, as_expr(arg))
    return result


def any(*args: ExprLike) -> PrimExpr:
    """Logical or of bool expressions (at least one)."""
    if not args:
        raise ValueError("any needs at least one argument")
    result = _expr(args[0])
    for arg in args[1:]:
        result = _ffi_api._OpOr(result, as_expr(arg))
    return result


def _bits(dtype: str) -> int:
    digits = dtype[4:] if dtype.startswith("uint") else dtype[3:]
    return int(digits.split("x")[0] or 32)


def max_value(dtype: str) -> PrimExpr:
    """The largest value of ``dtype`` as a constant (finite for floats)."""
    dtype = str(dtype)
    if _is_float(dtype):
        return const(_FLOAT_LIMITS[dtype], dtype)
    if dtype == "bool":
        return const(True)
    bits = _bits(dtype)
    limit = (1 << bits) - 1 if dtype.startswith("uint") else (1 << (bits - 1)) - 1
    return const(builtins.min(limit, (1 << 63) - 1), dtype)


def min_value(dtype: str) -> PrimExpr:
    """The smallest value of ``dtype`` as a constant (finite for floats)."""
    dtype = str(dtype)
    if _is_float(dtype):
        return const(-_FLOAT_LIMITS[dtype], dtype)
    if dtype == "bool":
        return const(False)
    if dtype.startswith("uint"):
        return const(0, dtype)
    bits = _bits(dtype)
    return const(-(1 << (bits - 1)), dtype)
