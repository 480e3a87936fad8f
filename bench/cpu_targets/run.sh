#!/usr/bin/env bash
# What code for several CPUs costs: compile time and library size of a model compiled for one
# target against two (x86-64-v3 + x86-64-v4 in one library), median of 3 compiles each, the
# latency of each (one thread, kiln bench), and the cost of the CPU check at load (reading the
# library's target records and choosing a variant; release build, median of 200).
# Usage: bash bench/cpu_targets/run.sh [MODEL]   (default: resnet50 of the model zoo)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
py="${PYTHON:-$root/.venv/bin/python}"
work="$root/build/bench_cpu_targets"
mkdir -p "$work"
cargo build --release -q -p kiln-cli -p kiln
kiln="$root/target/release/kiln"
model="${1:-}"
if [[ -z "$model" ]]; then
  model="$root/build/bench_models/resnet50.onnx"
  [[ -f "$model" ]] || "$py" tests/zoo/make_zoo.py "$root/build/bench_models" resnet50 >/dev/null
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(grep -qm1 avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2, no AVX-512')"
echo "model: $model"

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
compile() { # name targets...
  local name="$1"; shift
  local args=()
  for t in "$@"; do args+=(--target "$t"); done
  local times=()
  for _ in 1 2 3; do
    local t0 t1
    t0=$(date +%s.%N)
    "$kiln" compile "$model" -o "$work/$name.so" "${args[@]}" >/dev/null
    t1=$(date +%s.%N)
    times+=("$(echo "$t1 - $t0" | bc -l)")
  done
  local med size ms
  med=$(printf '%s\n' "${times[@]}" | median)
  size=$(stat -c %s "$work/$name.so")
  ms=$(KILN_NUM_THREADS=1 "$kiln" bench "$work/$name.so" --repeat 7 2>/dev/null |
    grep -o 'median [0-9.]* ms' | grep -o '[0-9.]*' || echo "?")
  printf '%-34s compile %6.2f s   size %9d bytes   latency %s ms\n' \
    "$name ($*)" "$med" "$size" "$ms"
}
compile native "llvm -mcpu=native"
compile v3 "llvm -mcpu=x86-64-v3"
compile v4 "llvm -mcpu=x86-64-v4"
compile v3+v4 "llvm -mcpu=x86-64-v3" "llvm -mcpu=x86-64-v4"
cargo test --release -q -p kiln-runtime --test module_target the_check_costs -- --nocapture 2>&1 |
  grep "target record check" || true
