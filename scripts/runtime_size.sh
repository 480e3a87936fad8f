#!/usr/bin/env bash
# Builds the deployable runtime twice and prints each size against its budget: for static models
# only (graph executor factories), target/deploy/static/libkiln_runtime.so, against seed 002's
# budget (TVM's runtime is 200-600 KB; Kiln's should be no larger); and with the virtual machine
# (kiln-runtime feature `vm`: libraries with run-time control flow or data-dependent output
# shapes), target/deploy/libkiln_runtime.so, against a budget of its own.
#
#   scripts/runtime_size.sh           build, print the sizes and the largest sections
#   scripts/runtime_size.sh --check   the same, and exit 1 when a library is over its budget
#                                     (or, when KILN_RUNTIME_CEILING is set, the static one
#                                     over that ceiling)
#
# Sizes with rustc 1.95 (stable), std rebuilt (below): 590328 bytes with the OpenCL runtime,
# 550352 without (740056 with the prebuilt std, before OpenCL); with the VM as well, 682592,
# then 698984 (more builtins), and 713856 once programs call kernels with run-time extents
# (Kernel/View instructions, memory kept per shape: about 7 KB; the shape functions
# reduce_shape and broadcast_shape: about 7 KB), 727520 with those of Reshape, Squeeze,
# Unsqueeze, Range and Slice, 730816 with OneHot and Tile, 734904 with the shape programs
# (Shape instruction), 738032 with Split's; then 600600 and about 740000 as the runtime grew, 562832
# and 702496 once errors' Rust backtraces (KILN_BACKTRACE=1, whose formatting links a symbol
# demangler) became kiln-ffi's `backtrace` feature, left out here. Formatting a float in a message links Rust's float printer
# (about 17 KB): runtime messages print integers only. The VM's budget is Kiln's own (the static
# runtime keeps seed 002's): 740000, room for the shape functions of the operators still
# frozen at compile time.
# The CI step (scripts/test.sh)
# runs --check with std rebuilt, against the budget. Development-only parts stay out: the
# `compiler` feature and kiln-ffi's `testing.*` globals (kiln-runtime's `testing` feature).
#
# The `deploy` profile (Cargo.toml): fat LTO, one codegen unit, opt-level "z", stripped; panics
# still unwind, since every C entry point turns a panic into an error. kiln-runtime alone is
# built, so kiln-ffi's `json` feature stays off (a workspace build would turn it on), and with
# `--no-default-features`, so kiln-runtime's `compiler` feature is off: no export_library, no
# linking of `.o`/`.tar` files at load time, no static library modules, no params saving or
# factory creation from parts (about 56 KB; libkiln.so has them all).
#
# `cargo rustc --crate-type cdylib` rather than `cargo build`: kiln-runtime is both an rlib and a
# cdylib, and for such a package cargo does not run LTO at all (the library comes out about 25%
# larger).
#
# Rust's prebuilt std carries the backtrace symbolizer of its default panic hook (gimli,
# addr2line, miniz_oxide, rustc-demangle: about 170 KB of code plus its unwind tables), linked in
# whenever anything can panic. So std is rebuilt from the toolchain's own source (the `rust-src`
# component, which scripts/setup.sh installs) without its `backtrace` feature, with the same
# compiler: a panic still unwinds into an error at the C boundary; only the hook's symbolized
# backtrace under RUST_BACKTRACE is gone. The library comes out about 190 KB smaller.
# Cargo's `-Zbuild-std` is not stabilized yet, so on a stable toolchain this one command runs with
# RUSTC_BOOTSTRAP=1 (as the Linux kernel builds its Rust code with a stable compiler); nothing
# else in the build uses unstable features.
#
# Environment:
#   KILN_DEPLOY_BUILD_STD    auto (default: rebuild std when the toolchain's rust-src is
#                            installed), 1 (require it), 0 (prebuilt std)
#   KILN_DEPLOY_RELR=1       also pack relative relocations (-z pack-relative-relocs, DT_RELR):
#                            about 20 KB smaller, but the library then loads only with glibc
#                            2.36 or later (musl 1.2.4), so it is not the default
#   KILN_RUNTIME_BUDGET      budget in bytes of the static-model runtime (600000)
#   KILN_RUNTIME_VM_BUDGET   budget in bytes of the runtime with the virtual machine (740000)
#   KILN_RUNTIME_CEILING     with --check, fail only above this many bytes (unset: the budget)
#   KILN_RUNTIME_FEATURES    kiln-runtime features of the static-model runtime (default `opencl`:
#                            the OpenCL device API and module; empty for none); the runtime
#                            with the VM adds `vm`
#   CARGO_TARGET_DIR         as for cargo (target)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CHECK=0
for arg in "$@"; do
  case "$arg" in
    --check) CHECK=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "runtime_size: unknown argument $arg" >&2; exit 2 ;;
  esac
done

BUDGET="${KILN_RUNTIME_BUDGET:-600000}"
VM_BUDGET="${KILN_RUNTIME_VM_BUDGET:-740000}"
FEATURES="${KILN_RUNTIME_FEATURES-opencl}"
CEILING="${KILN_RUNTIME_CEILING:-$BUDGET}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
LIB="$TARGET_DIR/deploy/libkiln_runtime.so"

BUILD_STD="${KILN_DEPLOY_BUILD_STD:-auto}"
sysroot=$(rustc --print sysroot)
has_src=0
[[ -d "$sysroot/lib/rustlib/src/rust/library/std" ]] && has_src=1
if [[ "$BUILD_STD" == auto ]]; then
  BUILD_STD=$has_src
elif [[ "$BUILD_STD" == 1 && $has_src == 0 ]]; then
  echo "runtime_size: std cannot be rebuilt: no rust-src in $sysroot" \
    "(rustup component add rust-src, or run scripts/setup.sh)" >&2
  exit 1
fi

flags="${RUSTFLAGS:-}"
if [[ "${KILN_DEPLOY_RELR:-0}" == 1 ]]; then
  flags="$flags -C link-arg=-Wl,-z,pack-relative-relocs"
fi

# Builds kiln-runtime with features $1 into $LIB, prints its size against budget $2 (with
# --check, fails above ceiling $3); $4 names the variant.
measure() {
  local features="$1" budget="$2" ceiling="$3" label="$4"
  rm -f "$LIB"
  if [[ "$BUILD_STD" == 1 ]]; then
    # With an explicit --target, cargo puts the library under target/<triple>/deploy.
    local host built
    host=$(rustc -vV | sed -n 's/^host: //p')
    built="$TARGET_DIR/$host/deploy/libkiln_runtime.so"
    rm -f "$built"
    echo "runtime_size: $label: std rebuilt without its backtrace symbolizer ($(rustc -V), -Zbuild-std)"
    RUSTC_BOOTSTRAP=1 RUSTFLAGS="$flags" cargo rustc -q --profile deploy -p kiln-runtime --lib \
      --crate-type cdylib --no-default-features --features "$features" --target "$host" \
      -Zbuild-std=std,panic_unwind -Zbuild-std-features=panic-unwind
    [[ -f "$built" ]] && mkdir -p "$(dirname "$LIB")" && cp "$built" "$LIB"
  else
    echo "runtime_size: $label: prebuilt std, with its backtrace symbolizer ($(rustc -V))"
    RUSTFLAGS="$flags" cargo rustc -q --profile deploy -p kiln-runtime --lib --crate-type cdylib \
      --no-default-features --features "$features"
  fi
  [[ -f "$LIB" ]] || { echo "runtime_size: $LIB was not built" >&2; exit 1; }

  local size
  size=$(stat -c %s "$LIB")
  echo "runtime_size: $label (features: ${features:-none}): $LIB"
  if command -v size >/dev/null; then
    echo "runtime_size: largest sections (bytes):"
    size -A "$LIB" | awk 'NR > 2 && $2 > 0 && $1 != "Total" { printf "  %-20s %8d\n", $1, $2 }' |
      sort -k2 -n -r | head -8
  fi
  if ((size <= budget)); then
    echo "runtime_size: $label: $size bytes ($((size / 1024)) KiB), within the budget of $budget bytes"
  else
    echo "runtime_size: $label: $size bytes ($((size / 1024)) KiB), OVER the budget of $budget bytes by $((size - budget))"
    if ((CHECK)); then
      if ((size > ceiling)); then
        echo "runtime_size: $size bytes is also over the ceiling of $ceiling bytes: the library grew" >&2
        exit 1
      fi
      ((ceiling != budget)) && echo "runtime_size: within the interim ceiling of $ceiling bytes"
    fi
  fi
}

# First the runtime for static models (graph executor factories) against seed 002's budget,
# kept beside the full one as static/libkiln_runtime.so; then the full runtime, with the
# virtual machine that libraries with run-time control flow need, left as $LIB.
measure "$FEATURES" "$BUDGET" "$CEILING" "static-model runtime"
mkdir -p "$(dirname "$LIB")/static"
cp "$LIB" "$(dirname "$LIB")/static/libkiln_runtime.so"
measure "$FEATURES vm" "$VM_BUDGET" "$VM_BUDGET" "runtime with the VM"
exit 0
