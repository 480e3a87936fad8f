"""The graph compiler (TVM's ``relay.build``): a graph module to a graph executor factory.

:func:`build` compiles a graph :class:`IRModule <kiln.Object>` (from
:func:`kiln.onnx.from_onnx`) for a target into a ``GraphExecutorFactory`` module: the graph
JSON, the params and the compiled library. ``export_library(path)`` writes all of it into one
shared library; ``load_module(path)["default"](dev)`` (or ``factory["default"](dev)``) makes
an executor to wrap in :class:`kiln.graph_executor.GraphModule`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from . import core
from .tensor import Tensor, _numpy, tensor

if TYPE_CHECKING:
    from .module import Module

#: The global function that builds a graph module.
GRAPH_BUILD = "graph.build"


def _params_map(params: Mapping[str, Any] | None) -> dict[str, Tensor] | None:
    if params is None:
        return None
    out = {}
    for name, value in params.items():
        if not isinstance(name, str):
            raise TypeError(f"graph.build: param names must be str, got {type(name).__name__}")
        out[name] = value if isinstance(value, Tensor) else tensor(_numpy().ascontiguousarray(value))
    return out


def build(
    mod: Any, target: str | Sequence[str] = "llvm -mcpu=native", params: Mapping[str, Any] | None = None
) -> Module:
    """Build the graph module ``mod`` for ``target`` (``"llvm"``, ``"llvm -mcpu=native"``, ...)
    into a ``GraphExecutorFactory`` :class:`kiln.Module`. A list of targets gives one library
    with code for each CPU (``["llvm -mcpu=x86-64-v3", "llvm -mcpu=x86-64-v4"]``); the loader
    runs the best one the host can. ``"opencl"`` (``"opencl -max_num_threads=N"``) gives host
    code launching one OpenCL program's kernels; create its executor with
    ``lib["default"](kiln.opencl(0))``.

    The default optimization pipeline (FuseOps last) runs first. ``params`` (a mapping of
    name to :class:`kiln.Tensor` or array, e.g. the params of :func:`kiln.onnx.from_onnx`)
    bind ``main`` parameters of the same names and are stored in the factory.
    """
    if not isinstance(target, str):
        target = [str(t) for t in target]
    return core.call_global(GRAPH_BUILD, mod, target, _params_map(params))
