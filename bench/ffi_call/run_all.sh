#!/usr/bin/env bash
# FFI call overhead, Kiln beside Apache TVM-FFI in the same run: Rust (typed and through the C
# entry), C (TVMFFIFunctionCall against each library) and Python (Kiln's ctypes package, and
# tvm_ffi's Cython package). One thread; warm-up; medians of 7 runs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh >/dev/null
cargo build -q --release --workspace
echo "== Rust (ns per call)"
cargo bench -q -p kiln-ffi --bench ffi_call
echo "== C (ns per call)"
bash bench/ffi_call/run_c.sh
echo "== Python (ns per call)"
KILN_LIBRARY_PATH="$ROOT/target/release" .venv/bin/python bench/ffi_call/python_calls.py
