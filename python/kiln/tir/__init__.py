"""``kiln.tir``: the tensor IR from Python (TVM's ``tvm.tir``).

Expressions with Python operators (:class:`PrimExpr`, :class:`Var`, constants, node classes),
intrinsics and operators (:mod:`kiln.tir.op`), statements, buffers, functions and modules,
structural comparison, and passes (:mod:`kiln.tir.transform`). Everything is built by the
runtime's ``tir.*`` globals (bound in ``kiln.tir._ffi_api``); ``str()`` prints the text form.
"""

from ..core import call_global
from . import _ffi_api
from .node import (
    Node,
    as_text,
    assert_structural_equal,
    register_node,
    structural_equal,
    structural_hash,
)
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOpExpr,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    CmpExpr,
    Div,
    EqualOp,
    ExprOp,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    NotEqualOp,
    Or,
    PrimExpr,
    Ramp,
    Select,
    SizeVar,
    StringImm,
    Sub,
    Var,
)
from .stmt import (
    Allocate,
    AssertStmt,
    AttrStmt,
    BufferStore,
    DeclBuffer,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)
from .function import Buffer, IRModule, PrimFunc, Range, decl_buffer
from .op import (
    abs,
    acos,
    all,
    any,
    asin,
    atan,
    atan2,
    cast,
    ceil,
    const,
    copysign,
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
    hypot,
    if_then_else,
    indexdiv,
    indexmod,
    likely,
    log,
    log1p,
    log2,
    log10,
    max,
    max_value,
    min,
    min_value,
    nearbyint,
    pow,
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
from . import op, transform


def simplify(expr, ranges=None):
    """``expr`` simplified by the arithmetic analyzer (``arith.Simplify``); ``ranges`` maps
    variables to :class:`Range` objects (or ``(begin, end)`` pairs) they are known to lie in."""
    if ranges is not None:
        ranges = {v: r if isinstance(r, Range) else Range(*r) for v, r in ranges.items()}
    return call_global("arith.Simplify", expr, ranges)
