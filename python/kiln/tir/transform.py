"""Passes over IR modules (TVM's ``tvm.transform`` + ``tir.transform``).

Each pass constructor (:func:`StorageFlatten`, :func:`Simplify`, ...) returns a :class:`Pass`;
calling a pass on an :class:`kiln.tir.IRModule` runs it under the current
:class:`PassContext` (opt level, disabled passes, configuration)::

    with PassContext(opt_level=3, config={"tir.UnrollLoop.auto_max_step": 16}):
        mod = Sequential([Simplify(), UnrollLoop()])(mod)
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from ..core import call_global
from .node import Node, register_node

if TYPE_CHECKING:
    from .function import IRModule


@register_node("transform.Pass")
class Pass(Node):
    """A named module-to-module transformation (fields ``name``, ``opt_level``)."""

    __slots__ = ()

    def __call__(self, mod: IRModule) -> IRModule:
        """Run the pass on ``mod`` under the current :class:`PassContext`; return the new module."""
        return PassContext.current().run(self, mod)

    def __str__(self) -> str:
        return "Pass(%s, opt_level=%d)" % (self.name, self.opt_level)

    __repr__ = __str__


class PassContext:
    """What passes run with: ``opt_level`` (a pass runs when its level is at most this),
    ``disabled_pass`` (names such as ``"tir.LoopPartition"``) and ``config`` (e.g.
    ``{"tir.disable_vectorize": True}``). Use as a context manager; contexts nest."""

    _local = threading.local()

    def __init__(
        self,
        opt_level: int = 2,
        disabled_pass: Iterable[str] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.opt_level = int(opt_level)
        self.disabled_pass = list(disabled_pass or [])
        self.config = dict(config or {})

    @classmethod
    def current(cls) -> PassContext:
        """The innermost active context (a default one when none is active)."""
        stack = getattr(cls._local, "stack", None)
        return stack[-1] if stack else cls()

    def __enter__(self) -> PassContext:
        if not hasattr(PassContext._local, "stack"):
            PassContext._local.stack = []
        PassContext._local.stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        PassContext._local.stack.pop()

    def run(self, pass_: Pass, mod: IRModule, extra_disabled: Sequence[str] = ()) -> IRModule:
        """Run ``pass_`` on ``mod`` with this context (and ``extra_disabled`` pass names)."""
        disabled = self.disabled_pass + list(extra_disabled)
        return call_global("transform.RunPass", pass_, mod, self.opt_level, disabled, self.config)


def _pass(global_name: str, doc: str) -> Callable[[], Pass]:
    def constructor() -> Pass:
        return call_global("transform." + global_name)

    constructor.__name__ = constructor.__qualname__ = global_name
    constructor.__doc__ = doc
    return constructor


StorageFlatten = _pass("StorageFlatten", "Multi-dimensional buffer accesses to flat ones.")
Simplify = _pass("Simplify", "Arithmetic simplification of every expression and statement.")
LoopPartition = _pass("LoopPartition", "Splits loops so that boundary conditions leave the main part.")
VectorizeLoop = _pass("VectorizeLoop", "Vectorized loops to vector expressions.")
UnrollLoop = _pass("UnrollLoop", "Unrolled loops (and small ones, when configured) to copies.")
StorageRewrite = _pass("StorageRewrite", "Reuse of allocations whose lifetimes do not overlap.")
RemoveNoOp = _pass("RemoveNoOp", "Removal of statements without effect.")
RewriteUnsafeSelect = _pass("RewriteUnsafeSelect", "Selects with unsafe sides to if_then_else.")
MakePackedAPI = _pass("MakePackedAPI", "Functions to the packed calling convention (TVMFFIAny args).")
LowerTVMBuiltin = _pass("LowerTVMBuiltin", "Builtin calls to runtime API calls (host lowering).")
LowerPipeline = _pass("LowerPipeline", "Every lowering pass in order, host passes included.")


def Sequential(passes: Iterable[Pass], name: str | None = None) -> Pass:
    """One pass running ``passes`` in order (each checked against the context)."""
    return call_global("transform.Sequential", list(passes), name)


#: The passes ``kiln.lower`` runs (TVM's phases 0-2), in order.
PHASE_PASSES = (
    "StorageFlatten",
    "Simplify",
    "LoopPartition",
    "VectorizeLoop",
    "UnrollLoop",
    "Simplify",
    "StorageRewrite",
    "RemoveNoOp",
    "RewriteUnsafeSelect",
)

#: The host passes ``kiln.build`` runs after lowering, before code generation.
HOST_PASSES = ("MakePackedAPI", "LowerTVMBuiltin")
