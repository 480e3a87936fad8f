"""The ONNX front end (TVM's ``relay.frontend.from_onnx``).

- :func:`from_onnx`: an ONNX model (an ``onnx.ModelProto``, its serialized bytes or a path)
  to a graph module and its params (``onnx.FromOnnx``).
- :func:`compile`: the one-call path, model to ``GraphExecutorFactory`` module
  (:func:`from_onnx` then :func:`kiln.graph.build`)::

      lib = kiln.onnx.compile("model.onnx")
      lib.export_library("deploy.so")
      gm = kiln.graph_executor.GraphModule(lib["default"](kiln.cpu()))

Input shapes come from the model; ``shape_dict`` (``{name: (1, 3, 224, 224)}``) gives
static shapes to inputs with symbolic dimensions; ``frozen_inputs`` (``{name: array}``) fixes
run-time inputs to values at import, so that shapes computed from them (Resize's ``sizes``,
Reshape's ``shape``, a Reduce's ``axes``) are known at compile time (left as inputs, they make
a VM library whose kernels take run-time extents). Errors keep the front end's messages: an
unsupported operator raises one error listing every unsupported op type.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from . import core
from .tensor import Tensor, tensor

if TYPE_CHECKING:
    from .module import Module

#: The global function that converts a serialized ONNX model.
FROM_ONNX = "onnx.FromOnnx"
COMPILE = "onnx.Compile"
#: The global function that compiles under tuning records (:mod:`kiln.tune`).
COMPILE_WITH_RECORDS = "tune.CompileWithRecords"


def _model_bytes(model: Any) -> bytes:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if isinstance(model, (str, os.PathLike)):
        with open(model, "rb") as f:
            return f.read()
    serialize = getattr(model, "SerializeToString", None)
    if callable(serialize):
        return serialize()
    raise TypeError(
        f"expected an onnx.ModelProto, the bytes of a model or a path, got {type(model).__name__}"
    )


def _shape_map(shape_dict: Mapping[str, Sequence[int]] | None) -> dict[str, list[int]] | None:
    if shape_dict is None:
        return None
    out = {}
    for name, shape in shape_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"shape_dict keys must be input names (str), got {type(name).__name__}")
        try:
            out[name] = [int(d) for d in shape]
        except (TypeError, ValueError) as exc:
            raise type(exc)(
                f"shape_dict[{name!r}] = {shape!r}: a shape must be a sequence of ints ({exc})"
            ) from None
    return out


def _dims_map(dims: Mapping[str, Sequence[int] | str] | None) -> dict[str, list[int]] | None:
    if dims is None:
        return None
    out: dict[str, list[int]] = {}
    for name, values in dims.items():
        if not isinstance(name, str):
            raise TypeError(f"dims keys must be dimension names (str), got {type(name).__name__}")
        if isinstance(values, str) and values == "any":
            out[name] = []  # known only at run time
            continue
        try:
            out[name] = [int(v) for v in values]
        except (TypeError, ValueError) as exc:
            raise TypeError(f"dims[{name!r}] = {values!r}: values must be ints ({exc})") from None
    return out


def _frozen_map(frozen_inputs: Mapping[str, Any] | None) -> dict[str, Tensor] | None:
    if frozen_inputs is None:
        return None
    out = {}
    for name, value in frozen_inputs.items():
        if not isinstance(name, str):
            raise TypeError(
                f"frozen_inputs keys must be input names (str), got {type(name).__name__}")
        out[name] = value if isinstance(value, Tensor) else tensor(value)
    return out


def from_onnx(
    model: Any,
    shape_dict: Mapping[str, Sequence[int]] | None = None,
    frozen_inputs: Mapping[str, Any] | None = None,
) -> tuple[Any, dict[str, Tensor]]:
    """Convert ``model`` (an ``onnx.ModelProto``, bytes, or a path to a ``.onnx`` file) to
    ``(module, params)``: the graph module (typed) and a map of initializer name to
    :class:`kiln.Tensor`, to pass to :func:`kiln.graph.build`.

    ``shape_dict`` maps input names to static shapes for symbolic dimensions;
    ``frozen_inputs`` maps input names to values (arrays or :class:`kiln.Tensor`) that replace
    those inputs by constants.
    """
    data = _model_bytes(model)
    try:
        res = core.call_global(FROM_ONNX, data, _shape_map(shape_dict),
                               _frozen_map(frozen_inputs))
    except ValueError as e:
        # The front end names the model '<bytes>'; name the file it came from instead.
        if isinstance(model, (str, os.PathLike)) and "'<bytes>'" in str(e):
            raise ValueError(str(e).replace("'<bytes>'", f"'{os.fspath(model)}'", 1)) from None
        raise
    return res[0], res[1]


def compile(
    model: Any,
    shape_dict: Mapping[str, Sequence[int]] | None = None,
    target: str | Sequence[str] = "llvm -mcpu=native",
    frozen_inputs: Mapping[str, Any] | None = None,
    dims: Mapping[str, Sequence[int] | str] | None = None,
    tuning_records: str | os.PathLike | None = None,
) -> Module:
    """Compile ``model`` (a path, bytes or ``onnx.ModelProto``) for ``target`` into a factory
    :class:`kiln.Module`: a ``GraphExecutorFactory`` (what :func:`kiln.graph.build` returns)
    for a static model, a ``VMFactory`` for a model whose control flow is decided at run time
    (an ``If`` on a run-time input), whose executor is Kiln's virtual machine. ``dims`` maps
    symbolic dimensions of the inputs to the values to compile for (``{"seq": [16, 64]}``):
    ONE library holds code for every combination, and its VM picks the code for the input
    shapes given at run time; ``"any"`` instead of values (``{"seq": "any"}``) leaves the
    dimension to run time: the nodes reading it are kernels compiled with run-time extents
    (a node that has none is refused, naming it). Either way
    ``lib["default"](dev)`` makes an executor with the same functions (``set_input``, ``run``,
    ``get_output``...), which :class:`kiln.graph_executor.GraphModule` wraps. ``target`` may be
    a list (one library with code for each CPU), or ``"opencl"`` for kernels on an OpenCL
    device (run with ``lib["default"](kiln.opencl(0))``). ``shape_dict`` and
    ``frozen_inputs`` are :func:`from_onnx`'s. ``tuning_records`` is a file of
    :func:`kiln.tune.tune` whose schedule choices the build takes (one target; layers it does
    not hold, and records of another CPU, take the heuristics)."""
    data = _model_bytes(model)
    targets = [target] if isinstance(target, str) else list(target)
    args = (data, _shape_map(shape_dict), _frozen_map(frozen_inputs), targets, _dims_map(dims))
    try:
        if tuning_records is not None:
            return core.call_global(COMPILE_WITH_RECORDS, os.fspath(tuning_records), *args)
        return core.call_global(COMPILE, *args)
    except ValueError as e:
        if isinstance(model, (str, os.PathLike)) and "'<bytes>'" in str(e):
            raise ValueError(str(e).replace("'<bytes>'", f"'{os.fspath(model)}'", 1)) from None
        raise
