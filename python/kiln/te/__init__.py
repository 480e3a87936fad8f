"""``kiln.te``: tensor expressions and schedules (TVM's ``tvm.te``).

Describe a computation point by point, schedule its loops, then lower or build it::

    from kiln import te
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    print(kiln.lower(s, [A, B], simple_mode=True))

The expression helpers of :mod:`kiln.tir.op` (``exp``, ``log``, ``sqrt``, ``if_then_else``,
...) are available here too. Everything is built by the runtime's ``te.*`` globals (bound in
``kiln.te._ffi_api``).
"""

from . import _ffi_api
from .tensor import (
    ComputeOp,
    IterVar,
    Operation,
    PlaceholderOp,
    Tensor,
    TensorSlice,
    compute,
    placeholder,
    reduce_axis,
    size_var,
    var,
)
from .reduction import comm_reducer, max, min, prod, sum
from .schedule import Schedule, Stage, create_schedule
from ..tir.op import (
    abs,
    acos,
    all,
    any,
    asin,
    atan,
    atan2,
    ceil,
    const,
    cos,
    cosh,
    div,
    erf,
    exp,
    exp2,
    exp10,
    expm1,
    fabs,
    floor,
    floordiv,
    floormod,
    fmod,
    if_then_else,
    indexdiv,
    indexmod,
    log,
    log1p,
    log2,
    log10,
    max_value,
    min_value,
    nearbyint,
    power,
    round,
    rsqrt,
    select,
    sigmoid,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)
