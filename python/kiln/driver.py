"""The compiler driver (TVM's ``tvm.lower`` / ``tvm.build``): a schedule to TIR, then to a
runnable module.

- :func:`lower` turns a schedule (``te.Lower``) into an :class:`kiln.tir.IRModule` and runs
  the lowering passes under the current :class:`kiln.tir.transform.PassContext`: with
  ``simple_mode=True`` phases 0-2 only (StorageFlatten ... RewriteUnsafeSelect, the readable
  TIR over buffers), otherwise also the host passes MakePackedAPI and LowerTVMBuiltin (the
  packed calling convention code generation compiles).
- :func:`build` lowers fully and compiles with the runtime's ``codegen.Build(IRModule,
  target)``; the result is a :class:`kiln.Module` whose functions run in this process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .object import optional_global
from .te.schedule import Schedule
from .tir import transform as _transform
from .tir.function import IRModule, PrimFunc
from .tir.transform import HOST_PASSES, PHASE_PASSES, Pass, PassContext, Sequential

if TYPE_CHECKING:
    from .module import Module

#: The global function that compiles a packed-form IRModule for a target string.
CODEGEN_BUILD = "codegen.Build"
#: The same with the host target of a device build (target, target_host).
CODEGEN_BUILD_WITH_HOST = "codegen.BuildWithHost"


def _pipeline(names: Sequence[str], label: str) -> Pass:
    return Sequential([getattr(_transform, n)() for n in names], label)


def _as_module(inp: Schedule | PrimFunc | IRModule, args: Sequence[Any] | None, name: str) -> IRModule:
    if isinstance(inp, Schedule):
        if args is None:
            raise ValueError("lowering a schedule needs args: the tensors of the function")
        from .te import _ffi_api as te_api

        return IRModule({name: te_api.Lower(inp, list(args), name)})
    if isinstance(inp, PrimFunc):
        return IRModule({name: inp})
    if isinstance(inp, IRModule):
        return inp
    raise TypeError("expected a te.Schedule, a tir.PrimFunc or an IRModule, got %s" % type(inp).__name__)


def lower(
    inp: Schedule | PrimFunc | IRModule,
    args: Sequence[Any] | None = None,
    name: str = "main",
    binds: None = None,
    simple_mode: bool = False,
) -> IRModule:
    """Lower ``inp`` to an :class:`kiln.tir.IRModule` whose ``str()`` is its TIR text.

    ``inp`` is a ``te.Schedule`` (with ``args``, the tensors that become the function's
    parameters, in order), a ``tir.PrimFunc`` or an ``IRModule``; ``name`` names the function.
    ``simple_mode=True`` stops before MakePackedAPI (loops over buffers, what one reads);
    otherwise the module is in packed form, ready for code generation. Passes run under the
    current :class:`kiln.tir.transform.PassContext`.
    """
    if binds is not None:
        raise NotImplementedError("lower: binds are not supported")
    mod = _as_module(inp, args, name)
    ctx = PassContext.current()
    mod = ctx.run(_pipeline(PHASE_PASSES, "tir.LowerPhases"), mod)
    if not simple_mode:
        mod = ctx.run(_pipeline(HOST_PASSES, "tir.LowerHost"), mod)
    return mod


def build(
    inp: Schedule | PrimFunc | IRModule,
    args: Sequence[Any] | None = None,
    target: str | Sequence[str] = "llvm",
    name: str = "default_function",
    target_host: str | None = None,
) -> Module:
    """Compile ``inp`` for ``target`` into a :class:`kiln.Module`; ``mod[name]`` runs it.

    ``inp`` is a ``te.Schedule`` (lowered here with ``args``), a ``tir.PrimFunc`` or an
    ``IRModule`` (from :func:`lower`, either mode; the remaining passes are run). ``target`` is
    a target string such as ``"llvm"``, ``"llvm -mcpu=native -opt-level=3"`` or ``"c"``, or a
    list of ``llvm`` target strings for one library with code for each CPU. The
    function takes ``kiln.Tensor`` arguments (numpy arrays are accepted too and written back).
    Raises ``NotImplementedError`` when the runtime library has no code generator.

    A device target (``"opencl"``, ``"cuda"``, with flags) gives the host module (compiled for
    ``target_host``, default ``"llvm"``) importing the kernels' module (``mod.imports``;
    ``inspect_source("cl")`` / ``("cu")``); every loop must be bound to a thread axis
    (``s[T].bind(axis, te.thread_axis("threadIdx.x"))``). The module is lowered by the code
    generator then, not under the current pass context.
    """
    codegen = optional_global(CODEGEN_BUILD)
    if codegen is None:
        raise NotImplementedError(
            "kiln.build needs the global function %r (code generation), which the runtime "
            "library does not provide; kiln.lower works without it" % CODEGEN_BUILD
        )
    if isinstance(target, str) and _is_device_target(target):
        mod = _as_module(inp, args, name)
        if target_host is None:
            return codegen(mod, target)
        return optional_global(CODEGEN_BUILD_WITH_HOST)(mod, target, str(target_host))
    mod = lower(inp, args, name) if not isinstance(inp, IRModule) else _finish_lowering(inp)
    return codegen(mod, str(target) if isinstance(target, str) else [str(t) for t in target])


def _is_device_target(target: str) -> bool:
    """True for target strings of device kinds (their kernels need the module unlowered)."""
    kind = target.split()[0] if target.split() else ""
    return kind in ("opencl", "cuda")


def _finish_lowering(mod: IRModule) -> IRModule:
    """Run the host passes over a module that is not in packed form yet."""
    packed = all("calling_conv" in (mod[k].attrs or {}) for k in mod)
    if packed:
        return mod
    return lower(mod)
