#!/usr/bin/env bash
# Kiln runs what Apache TVM 0.27 compiles (issue 3's acceptance): builds test libraries with TVM
# in a child process (tests/tvm/build_libs.py), then loads and runs them with Kiln only
# (tests/tvm/test_tvm_interop.py), and optionally measures Kiln beside TVM (tests/tvm/measure.py).
#
#   bash scripts/tvm_interop_tests.sh [pytest args...]
#
# Environment:
#   KILN_PROFILE        cargo profile whose libkiln.so is tested (debug); set KILN_LIBRARY_PATH to
#                       test another library
#   KILN_SKIP_BUILD=1   do not run cargo build first
#   KILN_TVM_MEASURE=1  also print load and call times of one library, Kiln beside TVM
# Needs .venv with python/requirements-test.txt (apache-tvm included): scripts/setup.sh makes it.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PROFILE="${KILN_PROFILE:-debug}"

bash scripts/setup.sh || { echo "tvm_interop_tests: set-up failed"; exit 1; }
if [[ "${KILN_SKIP_BUILD:-0}" != 1 ]]; then
  flag=()
  [[ "$PROFILE" == release ]] && flag=(--release)
  cargo build -q -p kiln "${flag[@]}" || { echo "tvm_interop_tests: cargo build failed"; exit 1; }
  # The `kiln` command: tests/tvm/test_rpc_tvm.py starts `kiln rpc server` from it.
  cargo build -q -p kiln-cli "${flag[@]}" || { echo "tvm_interop_tests: cargo build failed"; exit 1; }
fi
export KILN_LIBRARY_PATH="${KILN_LIBRARY_PATH:-$ROOT/target/$PROFILE/libkiln.so}"
# The package is used from the source tree (no install needed).
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
.venv/bin/python -c "import tvm" 2>/dev/null ||
  { echo "tvm_interop_tests: apache-tvm is not installed in .venv"; exit 1; }

.venv/bin/python -m pytest -q -p no:cacheprovider tests/tvm "$@"
status=$?

if [[ "${KILN_TVM_MEASURE:-0}" == 1 && $status -eq 0 ]]; then
  out="$(mktemp -d)"
  .venv/bin/python tests/tvm/build_libs.py "$out" >/dev/null
  for runtime in tvm kiln; do
    .venv/bin/python tests/tvm/measure.py "$runtime" "$out/vadd.so" 1024
  done
  rm -rf "$out"
fi
exit $status
