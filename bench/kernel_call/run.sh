#!/usr/bin/env bash
# Calling a small compiled kernel, Kiln beside Apache TVM 0.27 in the same run: TVM builds
# vadd.so (tests/tvm/build_libs.py, into a temp dir); then its per-call time at n = 1 and 1024
# (float32) from C (bench/kernel_call/kernel_call.c, built against libkiln_runtime.so and against
# TVM's libtvm_runtime.so + libtvm_ffi.so), from Rust (Kiln only: the kernel_call bench of
# kiln-runtime) and from Python (tests/tvm/measure.py: Kiln's ctypes package vs TVM's Cython),
# plus the time to load the library (C and Python). One thread; warm-up; medians of >= 7 runs.
#
# Usage: bash bench/kernel_call/run.sh [N [RUNS]]    (C calls per run and runs; 1000000 9)
# Environment: CC (cc), KILN_KERNEL_CALL_KEEP=1 keeps the temp dir (libraries, raw records).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export TVM_NUM_THREADS=1 KILN_NUM_THREADS=1
PY="$ROOT/.venv/bin/python"
CC="${CC:-cc}"

die() { echo "kernel_call: $*" >&2; exit 1; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

bash scripts/setup.sh >/dev/null
"$PY" -c "import tvm" 2>/dev/null || die "apache-tvm is not installed in .venv (scripts/setup.sh)"
cargo build -q --release -p kiln-runtime -p kiln

OUT="$(mktemp -d /tmp/kernel_call.XXXXXX)"
if [[ "${KILN_KERNEL_CALL_KEEP:-0}" == 1 ]]; then
  echo "kept: $OUT"
else
  trap 'rm -rf "$OUT"' EXIT
fi
"$PY" tests/tvm/build_libs.py "$OUT/libs" >/dev/null
LIB="$OUT/libs/vadd.so"

# The C program, once per runtime; both use Kiln's header (layout-identical to TVM-FFI's).
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
KILN_DIR="$ROOT/target/release"
TVM_DIR="$SITE/tvm/lib"
FFI_DIR="$SITE/tvm_ffi/lib"
[[ -f "$TVM_DIR/libtvm_runtime.so" && -f "$FFI_DIR/libtvm_ffi.so" ]] ||
  die "libtvm_runtime.so / libtvm_ffi.so not found under $SITE"
CFLAGS=(-std=c11 -O2 -Wall -Wextra -I"$ROOT/include")
"$CC" "${CFLAGS[@]}" bench/kernel_call/kernel_call.c -o "$OUT/kernel_call_kiln" \
  -L"$KILN_DIR" -Wl,--no-as-needed -lkiln_runtime -Wl,--as-needed -Wl,-rpath,"$KILN_DIR"
"$CC" "${CFLAGS[@]}" bench/kernel_call/kernel_call.c -o "$OUT/kernel_call_tvm" \
  -L"$TVM_DIR" -L"$FFI_DIR" -Wl,--no-as-needed -ltvm_runtime -ltvm_ffi -Wl,--as-needed \
  -Wl,-rpath,"$TVM_DIR:$FFI_DIR"

# The Rust bench, linked with -rdynamic so that vadd.so finds Kiln's C functions (only the
# bench binary gets the flag; dependencies stay as `cargo build --release` left them).
RUST_BIN="$(cargo rustc -q --profile bench -p kiln-runtime --bench kernel_call \
  --message-format=json -- -C link-arg=-rdynamic |
  "$PY" -c 'import json, sys
print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])')"

echo "library: $LIB (TVM $("$PY" -c 'import tvm; print(tvm.__version__)'))"
echo "kiln: $KILN_DIR/libkiln_runtime.so (C), libkiln.so (Python)"
echo "tvm:  $TVM_DIR/libtvm_runtime.so + $FFI_DIR/libtvm_ffi.so (C), import tvm (Python)"
echo "load average before: $(load)"
R="$OUT/records.txt"
KILN_KERNEL_CALL_LIB="$LIB" "$RUST_BIN" | sed 's/^rust /rust kiln /' >>"$R"
"$OUT/kernel_call_kiln" "$LIB" "$@" | sed 's/^c /c kiln /' >>"$R"
"$OUT/kernel_call_tvm" "$LIB" "$@" | sed 's/^c /c tvm /' >>"$R"
KILN_LIBRARY_PATH="$KILN_DIR/libkiln.so" \
  "$PY" bench/kernel_call/python_calls.py "$LIB" 1 1024 >>"$R"
echo "load average after:  $(load)"

# table: one row per (caller, case), Kiln beside TVM and their ratio (below 1: Kiln is faster)
awk '{ v[$1 " " $2 " " $3] = $4 }
function row(what, n, unit, caller, c,   k, t, r) {
  k = v[caller " kiln " c]; t = v[caller " tvm " c]
  r = (k != "" && t > 0) ? sprintf("%.2f", k / t) : "-"
  printf "%-40s %5s %-3s %10s %10s %9s\n", what, n, unit, k == "" ? "-" : k, t == "" ? "-" : t, r
}
END {
  printf "%-40s %5s %-3s %10s %10s %9s\n", "vadd per call / library load", "n", "", "Kiln", "TVM",
    "Kiln/TVM"
  for (i = 1; i <= 2; i++) {
    n = i == 1 ? 1 : 1024
    row("C, TVMFFIFunctionCall(DLTensor*)", n, "ns", "c", "vadd_" n)
    row("Rust, Function::call(Kiln tensors)", n, "ns", "rust", "tensor_" n)
    row("Rust, Function::call(DLTensor*)", n, "ns", "rust", "dltensor_" n)
    row("Python (Kiln ctypes, TVM Cython)", n, "ns", "python", "vadd_" n)
    row("time_evaluator (runtime native loop)", n, "ns", "python", "evaluator_" n)
  }
  row("load, C, first in process", "", "us", "c", "load_first_us")
  row("load, C, fresh copy (median of 21)", "", "us", "c", "load_us")
  row("load, Python, first in process", "", "us", "python", "load_first_us")
  row("load, Python, fresh copy (median of 20)", "", "us", "python", "load_us")
}' "$R"
