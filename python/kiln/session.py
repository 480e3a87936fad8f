"""An onnxruntime-style session: ``kiln.InferenceSession(path).run(None, feeds)``.

The session compiles the model with Kiln on first use (for the shapes it is given), keeps the
compiled library in an on-disk cache keyed by the model's content, the target, the input shapes
and the Kiln library, and runs it with graph executors. A second process that opens the same
model loads the cached library instead of compiling it again.

Inputs whose declared shape has symbolic dimensions (``batch``, ``?``) are compiled for the
shapes of the first feed that uses them, once per distinct shape (each one cached); give
``input_shapes`` to compile them up front. ``run`` may be called from several threads at once:
each call takes an executor of its own from a pool.

The cache folder is ``cache_dir`` if given, else ``$KILN_CACHE_DIR``, else
``$XDG_CACHE_HOME/kiln`` (``~/.cache/kiln``). Entries are whole shared libraries, written under
a temporary name and renamed into place, so concurrent processes never see half a file.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import tempfile
import threading
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib, core
from . import onnx as _onnx
from .device import cpu
from .graph_executor import GraphModule
from .module import load_module
from .tensor import _numpy, numpy_dtype

#: The one execution provider a Kiln session has: Kiln's code for the host CPU.
PROVIDERS = ("CPUExecutionProvider",)

# ONNX's tensor type names (what onnxruntime's NodeArg.type says) by Kiln dtype.
_ONNX_TYPE_NAMES = {
    "float32": "float",
    "float64": "double",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "bool": "bool",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
}

Dim = Union[int, str]
ShapeKey = Tuple[Tuple[str, Tuple[int, ...]], ...]


class NodeArg:
    """A model input or output as onnxruntime describes it: ``name``, ``shape`` (ints for
    known sizes, the ``dim_param`` name or ``"?"`` for symbolic ones, ``None`` when the rank is
    not declared) and ``type`` (``"tensor(float)"``); ``dtype`` is Kiln's name."""

    def __init__(self, name: str, shape: Optional[List[Dim]], dtype: str) -> None:
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.type = f"tensor({_ONNX_TYPE_NAMES.get(dtype, dtype)})"

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class SessionOptions:
    """Options of an :class:`InferenceSession`.

    onnxruntime's ``intra_op_num_threads`` (0: Kiln's default; otherwise the process-wide
    thread count, as ``runtime.SetNumThreads``) and ``graph_optimization_level`` (accepted and
    ignored: Kiln always optimizes), and Kiln's own: ``target`` (the ``llvm`` target string,
    or a list of them for one library with code for several CPUs), ``cache_dir`` (``None``:
    the default folder; ``""``: no cache), ``input_shapes`` (``{name: shape}`` for inputs with
    symbolic dimensions, compiled up front) and ``show_progress`` (``None``: when stderr is a
    terminal).
    """

    def __init__(self) -> None:
        self.intra_op_num_threads: int = 0
        self.graph_optimization_level: Any = None
        self.target: Union[str, Sequence[str]] = "llvm -mcpu=native"
        self.cache_dir: Optional[str] = None
        self.input_shapes: Optional[Mapping[str, Sequence[int]]] = None
        self.show_progress: Optional[bool] = None


def default_cache_dir() -> str:
    """The folder where sessions keep compiled libraries when none is given."""
    env = os.environ.get("KILN_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kiln")


def _host_cpu() -> str:
    """What code compiled for ``-mcpu=native`` depends on: the CPU's name and features."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor() or platform.machine()


def _library_identity() -> str:
    """The Kiln library that compiles: its version, ABI version and file (size, mtime), so
    that a rebuilt library does not reuse libraries compiled by the old one."""
    from . import __version__

    st = os.stat(_lib.LIB_PATH)
    return f"{__version__} {_lib.ffi_version()} {_lib.LIB_PATH} {st.st_size} {st.st_mtime_ns}"


class _Progress:
    """A one-line compile status on stderr (stage and elapsed seconds), redrawn by a thread
    while the compiler (which releases the GIL) works."""

    def __init__(self, enabled: bool, what: str) -> None:
        self.enabled = enabled
        self.what = what
        self.stage = "starting"
        self.start = time.monotonic()
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "_Progress":
        if self.enabled:
            self._thread = threading.Thread(target=self._draw_loop, daemon=True)
            self._thread.start()
        return self

    def _line(self) -> str:
        return f"kiln: {self.what}: {self.stage} [{time.monotonic() - self.start:.1f} s]"

    def _draw_loop(self) -> None:
        while not self._done.wait(0.25):
            sys.stderr.write("\r" + self._line() + "\x1b[K")
            sys.stderr.flush()

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self.stage = "failed" if exc[0] else "done"
            sys.stderr.write("\r" + self._line() + "\x1b[K\n")
            sys.stderr.flush()


class _Compiled:
    """One compiled library for one set of input shapes, with a pool of executors."""

    def __init__(self, lib: Any, lib_path: Optional[str], input_names: Sequence[str]) -> None:
        self.lib = lib
        self.lib_path = lib_path
        self._free: List[Tuple[GraphModule, Optional[List[Any]]]] = []
        self._lock = threading.Lock()
        gm, outputs = self.acquire()
        #: the model inputs the executor has (an input no output depends on may be gone)
        self.used_inputs = {name for name in input_names if gm.get_input_index(name) >= 0}
        self.release((gm, outputs))

    def acquire(self) -> Tuple[GraphModule, Optional[List[Any]]]:
        """An idle executor with numpy views of its output tensors (made when none is idle);
        no views (``None``) for the virtual machine, whose runs make their outputs."""
        with self._lock:
            if self._free:
                return self._free.pop()
        gm = GraphModule(self.lib["default"](cpu()))
        if gm.module.kind != "GraphExecutor":
            return gm, None
        np = _numpy()
        outputs = [np.from_dlpack(gm.get_output(i)) for i in range(gm.get_num_outputs())]
        return gm, outputs

    def release(self, item: Tuple[GraphModule, Optional[List[Any]]]) -> None:
        """Give an executor back to the pool."""
        with self._lock:
            self._free.append(item)


class InferenceSession:
    """Runs an ONNX model compiled by Kiln, with onnxruntime's ``InferenceSession`` interface.

    ``path_or_bytes`` is a path to a ``.onnx`` file, its bytes, or an ``onnx.ModelProto``.
    ``providers`` may name only ``"CPUExecutionProvider"`` (Kiln compiles for the host CPU).
    Keyword arguments ``target``, ``cache_dir``, ``input_shapes`` and ``show_progress``
    override those of ``sess_options`` (see :class:`SessionOptions`).
    """

    def __init__(
        self,
        path_or_bytes: Any,
        sess_options: Optional[SessionOptions] = None,
        providers: Optional[Iterable[Any]] = None,
        provider_options: Any = None,
        **kwargs: Any,
    ) -> None:
        opts = sess_options if sess_options is not None else SessionOptions()
        unknown = set(kwargs) - {"target", "cache_dir", "input_shapes", "show_progress"}
        if unknown:
            raise TypeError(f"InferenceSession: unknown keyword argument(s) {sorted(unknown)}")
        self._providers = self._check_providers(providers)
        self._target = kwargs.get("target", getattr(opts, "target", "llvm -mcpu=native"))
        cache_dir = kwargs.get("cache_dir", getattr(opts, "cache_dir", None))
        self._cache_dir = default_cache_dir() if cache_dir is None else cache_dir
        progress = kwargs.get("show_progress", getattr(opts, "show_progress", None))
        self._show_progress = sys.stderr.isatty() if progress is None else bool(progress)
        threads = int(getattr(opts, "intra_op_num_threads", 0) or 0)
        if threads < 0:
            raise ValueError(f"intra_op_num_threads must be >= 0, got {threads}")
        if threads:
            core.call_global("runtime.SetNumThreads", threads)

        self._name = (
            os.path.basename(os.fspath(path_or_bytes))
            if isinstance(path_or_bytes, (str, os.PathLike))
            else "<model bytes>"
        )
        self._model = _onnx._model_bytes(path_or_bytes)
        self._model_hash = hashlib.sha256(self._model).hexdigest()
        info = core.call_global("onnx.ModelInfo", self._model)
        self._inputs = [self._node_arg(v) for v in info["inputs"]]
        self._outputs = [self._node_arg(v) for v in info["outputs"]]
        self._input_by_name = {a.name: a for a in self._inputs}
        self._output_index = {o.name: i for i, o in enumerate(self._outputs)}
        self._all_outputs = list(range(len(self._outputs)))
        self._np_dtypes: Optional[List[Any]] = None
        self._compiled: Dict[ShapeKey, _Compiled] = {}
        self._compile_lock = threading.Lock()
        self._target_key = self._target if isinstance(self._target, str) else list(self._target)
        self._identity = _library_identity() + "\n" + _host_cpu()

        pinned = kwargs.get("input_shapes", getattr(opts, "input_shapes", None)) or {}
        for name in pinned:
            if name not in self._input_by_name:
                raise ValueError(
                    f"input_shapes names {name!r}, which is not an input of the model "
                    f"(inputs: {[a.name for a in self._inputs]})"
                )
        shapes: Dict[str, Tuple[int, ...]] = {}
        for arg in self._inputs:
            if arg.name in pinned:
                shapes[arg.name] = self._check_shape(arg, tuple(int(d) for d in pinned[arg.name]))
            elif arg.shape is not None and all(isinstance(d, int) for d in arg.shape):
                shapes[arg.name] = tuple(int(d) for d in arg.shape)
        # Compile now when every input's shape is known; otherwise on the first run.
        if len(shapes) == len(self._inputs):
            self._get_compiled(self._key(shapes))

    @staticmethod
    def _check_providers(providers: Optional[Iterable[Any]]) -> List[str]:
        if providers is None:
            return list(PROVIDERS)
        names = [p[0] if isinstance(p, (tuple, list)) else p for p in providers]
        bad = [p for p in names if p not in PROVIDERS]
        if bad:
            raise ValueError(
                f"Kiln has no execution provider {bad}; available: {list(PROVIDERS)}"
            )
        return names or list(PROVIDERS)

    @staticmethod
    def _node_arg(v: Any) -> NodeArg:
        shape = v["shape"]
        dims = None if shape is None else [d if isinstance(d, str) else int(d) for d in shape]
        return NodeArg(str(v["name"]), dims, str(v["dtype"]))

    # -- the onnxruntime interface -------------------------------------------------------

    def get_inputs(self) -> List[NodeArg]:
        """The model's inputs (initializers left out), in declaration order."""
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        """The model's outputs, in declaration order."""
        return list(self._outputs)

    def get_providers(self) -> List[str]:
        """The execution providers in use: ``["CPUExecutionProvider"]``."""
        return list(self._providers)

    def get_cached_libraries(self) -> List[str]:
        """The paths of the compiled libraries this session loaded or wrote (one per distinct
        set of input shapes), for inspection with ``kiln inspect``."""
        return [c.lib_path for c in self._compiled.values() if c.lib_path]

    def run(
        self,
        output_names: Optional[Sequence[str]],
        input_feed: Mapping[str, Any],
        run_options: Any = None,
    ) -> List[Any]:
        """Run the model on ``input_feed`` (``{input name: array}``) and return the outputs
        named by ``output_names`` (all outputs when ``None``) as numpy arrays, in that order.

        Every input must be fed, with the dtype the model declares (no silent conversion)
        and a shape that agrees with the declared one; errors name the input, the expected
        and the given shape or dtype.
        """
        np = _numpy()
        if not isinstance(input_feed, Mapping):
            raise TypeError(f"input_feed must be a dict of input name to array, got "
                            f"{type(input_feed).__name__}")
        if len(input_feed) != len(self._inputs) or any(
            a.name not in input_feed for a in self._inputs
        ):
            unknown = [k for k in input_feed if k not in self._input_by_name]
            if unknown:
                raise ValueError(
                    f"input_feed names {unknown}, which are not inputs of the model "
                    f"(inputs: {[a.name for a in self._inputs]})"
                )
            missing = [a.name for a in self._inputs if a.name not in input_feed]
            raise ValueError(f"missing input(s) {missing}: every model input must be fed")
        if output_names is None:
            picks = self._all_outputs
        else:
            index = self._output_index
            bad = [n for n in output_names if n not in index]
            if bad:
                raise ValueError(f"{bad} are not outputs of the model (outputs: {list(index)})")
            picks = [index[n] for n in output_names]

        if self._np_dtypes is None:
            self._np_dtypes = [np.dtype(numpy_dtype(a.dtype)[0]) for a in self._inputs]
        arrays = []
        for arg, want in zip(self._inputs, self._np_dtypes):
            value = input_feed[arg.name]
            if not hasattr(value, "dtype"):
                value = np.asarray(value, dtype=want)
            if value.dtype != want:
                raise TypeError(
                    f"input {arg.name!r}: expected dtype {arg.dtype} ({arg.type}), got "
                    f"{np.dtype(value.dtype).name}"
                )
            arrays.append(value)
        key = tuple((a.name, v.shape) for a, v in zip(self._inputs, arrays))
        compiled = self._compiled.get(key)
        if compiled is None:  # a new shape: checked against the declared one, then compiled
            for a, v in zip(self._inputs, arrays):
                self._check_shape(a, tuple(v.shape))
            compiled = self._get_compiled(key)
        gm, outputs = compiled.acquire()
        try:
            used = compiled.used_inputs
            for arg, value in zip(self._inputs, arrays):
                if arg.name in used:
                    gm.set_input(arg.name, value)
            gm.run()
            if outputs is None:
                return [gm.get_output(i).numpy() for i in picks]
            return [outputs[i].copy() for i in picks]
        finally:
            compiled.release((gm, outputs))

    # -- compilation and the cache -------------------------------------------------------

    def _check_shape(self, arg: NodeArg, shape: Tuple[int, ...]) -> Tuple[int, ...]:
        if arg.shape is None:
            return shape
        ok = len(shape) == len(arg.shape) and all(
            not isinstance(d, int) or d == s for d, s in zip(arg.shape, shape)
        )
        if not ok:
            raise ValueError(
                f"input {arg.name!r}: expected shape {arg.shape} (names stand for any size), "
                f"got {list(shape)}"
            )
        return shape

    def _key(self, shapes: Mapping[str, Tuple[int, ...]]) -> ShapeKey:
        return tuple((a.name, tuple(int(d) for d in shapes[a.name])) for a in self._inputs)

    def _cache_path(self, key: ShapeKey) -> Optional[str]:
        if not self._cache_dir:
            return None
        h = hashlib.sha256()
        for part in (self._model_hash, repr(self._target_key), repr(key), self._identity):
            h.update(part.encode())
            h.update(b"\0")
        return os.path.join(self._cache_dir, h.hexdigest()[:40] + ".so")

    def _get_compiled(self, key: ShapeKey) -> _Compiled:
        compiled = self._compiled.get(key)
        if compiled is not None:
            return compiled
        with self._compile_lock:
            compiled = self._compiled.get(key)
            if compiled is None:
                compiled = self._load_or_compile(key)
                self._compiled[key] = compiled
        return compiled

    def _load_or_compile(self, key: ShapeKey) -> _Compiled:
        path = self._cache_path(key)
        names = [a.name for a in self._inputs]
        if path is not None and os.path.exists(path):
            try:
                return _Compiled(load_module(path), path, names)
            except Exception as exc:  # a damaged or foreign entry: compile it again
                sys.stderr.write(f"kiln: ignoring the cached library {path}: {exc}\n")
        shapes = {name: list(shape) for name, shape in key}
        desc = ", ".join(f"{n}{list(s)}" for n, s in key)
        with _Progress(self._show_progress, f"compiling {self._name} ({desc})") as progress:
            progress.stage = "compiling"
            # The graph executor for a static model, the virtual machine for run-time
            # control flow (an If on an input) or data-dependent outputs.
            lib = _onnx.compile(self._model, shapes, self._target)
            if path is not None:
                progress.stage = "writing " + path
                self._write_cache(lib, path)
        if path is None:
            return _Compiled(lib, None, names)
        # Run what the next process will load, not the in-memory module.
        return _Compiled(load_module(path), path, names)

    @staticmethod
    def _write_cache(lib: Any, path: str) -> None:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".partial-", suffix=".so", dir=folder)
        os.close(fd)
        try:
            lib.export_library(tmp)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
