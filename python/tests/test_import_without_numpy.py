"""The package imports without numpy (an optional dependency): every module loads, the FFI
calls work, and only what converts to or from arrays asks for numpy, by name."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parent.parent

# numpy made unimportable: `import numpy` raises ImportError in the child process.
SCRIPT = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    sys.modules["numpy"] = None
    import kiln
    for info in pkgutil.walk_packages(kiln.__path__, "kiln."):
        importlib.import_module(info.name)
    assert "numpy" not in sys.modules or sys.modules["numpy"] is None
    f = kiln.get_global_func("testing.echo")
    assert f(41) == 41, f(41)
    t = kiln.empty((2, 3), "float32")
    assert tuple(t.shape) == (2, 3)
    try:
        t.numpy()
    except ImportError as exc:
        assert "numpy" in str(exc), exc
    else:
        raise AssertionError("Tensor.numpy() without numpy did not raise")
    print("imported", len(sys.modules))
    """
)


def test_import_without_numpy():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "imported" in run.stdout
