#!/usr/bin/env bash
# Kiln's whole test suite: set-up, Rust (fmt, clippy, unit and integration tests, the leak test),
# the deploy runtime (builds without the compiler, depends on no compiler crate, stays within its
# size budget), the C ABI tests, the Python tests. Exits non-zero on any failure.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh || { echo "test: set-up failed"; exit 1; }

failed=()
step() { # name cmd...
  local name="$1"; shift
  echo
  echo "=== $name"
  if ! "$@"; then
    failed+=("$name")
  fi
}

step "cargo fmt" cargo fmt --all -- --check
step "cargo clippy" cargo clippy --workspace --all-targets -q -- -D warnings
step "cargo build" cargo build --workspace -q
step "deploy runtime alone (--no-default-features)" cargo clippy -q -p kiln-runtime --no-default-features --all-targets -- -D warnings
step "deploy runtime tests (--no-default-features)" cargo test -q -p kiln-runtime --no-default-features
step "deploy runtime dependencies" bash scripts/runtime_deps.sh
# std rebuilt by the toolchain itself without its backtrace symbolizer (runtime_size.sh says how);
# scripts/setup.sh installs the rust-src it needs.
step "deploy runtime size" env KILN_DEPLOY_BUILD_STD=1 bash scripts/runtime_size.sh --check
step "cargo test" cargo test --workspace -q
step "leak test (count-objects)" cargo test -q -p kiln-ffi --features count-objects --test leaks
step "C ABI tests" bash scripts/c_tests.sh
step "Python tests" env KILN_LIBRARY_PATH="$ROOT/target/debug" PYTHONPATH="$ROOT/python" .venv/bin/python -m pytest -q python/tests
step "Python tests, ctypes path forced" env KILN_PYTHON_CTYPES=1 KILN_LIBRARY_PATH="$ROOT/target/debug" \
  PYTHONPATH="$ROOT/python" .venv/bin/python -m pytest -q python/tests/test_function.py \
  python/tests/test_object.py python/tests/test_container.py python/tests/test_error.py \
  python/tests/test_refcount.py python/tests/test_tensor.py python/tests/test_graph_executor.py \
  python/tests/test_session.py
step "ONNX backend test sample" env KILN_LIBRARY_PATH="$ROOT/target/debug" .venv/bin/python \
  tests/onnx_node/run.py --expect-pass tests/onnx_node/ci_cases.txt --jobs 2 \
  --out "$ROOT/build/onnx_node/ci"
step "pip install . (fresh venv)" env KILN_INSTALL_PROFILE=dev bash scripts/pip_install_test.sh
step "TVM interop tests" env KILN_SKIP_BUILD=1 bash scripts/tvm_interop_tests.sh

echo
if ((${#failed[@]})); then
  echo "test: FAILED steps: ${failed[*]}"
  exit 1
fi
echo "test: all steps passed"
