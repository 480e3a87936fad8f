#!/usr/bin/env bash
# Checks that the deployable runtime (kiln-runtime without default features, what
# scripts/runtime_size.sh builds into libkiln_runtime.so) depends on no compiler crate: its
# dependency tree (normal edges; proc-macro crates run at build time only) must hold nothing
# but the crates listed below. A compiler crate there (kiln-tir, kiln-te, kiln-topi,
# kiln-graph, kiln-onnx, kiln-codegen, inkwell, llvm-sys, prost...) would put the compiler
# into every deployed model. Adding a dependency to the runtime means adding it here, on
# purpose.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ALLOWED=(
  kiln-runtime kiln-ffi kiln-macros # Kiln's runtime side
  libc half inventory cfg-if zerocopy zerocopy-derive # what they use at run time
  proc-macro2 quote syn unicode-ident # build-time only: the derive macros
)
COMPILER=(kiln-tir kiln-te kiln-topi kiln-graph kiln-onnx kiln-codegen kiln-rpc kiln inkwell llvm-sys prost)

tree=$(cargo tree -q -p kiln-runtime --no-default-features -e normal --prefix none |
  sed 's/ v[0-9][^ ]*.*//' | sort -u)
bad=()
for crate in $tree; do
  ok=0
  for a in "${ALLOWED[@]}"; do [[ "$crate" == "$a" ]] && ok=1 && break; done
  ((ok)) || bad+=("$crate")
done
if ((${#bad[@]})); then
  echo "runtime_deps: the deployable runtime depends on crates not in its list: ${bad[*]}" >&2
  for crate in "${bad[@]}"; do
    for c in "${COMPILER[@]}"; do
      [[ "$crate" == "$c" ]] && echo "runtime_deps: $crate is a compiler crate; see why with:" \
        "cargo tree -p kiln-runtime --no-default-features -e normal -i $crate" >&2
    done
  done
  exit 1
fi
echo "runtime_deps: the deployable runtime depends on $(echo "$tree" | wc -l) crates, none of them a compiler crate"
