"""The graph executor (TVM's ``tvm.contrib.graph_executor``): run a compiled model described by
TVM's graph JSON.

A compiled model is a *factory* module (kind ``GraphExecutorFactory``): graph JSON, params and
the compiled library.  ``lib["default"](dev)`` makes an executor module, which
:class:`GraphModule` wraps::

    lib = kiln.load_module("deploy.so")                 # or kiln.graph_executor.factory(...)
    m = kiln.graph_executor.GraphModule(lib["default"](kiln.cpu()))
    m.set_input("x", x)                                  # numpy array or kiln.Tensor
    m.run()
    y = m.get_output(0).numpy()

Also here: :func:`create` (an executor from graph JSON and a library, without a factory),
:func:`factory` (make a factory to export with ``export_library``),
:func:`load_static_library` (an object file of kernels that ``export_library`` links), and the
params format (:func:`save_param_dict`, :func:`load_param_dict`).
"""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING, Any, Mapping, Sequence

from . import core
from .module import Module
from .tensor import Tensor, _is_numpy_array, _numpy, from_dlpack, numpy_dtype

if TYPE_CHECKING:
    from .device import Device
    from .function import Function
    from .module import BenchmarkResult

__all__ = [
    "GraphModule",
    "create",
    "factory",
    "load_param_dict",
    "load_static_library",
    "save_param_dict",
]


def _call(name: str, *args: Any) -> Any:
    return core.call_global(name, *args)


def create(graph_json_str: str, libmod: Module, device: Device | Sequence[Device]) -> GraphModule:
    """An executor for ``graph_json_str`` whose nodes call the functions of ``libmod``, on
    ``device`` (a :class:`kiln.Device` or a list of them), wrapped in a :class:`GraphModule`."""
    devices = list(device) if isinstance(device, (list, tuple)) else [device]
    return GraphModule(_call("runtime.GraphExecutorCreate", graph_json_str, libmod, *devices))


def factory(
    graph_json: str,
    lib: Module,
    params: Mapping[str, Any] | bytes | bytearray | None = None,
    module_name: str = "default",
) -> Module:
    """A ``GraphExecutorFactory`` module: ``graph_json`` (str), the compiled library ``lib``
    (a module; a :func:`load_static_library` module to export) and ``params`` (a dict of
    name to array or tensor, copied; or the bytes of a params file).

    ``factory(...)["default"](dev)`` makes executors; ``export_library(path)`` writes the
    factory and the library into one shared library that :func:`kiln.load_module` restores.
    Its functions ``get_graph_json``, ``get_graph_params``, ``list_params`` and ``get_lib``
    give back what it holds.
    """
    if params is None:
        return _call("runtime.GraphExecutorFactoryCreate", graph_json, lib, module_name)
    if isinstance(params, (bytes, bytearray)):
        return _call("runtime.GraphExecutorFactoryCreate", graph_json, lib, module_name, bytes(params))
    flat: list[Any] = []
    for name, value in params.items():
        flat.append(name)
        flat.append(value.copyto(value.device) if isinstance(value, Tensor) else _to_tensor(value))
    return _call("runtime.GraphExecutorFactoryCreate", graph_json, lib, module_name, *flat)


def load_static_library(path: str | os.PathLike[str], func_names: Sequence[str] = ()) -> Module:
    """A module of the object file at ``path`` (kind ``static_library``) defining the functions
    ``func_names``: it cannot run, but ``export_library`` links it (TVM's
    ``tvm.runtime.load_static_library``)."""
    return _call("runtime.ModuleLoadStaticLibrary", os.fspath(path), list(func_names))


def _to_tensor(value: Any) -> Tensor:
    from .tensor import tensor

    return tensor(_numpy().ascontiguousarray(value))


def _shared(value: Any) -> Tensor:
    # A tensor sharing the memory of ``value`` (the generic argument conversion would copy a
    # misaligned numpy array into a temporary, which zero copy must not bind).
    return value if isinstance(value, Tensor) else from_dlpack(value)


def save_param_dict(params: Mapping[str, Any]) -> bytes:
    """Serialize ``{name: array or tensor}`` in TVM's params format (``bytes``)."""
    converted = {k: (v if isinstance(v, Tensor) else _to_tensor(v)) for k, v in params.items()}
    return bytes(_call("runtime.SaveParams", converted))


def load_param_dict(data: bytes | bytearray) -> dict[str, Tensor]:
    """Read a params file (``bytes``) into ``{name: kiln.Tensor}`` (CPU tensors)."""
    return dict(_call("runtime.LoadParams", bytes(data)).items())


class GraphModule:
    """Wrapper of a ``GraphExecutor`` module with TVM's ``GraphModule`` interface.

    Inputs are named or numbered; values are :class:`kiln.Tensor`, numpy arrays or anything
    with ``__dlpack__`` (their shape and dtype must match the input: mismatches raise
    ``ValueError`` / ``TypeError`` naming the input); Python lists and scalars are converted
    to the input's dtype.  Outputs are tensors in the executor's memory: the next :meth:`run`
    overwrites them (``get_output(i).numpy()`` copies; ``get_output(i, out)`` copies into
    ``out``).  One executor runs one call at a time; make one per thread to run concurrently.
    """

    def __init__(self, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"GraphModule wraps a GraphExecutor module, got {type(module).__name__}")
        self.module = module
        self._set_input = module["set_input"]
        self._set_input_zero_copy = module["set_input_zero_copy"]
        self._set_output_zero_copy = module["set_output_zero_copy"]
        self._run = module["run"]
        self._get_output = module["get_output"]
        self._get_input = module["get_input"]
        self._get_num_outputs = module["get_num_outputs"]
        self._get_num_inputs = module["get_num_inputs"]
        self._get_input_index = module["get_input_index"]
        self._get_input_info = module["get_input_info"]
        self._get_output_info = module["get_output_info"]
        self._load_params = module["load_params"]
        self._share_params = module["share_params"]
        self._input_dtypes: dict[str, str] | None = None
        # numpy views of the executor's own input tensors, by key, for set_input's copy
        # without an FFI call; None once set_input_zero_copy or share_params has swapped an
        # input's tensor.
        self._input_views: dict[str | int, Any] | None = {}

    def _convert(self, key: str | int, value: Any) -> Any:
        if isinstance(value, (list, tuple, int, float, bool)):
            if self._input_dtypes is None:
                self._input_dtypes = dict(self._get_input_info()["dtype"].items())
            name = key if isinstance(key, str) else self.module["get_input_name"](key)
            dtype = self._input_dtypes.get(name)
            return _numpy().asarray(value, dtype=numpy_dtype(dtype)[0] if dtype else None)
        return value

    def set_input(self, key: str | int | None = None, value: Any = None, **params: Any) -> None:
        """Copy ``value`` into input ``key`` (name or index), and each of ``params``
        (``name=value``) into the input of that name.

        A numpy array of the input's shape and dtype is copied straight into the executor's
        input tensor (one copy, no allocation, whatever its alignment or strides); anything
        else goes through the executor's ``set_input``, which checks it and names the input
        in its errors."""
        if key is not None:
            self._set_one(key, value)
        for name, val in params.items():
            self._set_one(name, val)

    def _set_one(self, key: str | int, value: Any) -> None:
        if _is_numpy_array(value):
            view = self._input_view(key)
            if view is not None and view.shape == value.shape and view.dtype == value.dtype:
                view[...] = value
                return
        self._set_input(key, self._convert(key, value))

    def _input_view(self, key: str | int) -> Any:
        views = self._input_views
        if views is None:
            return None
        view = views.get(key)
        if view is None and not isinstance(key, bool) and isinstance(key, (str, int)):
            try:
                view = _numpy().from_dlpack(self._get_input(key))
            except Exception:  # a bad key, a dtype numpy lacks: the FFI path says what is wrong
                return None
            if not view.flags.writeable:
                return None
            views[key] = view
        return view

    def set_input_zero_copy(self, key: str | int, value: Any) -> None:
        """Make input ``key`` use ``value``'s memory (no copy) until the next
        :meth:`set_input` of it. ``value`` must be a :class:`kiln.Tensor` (or a numpy array or
        DLPack object, whose memory is shared, never copied) on the input's device with its
        shape and dtype, contiguous and 64-byte aligned; writes into it are seen by the next
        run, and the executor keeps it alive."""
        self._set_input_zero_copy(key, _shared(value))
        self._input_views = None

    def set_output_zero_copy(self, index: int, value: Any) -> None:
        """Make output ``index`` be written into ``value``'s memory (see
        :meth:`set_input_zero_copy`)."""
        self._set_output_zero_copy(index, _shared(value))

    def run(self, **input_dict: Any) -> None:
        """Set the inputs given as keywords, then run every node."""
        if input_dict:
            self.set_input(**input_dict)
        self._run()

    def get_num_outputs(self) -> int:
        """Number of outputs."""
        return self._get_num_outputs()

    def get_num_inputs(self) -> int:
        """Number of inputs (params included)."""
        return self._get_num_inputs()

    def get_input(self, index: str | int, out: Any = None) -> Any:
        """The tensor of input ``index`` (name or index); with ``out``, a copy into it."""
        t = self._get_input(index)
        if out is not None:
            if isinstance(out, Tensor):
                t.copyto(out)
            else:
                out[...] = t.numpy()
            return out
        return t

    def get_input_index(self, name: str) -> int:
        """The index of the input ``name``, or -1."""
        return self._get_input_index(name)

    def get_input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """``(shape_dict, dtype_dict)`` of the inputs by name."""
        info = self._get_input_info()
        shapes = {k: tuple(v) for k, v in info["shape"].items()}
        dtypes = {k: str(v) for k, v in info["dtype"].items()}
        return shapes, dtypes

    def get_output_info(self) -> tuple[list[tuple[int, ...]], list[str]]:
        """``(shapes, dtypes)`` of the outputs, as lists in output order."""
        info = self._get_output_info()
        return [tuple(s) for s in info["shape"]], [str(d) for d in info["dtype"]]

    def get_output(self, index: int, out: Any = None) -> Any:
        """Output ``index``: the executor's tensor, or with ``out`` (a tensor or a writable
        numpy array of its shape and dtype) a copy into ``out``, which is returned."""
        if out is not None:
            self._get_output(index, out)
            return out
        return self._get_output(index)

    def load_params(self, params_bytes: bytes | bytearray) -> None:
        """Copy the tensors of a params file into the inputs of the same names (names that
        are not inputs are skipped)."""
        self._load_params(bytes(params_bytes))

    def share_params(self, other: GraphModule | Module, params_bytes: bytes | bytearray) -> None:
        """Make the inputs named in ``params_bytes`` use the memory of ``other``'s inputs
        (one copy of the weights for several executors)."""
        other_module = other.module if isinstance(other, GraphModule) else other
        self._share_params(other_module, bytes(params_bytes))
        self._input_views = None

    def debug_get_output(self, node: int | str) -> list[Tensor]:
        """Run the graph up to node ``node`` (index or name) and return copies of its outputs."""
        return list(self.module["debug_get_node_output"](node))

    def run_individual(self, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0) -> list[float]:
        """Mean seconds per call of every node (0 for inputs), in node order."""
        return list(self.module["run_individual"](number, repeat, min_repeat_ms))

    def profile(self, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0) -> dict[str, Any]:
        """Time every node; returns ``{"table": str, "total_us": float, "rows": [dict]}``,
        each row with ``node``, ``name``, ``func_name``, ``time_us``, ``percent`` and
        ``shape``."""
        res = self.module["profile"](number, repeat, min_repeat_ms)
        rows = [{k: v for k, v in row.items()} for row in res["rows"]]
        return {"table": res["table"], "total_us": res["total_us"], "rows": rows}

    def debug(
        self, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0, file: IO[str] | None = None
    ) -> list[dict[str, Any]]:
        """Print the per-node profile table (to ``file``, default stdout); return its rows."""
        res = self.profile(number, repeat, min_repeat_ms)
        print(res["table"], end="", file=file)
        return res["rows"]

    def __getitem__(self, key: str) -> Function:
        """A function of the executor module by name."""
        return self.module[key]

    def benchmark(
        self,
        device: Device,
        func_name: str = "run",
        repeat: int = 5,
        number: int = 5,
        min_repeat_ms: float | None = None,
        limit_zero_time_iterations: int = 100,
        end_to_end: bool = False,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        **kwargs: Any,
    ) -> BenchmarkResult:
        """Time ``func_name`` (``run``) with the time evaluator; returns a
        :class:`kiln.BenchmarkResult` (seconds). Keyword arguments are set as inputs first;
        with ``end_to_end`` they are passed to every call (``run_from_inputs``), so copying
        them in and the outputs out is timed too."""
        min_repeat_ms = 0 if min_repeat_ms is None else min_repeat_ms
        args: tuple[Any, ...] = ()
        if end_to_end:
            func_name = "run_from_inputs"
            args = (device.device_type, device.device_id)
            for k, v in kwargs.items():
                args += (k, v)
        elif kwargs:
            self.set_input(**kwargs)
        evaluator = self.module.time_evaluator(
            func_name,
            device,
            repeat=repeat,
            number=number,
            min_repeat_ms=min_repeat_ms,
            limit_zero_time_iterations=limit_zero_time_iterations,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
        )
        return evaluator(*args)
