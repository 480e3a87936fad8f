#!/usr/bin/env bash
# Checks that the deploy runtime (kiln-runtime built with --no-default-features, as
# scripts/runtime_size.sh builds it) depends on no compiler crate. An allow-list: every crate in
# kiln-runtime's normal dependency tree (build and proc-macro crates included, since cargo tree
# lists them under normal edges) must be named below, so a new dependency fails here until someone
# decides it belongs in libkiln_runtime.so. Compiler crates (kiln-tir, kiln-te, kiln-topi,
# kiln-graph, kiln-onnx, kiln-codegen, inkwell, llvm-sys, prost, ...) belong behind kiln-runtime's
# `compiler` feature.
#
#   scripts/runtime_deps.sh    exit 0 when the tree holds only allowed crates, 1 otherwise
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ALLOWED=(
  kiln-runtime kiln-ffi kiln-macros # Kiln's runtime crates
  libc cfg-if half zerocopy zerocopy-derive inventory
  proc-macro2 quote syn unicode-ident # kiln-macros and zerocopy-derive, at build time only
)

tree=$(cargo tree -q -p kiln-runtime --no-default-features -e normal --prefix none -f '{p}')
unexpected=()
while read -r name _; do
  [[ -z "$name" ]] && continue
  ok=0
  for allowed in "${ALLOWED[@]}"; do
    [[ "$name" == "$allowed" ]] && { ok=1; break; }
  done
  ((ok)) || unexpected+=("$name")
done < <(printf '%s\n' "$tree" | sort -u)

if ((${#unexpected[@]})); then
  mapfile -t unexpected < <(printf '%s\n' "${unexpected[@]}" | sort -u)
  echo "runtime_deps: the deploy runtime (kiln-runtime --no-default-features) depends on crates" \
    "outside its allow-list: ${unexpected[*]}" >&2
  echo "runtime_deps: put compiler dependencies behind kiln-runtime's \`compiler\` feature; add a" \
    "crate to ALLOWED in scripts/runtime_deps.sh only if libkiln_runtime.so needs it." >&2
  echo "runtime_deps: see the paths with: cargo tree -p kiln-runtime --no-default-features -e normal -i CRATE" >&2
  exit 1
fi
echo "runtime_deps: the deploy runtime's $(printf '%s\n' "$tree" | cut -d" " -f1 | sort -u | grep -c .) crates are all allowed"
