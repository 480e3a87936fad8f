"""Run inside a virtual environment where Kiln was installed with `pip install .`, from a folder
outside the source tree and with no KILN_* or PYTHONPATH variable: the package must load its own
library, compile the bundled model with kiln.InferenceSession and write its outputs for fresh
random inputs (compared with onnxruntime by scripts/pip_install_test.sh)."""

import os
import sys

import numpy as np

import kiln

model, out_dir = sys.argv[1], sys.argv[2]
site = os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))
assert kiln.LIB_PATH.startswith(site), f"kiln loaded {kiln.LIB_PATH}, not the installed library"
assert "KILN_LIBRARY_PATH" not in os.environ and "PYTHONPATH" not in os.environ
forced_ctypes = os.environ.get("KILN_PYTHON_CTYPES", "0") != "0"
assert (kiln.core.FASTCALL is None) == forced_ctypes, "the compiled call path was not installed"

sess = kiln.InferenceSession(model, cache_dir=os.path.join(out_dir, "cache"))
arg = sess.get_inputs()[0]
rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
x = rng.standard_normal(arg.shape).astype(np.float32)
(y,) = sess.run(None, {arg.name: x})
np.save(os.path.join(out_dir, "x.npy"), x)
np.save(os.path.join(out_dir, "y.npy"), y)
path = "ctypes" if forced_ctypes else "compiled"
print(f"installed kiln ({path} calls) ran {os.path.basename(model)}: {kiln.LIB_PATH}")
