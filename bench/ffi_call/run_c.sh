#!/usr/bin/env bash
# C-side call overhead: Kiln's runtime vs Apache TVM-FFI's.
#
# Builds bench/ffi_call/call_overhead.c twice -- linked with
# target/${KILN_PROFILE:-release}/libkiln_runtime.so and with the apache-tvm-ffi
# wheel's libtvm_ffi.so + libtvm_ffi_testing.so -- runs both and prints the
# per-call times and the ratio kiln / tvm-ffi (below 1 means Kiln is faster).
#
# Usage: bench/ffi_call/run_c.sh [N [RUNS]]     (passed to call_overhead)
# Environment: KILN_PROFILE (release), KILN_LIB_DIR, TVM_FFI_LIB_DIR (the
# wheel's lib directory; default: found in .venv), CC (cc).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROFILE="${KILN_PROFILE:-release}"
CC="${CC:-cc}"
BUILD="$ROOT/build/bench_ffi_call"
SRC="$ROOT/bench/ffi_call/call_overhead.c"
mkdir -p "$BUILD"

die() { echo "run_c: $*" >&2; exit 1; }

KILN_DIR="${KILN_LIB_DIR:-$ROOT/target/$PROFILE}"
[[ -f "$KILN_DIR/libkiln_runtime.so" ]] ||
  die "$KILN_DIR/libkiln_runtime.so not found (cargo build --release, or set KILN_PROFILE=debug)"
KILN_DIR="$(cd "$KILN_DIR" && pwd)"

TVM_DIR="${TVM_FFI_LIB_DIR:-}"
if [[ -z "$TVM_DIR" ]]; then
  for d in "$ROOT"/.venv/lib/python3*/site-packages/tvm_ffi/lib; do
    [[ -f "$d/libtvm_ffi.so" ]] && TVM_DIR="$d" && break
  done
fi
[[ -n "$TVM_DIR" && -f "$TVM_DIR/libtvm_ffi.so" && -f "$TVM_DIR/libtvm_ffi_testing.so" ]] ||
  die "cannot find libtvm_ffi.so + libtvm_ffi_testing.so (install apache-tvm-ffi into .venv or set TVM_FFI_LIB_DIR)"

CFLAGS=(-std=c11 -O2 -Wall -Wextra -I"$ROOT/include")
"$CC" "${CFLAGS[@]}" "$SRC" -o "$BUILD/call_overhead_kiln" \
  -L"$KILN_DIR" -Wl,--no-as-needed -lkiln_runtime -Wl,--as-needed -Wl,-rpath,"$KILN_DIR"
"$CC" "${CFLAGS[@]}" "$SRC" -o "$BUILD/call_overhead_tvm_ffi" \
  -L"$TVM_DIR" -Wl,--no-as-needed -ltvm_ffi -ltvm_ffi_testing -Wl,--as-needed -Wl,-rpath,"$TVM_DIR"

echo "kiln:    $KILN_DIR/libkiln_runtime.so ($PROFILE)"
echo "tvm-ffi: $TVM_DIR/libtvm_ffi.so"
kiln_out="$("$BUILD/call_overhead_kiln" "$@")"
tvm_out="$("$BUILD/call_overhead_tvm_ffi" "$@")"
sed 's/^c /kiln c /' <<<"$kiln_out"
sed 's/^c /tvm-ffi c /' <<<"$tvm_out"

# table: case, kiln ns, tvm-ffi ns, ratio
awk -v K="$kiln_out" -v T="$tvm_out" 'BEGIN {
  nk = split(K, kl, "\n"); nt = split(T, tl, "\n");
  for (i = 1; i <= nt; i++) { split(tl[i], f, " "); tvm[f[2]] = f[3] }
  printf "%-10s %12s %12s %14s\n", "case", "kiln ns", "tvm-ffi ns", "kiln/tvm-ffi";
  for (i = 1; i <= nk; i++) {
    split(kl[i], f, " ");
    if (f[2] == "") continue;
    r = (tvm[f[2]] > 0) ? sprintf("%.2f", f[3] / tvm[f[2]]) : "n/a";
    printf "%-10s %12.2f %12.2f %14s\n", f[2], f[3], tvm[f[2]], r;
  }
}'
