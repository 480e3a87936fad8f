#!/usr/bin/env bash
# Builds and runs Kiln's C ABI tests.
#
#   tests/c/ffi_abi_test.c     compiled against TVM-FFI's own <tvm/ffi/c_api.h>
#   tests/c/kiln_header_test.c compiled against Kiln's <kiln/c_api.h>
#   examples/c/run_model.c     the C example, run on the bundled model compiled by
#                              target/${KILN_PROFILE:-debug}/kiln (output compared with `kiln run`)
#
# both linked with target/${KILN_PROFILE:-debug}/libkiln_runtime.so (rpath set),
# then ffi_abi_test again under valgrind when valgrind is installed.
#
# Environment:
#   KILN_PROFILE       cargo profile directory to take the library from (debug)
#   KILN_LIB_DIR       directory holding libkiln_runtime.so (overrides KILN_PROFILE)
#   TVM_FFI_INCLUDE    directory containing tvm/ffi/c_api.h (default: the
#                      apache-tvm-ffi wheel in .venv)
#   KILN_C_AGAINST     "kiln" (default) or "tvm-ffi": link with the wheel's
#                      libtvm_ffi.so + libtvm_ffi_testing.so instead, to check
#                      the tests themselves against the reference runtime
#   KILN_VALGRIND      0 to skip the valgrind run
#   KILN_TEST_VERBOSE  1 to list passing checks too
#   CC                 C compiler (cc)
# Exit status is non-zero if anything fails to build or any check fails.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROFILE="${KILN_PROFILE:-debug}"
AGAINST="${KILN_C_AGAINST:-kiln}"
CC="${CC:-cc}"
BUILD="$ROOT/build/c_tests/$AGAINST-$PROFILE"
mkdir -p "$BUILD"

die() { echo "c_tests: $*" >&2; exit 1; }

# ---- locate TVM-FFI's header (and dlpack.h, wherever the wheel ships it) ----
if [[ -n "${TVM_FFI_INCLUDE:-}" ]]; then
  TVM_INC="$TVM_FFI_INCLUDE"
else
  TVM_INC=""
  for d in "$ROOT"/.venv/lib/python3*/site-packages/tvm_ffi/include; do
    [[ -f "$d/tvm/ffi/c_api.h" ]] && TVM_INC="$d" && break
  done
  if [[ -z "$TVM_INC" ]] && command -v python3 >/dev/null; then
    TVM_INC="$(python3 -c 'import os, tvm_ffi; print(os.path.join(os.path.dirname(tvm_ffi.__file__), "include"))' 2>/dev/null || true)"
  fi
fi
[[ -n "$TVM_INC" && -f "$TVM_INC/tvm/ffi/c_api.h" ]] ||
  die "cannot find tvm/ffi/c_api.h (install apache-tvm-ffi into $ROOT/.venv or set TVM_FFI_INCLUDE)"
TVM_PKG="$(cd "$TVM_INC/.." && pwd)"

DLPACK_INC=""
for d in "$TVM_INC" "$TVM_PKG/3rdparty/dlpack/include" "$TVM_INC/../3rdparty/dlpack/include"; do
  [[ -f "$d/dlpack/dlpack.h" ]] && DLPACK_INC="$d" && break
done
if [[ -z "$DLPACK_INC" ]]; then
  found="$(find "$TVM_PKG" -path '*/dlpack/dlpack.h' -print -quit 2>/dev/null || true)"
  [[ -n "$found" ]] && DLPACK_INC="$(dirname "$(dirname "$found")")"
fi
[[ -n "$DLPACK_INC" ]] || die "cannot find dlpack/dlpack.h near $TVM_INC"

# ---- the library under test ----
case "$AGAINST" in
  kiln)
    LIB_DIR="${KILN_LIB_DIR:-$ROOT/target/$PROFILE}"
    [[ -f "$LIB_DIR/libkiln_runtime.so" ]] ||
      die "$LIB_DIR/libkiln_runtime.so not found (build the runtime first)"
    LIB_DIR="$(cd "$LIB_DIR" && pwd)"
    LINK=(-L"$LIB_DIR" -Wl,--no-as-needed -lkiln_runtime -Wl,--as-needed -Wl,-rpath,"$LIB_DIR")
    ;;
  tvm-ffi)
    LIB_DIR="$TVM_PKG/lib"
    [[ -f "$LIB_DIR/libtvm_ffi.so" && -f "$LIB_DIR/libtvm_ffi_testing.so" ]] ||
      die "libtvm_ffi.so / libtvm_ffi_testing.so not found in $LIB_DIR"
    # libtvm_ffi_testing registers the testing.* globals from its initialisers,
    # so it must be loaded although no symbol of it is referenced.
    LINK=(-L"$LIB_DIR" -Wl,--no-as-needed -ltvm_ffi -ltvm_ffi_testing -Wl,--as-needed
          -Wl,-rpath,"$LIB_DIR")
    ;;
  *) die "KILN_C_AGAINST must be kiln or tvm-ffi, not '$AGAINST'" ;;
esac

CFLAGS=(-std=c11 -O1 -g -Wall -Wextra -Werror=implicit-function-declaration)
echo "c_tests: library  $LIB_DIR ($AGAINST)"
echo "c_tests: tvm-ffi  $TVM_INC"

status=0
build() { # out src includes...
  local out="$1" src="$2"; shift 2
  if ! "$CC" "${CFLAGS[@]}" "$@" "$src" -o "$out" "${LINK[@]}" -lm -pthread; then
    echo "c_tests: FAILED to build $src" >&2
    status=1
    return 1
  fi
}
run() { # name cmd...
  local name="$1"; shift
  echo "== $name"
  "$@"
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "c_tests: $name FAILED (exit $rc)"
    status=1
  fi
}

if build "$BUILD/ffi_abi_test" "$ROOT/tests/c/ffi_abi_test.c" -I"$TVM_INC" -I"$DLPACK_INC"; then
  run ffi_abi_test "$BUILD/ffi_abi_test"
  if [[ "${KILN_VALGRIND:-1}" != 0 ]] && command -v valgrind >/dev/null; then
    # "still reachable" (process-lifetime registries) is fine; definite leaks
    # and memory errors are not.
    run "ffi_abi_test under valgrind" valgrind -q --error-exitcode=1 --leak-check=full \
      --errors-for-leak-kinds=definite --show-leak-kinds=definite "$BUILD/ffi_abi_test"
  elif [[ "${KILN_VALGRIND:-1}" != 0 ]]; then
    echo "c_tests: valgrind not installed, skipping the leak check"
  fi
fi

if build "$BUILD/kiln_header_test" "$ROOT/tests/c/kiln_header_test.c" -I"$ROOT/include"; then
  # With Kiln's runtime, the test also loads a library whose target record asks for AMX and
  # AVX512-FP16 (no AMD CPU has them) and whose constructor would leave a marker file: the load
  # must fail through the C ABI, naming the missing features, before any of its code runs.
  refused_env=()
  if [[ "$AGAINST" != kiln ]]; then
    :
  elif grep -qw amx_tile /proc/cpuinfo 2>/dev/null && grep -qw avx512_fp16 /proc/cpuinfo; then
    echo "c_tests: this CPU has AMX and AVX512-FP16, skipping the refused-library check"
  else
    rm -f "$BUILD/refused.ran"
    cat >"$BUILD/refused.c" <<EOF
#include <stdio.h>
int __tvm_ffi_f(void) { return 0; }
__attribute__((constructor)) static void ran(void) {
  FILE* f = fopen("$BUILD/refused.ran", "w");
  if (f) fclose(f);
}
__attribute__((section(".kiln_target"), used)) static const char record[] =
    "format=kiln-target-1\\nvariant=\\ntriple=$(uname -m)-pc-linux-gnu\\ncpu=sapphirerapids\\n"
    "features=amx-tile,avx512f,avx512fp16\\ntarget=llvm -mcpu=sapphirerapids";
EOF
    if "$CC" -shared -fPIC -o "$BUILD/refused.so" "$BUILD/refused.c"; then
      refused_env=(KILN_REFUSED_LIB="$BUILD/refused.so" KILN_REFUSED_MARKER="$BUILD/refused.ran")
    else
      echo "c_tests: FAILED to build the refused library" >&2
      status=1
    fi
  fi
  run kiln_header_test env "${refused_env[@]}" "$BUILD/kiln_header_test"
fi

# The C example (examples/c/run_model.c) on the bundled model: its output file must equal
# `kiln run`'s byte for byte, and it must be clean under valgrind (with a library compiled for
# generic x86-64: valgrind does not decode AVX-512). The program links the runtime alone: the
# deploy.so records its own dependency on libm.
if [[ "$AGAINST" == kiln ]]; then
  KILN_BIN="$LIB_DIR/kiln"
  EX="$BUILD/example"
  mkdir -p "$EX/cli" "$EX/c"
  if [[ ! -x "$KILN_BIN" ]]; then
    echo "c_tests: $KILN_BIN not built, skipping the C example"
  elif "$CC" "${CFLAGS[@]}" -Werror -I"$ROOT/include" "$ROOT/examples/c/run_model.c" \
      -o "$EX/run_model" -L"$LIB_DIR" -lkiln_runtime -Wl,-rpath,"$LIB_DIR"; then
    example() {
      "$KILN_BIN" compile "$ROOT/examples/model/model.onnx" -o "$EX/deploy.so" --target llvm &&
        "$KILN_BIN" run "$EX/deploy.so" --input input="$ROOT/examples/model/input.npy" \
          --output-dir "$EX/cli" &&
        "$EX/run_model" "$EX/deploy.so" input="$ROOT/examples/model/input.npy" -o "$EX/c" &&
        cmp "$EX/cli/output_0.npy" "$EX/c/output_0.npy"
    }
    run "run_model example (same output as kiln run)" example
    # A library compiled for a CPU this one is not: the load fails through the C ABI (-1 and
    # the raised error, which names the missing features), with no signal.
    if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
      echo "c_tests: this CPU has AMX, skipping the refused-library check"
    else
      refused() {
        "$KILN_BIN" compile "$ROOT/examples/model/model.onnx" -o "$EX/spr.so" \
          --target "llvm -mcpu=sapphirerapids" >/dev/null || return 1
        "$EX/run_model" "$EX/spr.so" input="$ROOT/examples/model/input.npy" -o "$EX/c" \
          2>"$EX/refused.err"
        local rc=$?
        cat "$EX/refused.err"
        [[ $rc -eq 1 ]] && grep -q "RuntimeError" "$EX/refused.err" &&
          grep -q "amx-tile" "$EX/refused.err" && grep -q "sapphirerapids" "$EX/refused.err"
      }
      run "run_model refuses a library for another CPU" refused
    fi
    if [[ "${KILN_VALGRIND:-1}" != 0 ]] && command -v valgrind >/dev/null; then
      run "run_model under valgrind" valgrind -q --error-exitcode=1 --leak-check=full \
        --errors-for-leak-kinds=definite --show-leak-kinds=definite \
        "$EX/run_model" "$EX/deploy.so" input="$ROOT/examples/model/input.npy" -o "$EX/c"
    fi
  else
    echo "c_tests: FAILED to build examples/c/run_model.c" >&2
    status=1
  fi
fi

if [[ $status -eq 0 ]]; then
  echo "c_tests: all passed"
else
  echo "c_tests: FAILURES"
fi
exit $status
