"""Modules: compiled artifacts loaded from shared libraries (``ffi.Module``).

:func:`load_module` loads a ``.so`` compiled by Kiln or Apache TVM (``.o`` and ``.tar`` files
are linked with the system C compiler first); :class:`Module` hands out its functions
(``mod["name"]``, ``mod.get_function(name)``, ``mod.name``), lists its imports, exports a
module tree into one shared library and times functions (:meth:`Module.time_evaluator`).
The names of the runtime's global functions follow TVM-FFI (``ffi.ModuleGetFunction``,
``ffi.ModuleLoadFromFile``, ...).
"""

from __future__ import annotations

import os
import statistics
import struct
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from . import core
from .object import Object, register_object

if TYPE_CHECKING:
    from .device import Device
    from .function import Function


def _call(name: str, *args: Any) -> Any:
    return core.call_global(name, *args)


@register_object("ffi.Module")
class Module(Object):
    """A runtime module: functions by name, imported modules, export and timing.

    Functions are looked up in the module itself; pass ``query_imports=True`` to
    :meth:`get_function` to search its imports too.  Attribute access (``mod.f``) and
    item access (``mod["f"]``) look in the module only, as in TVM.
    """

    __slots__ = ("__dict__",)

    @property
    def kind(self) -> str:
        """The module kind (``"library"`` for a loaded shared library)."""
        return _call("ffi.ModuleGetKind", self)

    @property
    def imports(self) -> list[Module]:
        """The imported modules, in import order."""
        return list(_call("runtime.ModuleGetImports", self))

    def get_function(self, name: str, query_imports: bool = False) -> Function:
        """Return the function ``name``; raise ``AttributeError`` when the module lacks it."""
        func = _call("ffi.ModuleGetFunction", self, name, bool(query_imports))
        if func is None:
            raise AttributeError("Module has no function '%s'" % name)
        return func

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        """True when the module (or, with ``query_imports``, an import) defines ``name``."""
        return _call("ffi.ModuleImplementsFunction", self, name, bool(query_imports))

    def __getitem__(self, name: str) -> Function:
        if not isinstance(name, str):
            raise ValueError("Can only take string as function name")
        return self.get_function(name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_handle", "_type_index"):
            raise AttributeError(name)
        try:
            func = self.get_function(name)
        except AttributeError as exc:
            raise AttributeError("Module has no function '%s'" % name) from exc
        self.__dict__[name] = func
        return func

    def __call__(self, *args: Any) -> Any:
        """Call the module's entry function (``main``)."""
        return self.get_function("main")(*args)

    def import_module(self, other: Module) -> None:
        """Add ``other`` to this module's imports (a cycle is refused)."""
        _call("ffi.ModuleImportModule", self, other)

    def clear_imports(self) -> None:
        """Remove every import."""
        _call("ffi.ModuleClearImports", self)

    def inspect_source(self, fmt: str = "") -> str:
        """Source code of the module in ``fmt``, when it has any (else ``""``)."""
        return _call("ffi.ModuleInspectSource", self, fmt)

    def get_write_formats(self) -> list[str]:
        """File formats :meth:`write_to_file` supports."""
        return list(_call("ffi.ModuleGetWriteFormats", self))

    def get_property_mask(self) -> int:
        """Bits: 1 binary serializable, 2 runnable, 4 compilation exportable."""
        return _call("ffi.ModuleGetPropertyMask", self)

    def is_binary_serializable(self) -> bool:
        """True when :meth:`save_to_bytes` works."""
        return bool(self.get_property_mask() & 1)

    def is_runnable(self) -> bool:
        """True when the module's functions can run."""
        return bool(self.get_property_mask() & 2)

    def is_compilation_exportable(self) -> bool:
        """True when the module writes an object or source file that exports link."""
        return bool(self.get_property_mask() & 4)

    def write_to_file(self, file_name: str | os.PathLike[str], fmt: str = "") -> None:
        """Write the module to ``file_name`` in format ``fmt``."""
        _call("ffi.ModuleWriteToFile", self, os.fspath(file_name), fmt)

    def save_to_bytes(self) -> bytes:
        """Serialize the module (binary serializable kinds only)."""
        return _call("runtime.ModuleSaveToBytes", self)

    def list_functions(self) -> list[str]:
        """Names of the functions a library module exports (empty for other kinds)."""
        return list(_call("runtime.ModuleListFunctions", self))

    @property
    def library_path(self) -> str | None:
        """The file a library module was loaded from (``None`` for other kinds)."""
        return _call("runtime.ModuleLibraryPath", self)

    def target_records(self) -> list[dict[str, Any]]:
        """What the code variants of every library in this module tree need of the CPU.

        A list of dicts, one per variant (read from the libraries' ``.kiln_target`` records):
        ``variant`` (``""`` for the default), ``triple``, ``cpu``, ``features`` (a list of LLVM
        feature names), ``target`` and ``chosen`` (``True`` for the variant that runs on this
        machine). Empty for libraries without records, such as Apache TVM's.
        """
        out = []
        for rec in _call("runtime.ModuleTargetRecords", self):
            d = dict(rec)
            d["features"] = [f for f in d["features"].split(",") if f]
            d["chosen"] = d["chosen"] == "1"
            out.append(d)
        return out

    def export_library(
        self, file_name: str | os.PathLike[str], options: str | Sequence[str] | None = None
    ) -> None:
        """Export this module and its imports into one shared library (or ``.tar``).

        ``options`` are extra arguments for the C compiler that links it.
        """
        opts = [options] if isinstance(options, str) else list(options or [])
        _call("runtime.ModuleExportLibrary", self, os.fspath(file_name), *opts)

    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        limit_zero_time_iterations: int = 100,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        cache_flush_bytes: int = 0,
        f_preproc: str = "",
    ) -> Callable[..., BenchmarkResult]:
        """Return ``evaluator(*args) -> BenchmarkResult`` timing ``func_name`` on ``dev``.

        As TVM's: one warm-up call, then ``repeat`` measurements of ``number`` calls each
        (``number`` grows until a measurement lasts ``min_repeat_ms``); each result is the
        mean time of one call in seconds.
        """
        # Remote modules time on the server (as TVM's RPC modules do).
        feval = _call(
            "rpc.ModuleTimeEvaluator" if self.kind == "rpc" else "runtime.RPCTimeEvaluator",
            self,
            func_name,
            dev.device_type,
            dev.device_id,
            number,
            repeat,
            min_repeat_ms,
            limit_zero_time_iterations,
            cooldown_interval_ms,
            repeats_to_cooldown,
            cache_flush_bytes,
            f_preproc,
        )

        def evaluator(*args: Any) -> BenchmarkResult:
            blob = feval(*args)
            return BenchmarkResult(struct.unpack("@" + "d" * repeat, blob))

        return evaluator

    def __repr__(self):
        try:
            return "<kiln.Module kind=%s at 0x%x>" % (self.kind, self._handle or 0)
        except Exception:  # noqa: BLE001 - repr must not fail
            return "<kiln.Module at 0x%x>" % (self._handle or 0)


class BenchmarkResult:
    """Times from :meth:`Module.time_evaluator`, in seconds (like TVM's).

    ``results`` holds one mean time per measurement; ``mean``, ``median``, ``min``,
    ``max`` and ``std`` summarize them.
    """

    def __init__(self, results: Iterable[float]) -> None:
        self.results = tuple(results)
        self.mean = statistics.fmean(self.results)
        self.median = statistics.median(self.results)
        self.min = min(self.results)
        self.max = max(self.results)
        self.std = statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    def __repr__(self):
        return "BenchmarkResult(min=%s, mean=%s, median=%s, max=%s, std=%s, results=%s)" % (
            self.min,
            self.mean,
            self.median,
            self.max,
            self.std,
            self.results,
        )

    def __str__(self):
        return "Execution time summary:\n%12s %12s %12s %12s %12s\n%12.4f %12.4f %12.4f %12.4f %12.4f\n" % (
            "mean (ms)",
            "median (ms)",
            "max (ms)",
            "min (ms)",
            "std (ms)",
            self.mean * 1e3,
            self.median * 1e3,
            self.max * 1e3,
            self.min * 1e3,
            self.std * 1e3,
        )


def load_module(path: str | os.PathLike[str]) -> Module:
    """Load a module from a file: ``.so`` (``.dylib``, ``.dll``) libraries compiled by Kiln
    or Apache TVM; ``.o`` and ``.tar`` files are linked into a shared library first; other
    suffixes use the loader registered as ``ffi.Module.load_from_file.<suffix>``.

    Raises ``ValueError`` for a missing, truncated or corrupt file (the runtime checks a
    library's headers before mapping it) and the runtime's error (naming the path) for a file
    that is not a loadable module.
    """
    path = os.fspath(path)
    return _call("ffi.ModuleLoadFromFile", path)


def load_from_bytes(kind: str, data: bytes | bytearray | memoryview) -> Module:
    """Restore a module of ``kind`` from bytes (``ffi.Module.load_from_bytes.<kind>``)."""
    return _call("runtime.ModuleLoadFromBytes", kind, bytes(data))


def time_evaluator(
    func: Callable[..., Any], dev: Device, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0
) -> Callable[..., BenchmarkResult]:
    """Like :meth:`Module.time_evaluator` for a :class:`kiln.Function` (or Python callable)."""
    feval = _call("runtime.FunctionTimeEvaluator", func, dev, number, repeat, min_repeat_ms)

    def evaluator(*args: Any) -> BenchmarkResult:
        return BenchmarkResult(struct.unpack("@" + "d" * repeat, feval(*args)))

    return evaluator


__all__ = ["BenchmarkResult", "Module", "load_from_bytes", "load_module", "time_evaluator"]
