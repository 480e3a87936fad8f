"""The public API of ``kiln`` is typed and documented.

Walks ``kiln.__all__`` and the public names of the public submodules and checks, with
:mod:`inspect`, every public function, method, static/class method and property defined in
Kiln. The rule:

- every public function, class, method and property has a docstring (inherited docstrings of
  overridden methods count);
- every parameter is annotated, except ``self`` / ``cls`` (the first parameter of a method,
  whose type is the class) and ``*args`` / ``**kwargs`` (variadic forwarding);
- every function and method has a return annotation (``-> None`` included); properties need
  one on their getter;
- "public" means: listed in the module's ``__all__``, or, for a module without one, not
  starting with ``_`` and defined in that module; defined in a ``kiln`` module (re-exported
  standard-library or numpy names are not Kiln's API); and, for members, defined in the
  class itself or in a private (``_``-prefixed) Kiln base class of it; members inherited from
  a public class are checked there, those of non-Kiln bases not at all. ``__init__`` and
  ``__call__`` are
  public too: their parameters and return must be annotated (their documentation is the
  class docstring);
- global functions of the runtime attached as module attributes (``kiln.Function`` objects,
  e.g. ``kiln.testing.echo``) are runtime values, not Python definitions, and are skipped.

When ``mypy`` is installed, ``mypy python/kiln`` (configured by ``[tool.mypy]`` in the root
``pyproject.toml``) must report no errors.
"""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import subprocess
import sys
from typing import Any, Iterator

import pytest

import kiln

PUBLIC_MODULES = [
    "kiln",
    "kiln.te",
    "kiln.tir",
    "kiln.tir.op",
    "kiln.tir.transform",
    "kiln.onnx",
    "kiln.graph",
    "kiln.graph_executor",
    "kiln.module",
    "kiln.tensor",
    "kiln.device",
    "kiln.dtype",
    "kiln.container",
    "kiln.function",
    "kiln.object",
    "kiln.registry",
    "kiln.error",
    "kiln.rpc",
    "kiln.testing",
    "kiln.runtime",
    "kiln.session",
    "kiln.driver",
    "kiln.structural",
]

#: dunder members checked like public methods (documented by their class's docstring)
CHECKED_DUNDERS = ("__init__", "__call__")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _is_kiln(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module == "kiln" or module.startswith("kiln.")


def _public_names(module: Any) -> list[str]:
    """``__all__``, else the names not starting with ``_`` that the module itself defines (or a
    submodule of it, for packages): names it imports from elsewhere are checked there."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    prefix = module.__name__
    out = []
    for name, obj in vars(module).items():
        home = getattr(obj, "__module__", None) or ""
        if not name.startswith("_") and (home == prefix or home.startswith(prefix + ".")):
            out.append(name)
    return out


def _api() -> Iterator[tuple[str, Any]]:
    """Yield ``(qualified name, object)`` for every public function and class, once each."""
    seen: set[int] = set()
    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        for name in _public_names(module):
            obj = getattr(module, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or not _is_kiln(obj):
                continue
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            yield "%s.%s" % (modname, name), obj


def _members(cls: type) -> Iterator[tuple[str, Any, bool]]:
    """Yield ``(name, function, is_method)`` for the checked members defined in ``cls`` or in
    a private Kiln base class of it (whose members are public through ``cls``)."""
    owners = [cls] + [b for b in cls.__mro__[1:] if b.__name__.startswith("_") and _is_kiln(b)]
    seen: set[str] = set()
    for owner in owners:
        for name, raw in vars(owner).items():
            if name not in seen:
                seen.add(name)
                yield from _member(name, raw)


def _member(name: str, raw: Any) -> Iterator[tuple[str, Any, bool]]:
    if name.startswith("_") and name not in CHECKED_DUNDERS:
        return
    if isinstance(raw, property):
        if raw.fget is not None and _is_kiln(raw.fget):
            yield name, raw.fget, True
    elif isinstance(raw, staticmethod):
        yield name, raw.__func__, False
    elif isinstance(raw, classmethod):
        yield name, raw.__func__, True
    elif inspect.isfunction(raw) and _is_kiln(raw):
        yield name, raw, True


def _problems(qualname: str, func: Any, is_method: bool, need_doc: bool) -> list[str]:
    out = []
    if need_doc and not inspect.getdoc(func):
        out.append("%s: no docstring" % qualname)
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    if is_method and params and params[0].name in ("self", "cls"):
        params = params[1:]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.annotation is p.empty:
            out.append("%s: parameter %r not annotated" % (qualname, p.name))
    if sig.return_annotation is sig.empty:
        out.append("%s: no return annotation" % qualname)
    return out


def test_public_api_is_typed_and_documented() -> None:
    problems = []
    count = 0
    for qualname, obj in _api():
        if inspect.isclass(obj):
            if not inspect.getdoc(obj):
                problems.append("%s: class without docstring" % qualname)
            for name, func, is_method in _members(obj):
                count += 1
                # inherited docstrings count: inspect.getdoc walks the MRO by name
                raw = inspect.getattr_static(obj, name)
                doc_owner = func if isinstance(raw, property) else getattr(obj, name, func)
                need_doc = name not in CHECKED_DUNDERS
                if need_doc and not inspect.getdoc(doc_owner):
                    problems.append("%s.%s: no docstring" % (qualname, name))
                problems += _problems("%s.%s" % (qualname, name), func, is_method, need_doc=False)
        else:
            count += 1
            problems += _problems(qualname, obj, is_method=False, need_doc=True)
    assert count > 200, "the walk found too few functions (%d): is the public module list right?" % count
    assert not problems, "%d problems:\n  %s" % (len(problems), "\n  ".join(problems))


def test_public_modules_have_docstrings() -> None:
    missing = [m for m in PUBLIC_MODULES if not inspect.getdoc(importlib.import_module(m))]
    assert not missing


def test_py_typed_marker_ships() -> None:
    assert os.path.isfile(os.path.join(os.path.dirname(kiln.__file__), "py.typed"))


def _mypy() -> list[str] | None:
    exe = shutil.which("mypy", path=os.path.dirname(sys.executable))
    if exe:
        return [exe]
    try:
        import mypy  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "mypy"]


def test_mypy_clean() -> None:
    cmd = _mypy()
    if cmd is None:
        pytest.skip("mypy is not installed (python/requirements-test.txt lists it)")
    if not os.path.isfile(os.path.join(REPO, "python", "kiln", "__init__.py")):
        pytest.skip("not run from a source tree")
    proc = subprocess.run(
        cmd + ["--config-file", os.path.join(REPO, "pyproject.toml"), os.path.join(REPO, "python", "kiln")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
