"""Operators and intrinsics on expressions (TVM's ``tir.op``): constants, casts, math
intrinsics (``exp``, ``log``, ``sqrt``, ...), divisions, ``if_then_else``, ``all``/``any``,
type limits.

A Python number given for an operand adapts to the other operand's type; the float
intrinsics refuse integer operands with ``TypeError`` (cast first).
"""

import builtins

from . import _ffi_api
from .expr import IntImm, PrimExpr, as_expr, dtype_of

_FLOAT_PREFIXES = ("float", "bfloat")

_FLOAT_LIMITS = {
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
    "float32": 3.4028234663852886e38,
    "float64": 1.7976931348623157e308,
}


def _is_float(dtype):
    return dtype.startswith(_FLOAT_PREFIXES)


def _is_int(dtype):
    return dtype.startswith(("int", "uint"))


def const(value, dtype=None):
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


def _expr(value, like=None):
    """``value`` as an expression; a Python number takes the type of ``like`` when given."""
    value = as_expr(value)
    if isinstance(value, (bool, int, float)):
        return const(value, None if like is None else dtype_of(like))
    return value


def _pair(a, b):
    a, b = as_expr(a), as_expr(b)
    a_plain, b_plain = isinstance(a, (bool, int, float)), isinstance(b, (bool, int, float))
    if a_plain and not b_plain:
        return _expr(a, b), b
    if b_plain and not a_plain:
        return a, _expr(b, a)
    return _expr(a), _expr(b)


def cast(value, dtype):
    """``value`` converted to ``dtype`` (unchanged when it has that type already)."""
    value = _expr(value)
    dtype = str(dtype)
    if dtype_of(value) == dtype:
        return value
    return _ffi_api.Cast(dtype, value)


def _float_call(name, args):
    dtypes = [dtype_of(a) for a in args]
    for dtype in dtypes:
        if not _is_float(dtype):
            raise TypeError("tir.%s needs float operands, got %s (cast it first)" % (name, dtype))
    if len(set(dtypes)) != 1:
        raise TypeError("tir.%s needs operands of one type, got %s" % (name, " and ".join(dtypes)))
    return _ffi_api.Call(dtypes[0], "tir." + name, list(args))


def _unary_intrinsic(name, doc):
    def intrinsic(x):
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


def power(x, y):
    """``x ** y`` of floats (``T.pow(x, y)``)."""
    return _float_call("pow", list(_pair(x, y)))


pow = power


def atan2(y, x):
    """Arc tangent of ``y / x`` using the signs of both (floats)."""
    return _float_call("atan2", list(_pair(y, x)))


def fmod(x, y):
    """Float remainder of ``x / y`` with the sign of ``x``."""
    return _float_call("fmod", list(_pair(x, y)))


def copysign(x, y):
    """``|x|`` with the sign of ``y`` (floats)."""
    return _float_call("copysign", list(_pair(x, y)))


def hypot(x, y):
    """``sqrt(x * x + y * y)`` (floats)."""
    return _float_call("hypot", list(_pair(x, y)))


def abs(x):
    """``|x|``: ``fabs`` for floats, ``select(x >= 0, x, -x)`` for signed integers."""
    x = _expr(x)
    dtype = dtype_of(x)
    if _is_float(dtype):
        return fabs(x)
    if dtype.startswith("uint"):
        return x
    return _ffi_api.Select(x >= 0, x, -x)


def min(a, b):
    """The smaller of two expressions (folded when constant)."""
    return _ffi_api._OpMin(as_expr(a), as_expr(b))


def max(a, b):
    """The larger of two expressions (folded when constant)."""
    return _ffi_api._OpMax(as_expr(a), as_expr(b))


def floordiv(a, b):
    """``floor(a / b)``."""
    return _ffi_api._OpFloorDiv(as_expr(a), as_expr(b))


def floormod(a, b):
    """``a - floordiv(a, b) * b`` (the sign of ``b``)."""
    return _ffi_api._OpFloorMod(as_expr(a), as_expr(b))


def truncdiv(a, b):
    """``a / b`` rounded toward zero (C division)."""
    return _ffi_api._OpDiv(as_expr(a), as_expr(b))


def truncmod(a, b):
    """The remainder of :func:`truncdiv` (C ``%``)."""
    return _ffi_api._OpMod(as_expr(a), as_expr(b))


def div(a, b):
    """``a / b``: truncated for integers, exact for floats."""
    return _ffi_api._OpDiv(as_expr(a), as_expr(b))


indexdiv = floordiv
indexmod = floormod


def select(condition, true_value, false_value):
    """``condition ? true_value : false_value``, both sides evaluated (a ``tir.Select``)."""
    t, f = _pair(true_value, false_value)
    return _ffi_api.Select(_expr(condition), t, f)


def if_then_else(cond, t, f):
    """``cond ? t : f`` evaluating only the chosen side (folded when ``cond`` is constant)."""
    cond = _expr(cond)
    if dtype_of(cond) != "bool":
        raise TypeError("if_then_else needs a bool condition, got %s" % dtype_of(cond))
    t, f = _pair(t, f)
    if dtype_of(t) != dtype_of(f):
        raise TypeError(
            "if_then_else needs both values of one type, got %s and %s" % (dtype_of(t), dtype_of(f))
        )
    if isinstance(cond, IntImm):
        return t if cond.value else f
    return _ffi_api.Call(dtype_of(t), "tir.if_then_else", [cond, t, f])


def likely(cond):
    """Marks a condition as usually true (a branch hint; the value is ``cond``)."""
    cond = _expr(cond)
    return _ffi_api.Call(dtype_of(cond), "tir.likely", [cond])


def all(*args):
    """Logical and of bool expressions (at least one)."""
    if not args:
        raise ValueError("all needs at least one argument")
    result = _expr(args[0])
    for arg in args[1:]:
        result = _ffi_api._OpAnd(result, as_expr(arg))
    return result


def any(*args):
    """Logical or of bool expressions (at least one)."""
    if not args:
        raise ValueError("any needs at least one argument")
    result = _expr(args[0])
    for arg in args[1:]:
        result = _ffi_api._OpOr(result, as_expr(arg))
    return result


def _bits(dtype):
    digits = dtype[4:] if dtype.startswith("uint") else dtype[3:]
    return int(digits.split("x")[0] or 32)


def max_value(dtype):
    """The largest value of ``dtype`` as a constant (finite for floats)."""
    dtype = str(dtype)
    if _is_float(dtype):
        return const(_FLOAT_LIMITS[dtype], dtype)
    if dtype == "bool":
        return const(True)
    bits = _bits(dtype)
    limit = (1 << bits) - 1 if dtype.startswith("uint") else (1 << (bits - 1)) - 1
    return const(builtins.min(limit, (1 << 63) - 1), dtype)


def min_value(dtype):
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
