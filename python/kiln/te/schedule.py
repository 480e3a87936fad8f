"""Schedules (``te.Schedule``) and their stages (``te.Stage``): how the loops of each
operation are split, ordered, annotated and placed.

``s = te.create_schedule(C.op)``; ``s[C]`` is the stage of ``C``'s operation, whose methods
(``split``, ``tile``, ``fuse``, ``reorder``, ``vectorize``, ``parallel``, ``unroll``,
``pragma``, ``compute_at``, ``compute_inline``, ...) change the schedule in place.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..tir.expr import ExprLike, as_expr
from ..tir.node import Node, register_node
from . import _ffi_api
from .tensor import IterVar, Operation, Tensor


def _as_op(value: Any) -> Operation:
    if isinstance(value, Tensor):
        return value.op
    if isinstance(value, Operation):
        return value
    raise TypeError("expected a te.Tensor or te.Operation, got %s" % type(value).__name__)


def create_schedule(ops: Tensor | Operation | Sequence[Tensor | Operation]) -> Schedule:
    """A schedule computing the outputs of ``ops`` (an operation or tensor, or a list of them)
    and everything they read, with the default loop nests."""
    items = ops if isinstance(ops, (list, tuple)) else [ops]
    return _ffi_api.CreateSchedule([_as_op(op) for op in items])


def thread_axis(tag: str) -> IterVar:
    """A GPU thread axis for :meth:`Stage.bind`: ``"blockIdx.x"`` ... ``"threadIdx.z"``."""
    return _ffi_api.ThreadAxis(tag)


@register_node("te.Schedule")
class Schedule(Node):
    """A schedule: ``s[T]`` (a tensor or operation) is the :class:`Stage` of ``T``'s
    operation. Make one with :func:`create_schedule`."""

    __slots__ = ()

    def __getitem__(self, key: Tensor | Operation) -> Stage:
        return _ffi_api.ScheduleGetStage(self, _as_op(key))

    def __str__(self) -> str:
        return "<te.Schedule at 0x%x>" % (self.handle or 0)

    __repr__ = __str__

    def cache_read(
        self, tensor: Tensor, scope: str, readers: Tensor | Operation | Sequence[Tensor | Operation]
    ) -> Tensor:
        """A copy of ``tensor`` in ``scope`` read by ``readers`` (tensors or operations)
        instead of ``tensor``; returns the cache tensor (a new stage to schedule)."""
        items = readers if isinstance(readers, (list, tuple)) else [readers]
        return _ffi_api.ScheduleCacheRead(self, tensor, scope, [_as_op(r) for r in items])

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Computes ``tensor`` into a cache in ``scope`` first, ``tensor``'s stage then copies
        it out; returns the cache tensor (schedule it, e.g. ``compute_at`` into the copy)."""
        return _ffi_api.ScheduleCacheWrite(self, tensor, scope)


@register_node("te.Stage")
class Stage(Node):
    """The loops of one operation in a :class:`Schedule`. Methods change the schedule in place."""

    __slots__ = ()

    def __str__(self) -> str:
        return "Stage(%s)" % self.op.name

    __repr__ = __str__

    @property
    def op(self) -> Operation:
        """The operation the stage computes."""
        return _ffi_api.StageOp(self)

    @property
    def leaf_iter_vars(self) -> list[IterVar]:
        """The current loops of the stage, outermost first."""
        return list(_ffi_api.StageLeafIterVars(self))

    def split(
        self, parent: IterVar, factor: ExprLike | None = None, nparts: ExprLike | None = None
    ) -> tuple[IterVar, IterVar]:
        """Split loop ``parent`` into ``(outer, inner)``: the inner loop has ``factor``
        iterations, or the outer loop has ``nparts`` (give exactly one)."""
        if (factor is None) == (nparts is None):
            raise ValueError("split: give exactly one of factor and nparts")
        if factor is not None:
            outer, inner = _ffi_api.StageSplitByFactor(self, parent, as_expr(factor))
        else:
            outer, inner = _ffi_api.StageSplitByNParts(self, parent, as_expr(nparts))
        return outer, inner

    def tile(
        self, x_parent: IterVar, y_parent: IterVar, x_factor: ExprLike, y_factor: ExprLike
    ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split two loops by factors and order them ``(x_outer, y_outer, x_inner, y_inner)``,
        which are returned."""
        result = _ffi_api.StageTile(self, x_parent, y_parent, as_expr(x_factor), as_expr(y_factor))
        return tuple(result)

    def fuse(self, *args: Any) -> IterVar:
        """Fuse adjacent loops (outermost first) into one; returns the fused loop."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:
            raise ValueError("fuse needs at least one loop")
        fused = args[0]
        for iv in args[1:]:
            fused = _ffi_api.StageFuse(self, fused, iv)
        return fused

    def reorder(self, *args: Any) -> None:
        """Put the given loops in this order (the other loops keep their places)."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        _ffi_api.StageReorder(self, list(args))

    def bind(self, ivar: IterVar, thread_ivar: IterVar) -> None:
        """Bind loop ``ivar`` to the thread axis ``thread_ivar`` (from :func:`thread_axis`):
        the loop becomes a launch of that GPU thread index."""
        _ffi_api.StageBind(self, ivar, thread_ivar)

    def vectorize(self, var: IterVar) -> None:
        """Make loop ``var`` a vector loop."""
        _ffi_api.StageVectorize(self, var)

    def parallel(self, var: IterVar) -> None:
        """Make loop ``var`` a parallel loop (run by the thread pool)."""
        _ffi_api.StageParallel(self, var)

    def unroll(self, var: IterVar) -> None:
        """Unroll loop ``var``."""
        _ffi_api.StageUnroll(self, var)

    def pragma(self, var: IterVar, pragma_type: str, pragma_value: ExprLike | None = None) -> None:
        """Annotate loop ``var`` with ``pragma_type`` (value ``pragma_value``, default 1)."""
        value = 1 if pragma_value is None else pragma_value
        _ffi_api.StagePragma(self, var, pragma_type, as_expr(value))

    def compute_at(self, parent: Stage, scope: IterVar) -> None:
        """Compute this stage inside loop ``scope`` of stage ``parent``, for the region that
        one iteration of ``scope`` needs."""
        _ffi_api.StageComputeAt(self, parent, scope)

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers (no buffer, no loops)."""
        _ffi_api.StageComputeInline(self)

    def compute_root(self) -> None:
        """Compute this stage at the root (undoes ``compute_at`` / ``compute_inline``)."""
        _ffi_api.StageComputeRoot(self)

    def set_scope(self, scope: str) -> None:
        """Store this stage's result in memory scope ``scope`` (``"global"``, ``"local"``, ...)."""
        _ffi_api.StageSetScope(self, scope)
