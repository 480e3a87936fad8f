#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment, then, outside the source tree and with no
# KILN_* or PYTHONPATH variable, the installed package runs the bundled model with
# kiln.InferenceSession; its outputs are compared with onnxruntime's (from the project's .venv).
# The `kiln` command must be on the new environment's PATH; the run is made twice, with the
# compiled call path (kiln._fastcall, built by the install) and with the ctypes path forced.
#
#   KILN_INSTALL_PROFILE   cargo profile of the native parts (release, the default for users;
#                          the test suite passes dev to reuse its debug build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PY="${KILN_INSTALL_PYTHON:-python3}"

"$PY" -m venv "$WORK/venv"
echo "pip_install_test: pip install $ROOT (profile ${KILN_INSTALL_PROFILE:-release})"
env -u KILN_LIBRARY_PATH -u PYTHONPATH SETUPTOOLS_RUST_CARGO_PROFILE="${KILN_INSTALL_PROFILE:-release}" \
  "$WORK/venv/bin/pip" install -q --disable-pip-version-check "$ROOT"
"$WORK/venv/bin/kiln" --help > /dev/null
check() { # extra env assignments...
  rm -rf "$WORK/run" && mkdir -p "$WORK/run"
  (cd "$WORK/run" && env -u KILN_LIBRARY_PATH -u PYTHONPATH "$@" "$WORK/venv/bin/python" \
    "$ROOT/tests/install/check_installed.py" "$ROOT/examples/model/model.onnx" "$WORK/run")
  "$ROOT/.venv/bin/python" - "$ROOT/examples/model/model.onnx" "$WORK/run" <<'PYEOF'
import sys, numpy as np, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
x = np.load(f"{out}/x.npy")
want = s.run(None, {s.get_inputs()[0].name: x})[0]
got = np.load(f"{out}/y.npy")
np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
print("pip_install_test: the installed package matches onnxruntime")
PYEOF
}
check KILN_PYTHON_CTYPES=0
check KILN_PYTHON_CTYPES=1
