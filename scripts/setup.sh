#!/usr/bin/env bash
# Installs what Kiln's build, tests and benchmarks need on a fresh machine; idempotent.
#   - Debian packages: valgrind (C leak checks), llvm-19-dev (kiln-codegen links LLVM 19 through
#     inkwell; .cargo/config.toml points llvm-sys at /usr/lib/llvm-19), ocl-icd-libopencl1 and
#     pocl-opencl-icd (an OpenCL driver for the CPU, for the OpenCL tests)
#   - the toolchain's rust-src component (the deploy runtime is built with std rebuilt from it)
#   - .venv with the packages in python/requirements-test.txt (skipped with --system: the build
#     and the demo need only the Debian packages)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

need_apt=()
command -v valgrind >/dev/null || need_apt+=(valgrind)
command -v cc >/dev/null || need_apt+=(gcc)
# OpenCL: the ICD loader (libOpenCL.so.1, which Kiln loads at run time) and PoCL, which exposes
# the CPU as an OpenCL device, so the OpenCL tests run on any machine.
{ ldconfig -p | grep -q 'libOpenCL.so.1 ' && ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; } ||
  need_apt+=(ocl-icd-libopencl1 pocl-opencl-icd)
[[ -x /usr/lib/llvm-19/bin/llvm-config && -e /usr/lib/llvm-19/lib/libLLVM-19.so ]] || need_apt+=(llvm-19-dev)
if ((${#need_apt[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup: apt-get install ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: please install ${need_apt[*]} (not root, skipping)" >&2
  fi
fi

# The toolchain's std source: scripts/runtime_size.sh rebuilds std for the deploy runtime.
sysroot=$(rustc --print sysroot)
if [[ ! -d "$sysroot/lib/rustlib/src/rust/library/std" ]]; then
  if command -v rustup >/dev/null; then
    echo "setup: rustup component add rust-src"
    rustup component add rust-src >/dev/null 2>&1 || echo "setup: could not add rust-src" >&2
  else
    echo "setup: no rustup; the deploy runtime's size check needs rust-src in $sysroot" >&2
  fi
fi

[[ "${1:-}" == --system ]] && exit 0

stamp=.venv/.kiln-requirements
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
if ! cmp -s python/requirements-test.txt "$stamp" 2>/dev/null; then
  echo "setup: pip install -r python/requirements-test.txt"
  .venv/bin/pip install -q --disable-pip-version-check -r python/requirements-test.txt
  cp python/requirements-test.txt "$stamp"
fi

# The compiled call path of the Python binding, for use from the source tree (pip install .
# builds it into the package): kiln/_fastcall<ext suffix>, rebuilt when its source changes.
.venv/bin/python python/build_fastcall.py >/dev/null
