#!/usr/bin/env bash
# float32 matmul N^3 (default 1024) at one thread: Kiln's best schedule
# (crates/kiln-codegen/benches/matmul.rs) beside numpy/OpenBLAS in the same run, OpenBLAS on the
# kernel it picks for the CPU (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for this command
# only; the kernel that ran is printed). Prints GFLOP/s (median of REPS runs after a warm-up),
# the ratio, Kiln's compile time, the max relative error of Kiln's output, and the load average.
# Then the graph compiler on MatMul models (bench/matmul/model.py): B a constant, B an input,
# and classifier-shaped products, beside numpy/OpenBLAS and onnxruntime.
# Usage: bash bench/matmul/run.sh [N] [extra bench flags, e.g. --mr 8 --bn 32 --mc 256]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
n="${1:-1024}"; shift || true
reps="${REPS:-15}"
py="${PYTHON:-$root/.venv/bin/python}"
"$py" -c "import threadpoolctl" 2>/dev/null || "$root/.venv/bin/pip" install -q threadpoolctl
exe="$(cargo bench -p kiln-codegen --bench matmul --no-run --message-format=json 2>/dev/null \
  | "$py" -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "matmul" and m.get("executable"):
        print(m["executable"])')"
dump="$(mktemp -d)"
trap 'rm -rf "$dump"' EXIT
echo "load before: $(uptime)"
out="$(env KILN_NUM_THREADS=1 "$exe" --n "$n" --reps "$reps" --dump "$dump" "$@")"
echo "$out" | grep -v '^KILN_'
g="$(echo "$out" | sed -n 's/.*KILN_GFLOPS=\([0-9.]*\).*/\1/p')"
ms="$(echo "$out" | sed -n 's/.*KILN_COMPILE_MS=\([0-9.]*\).*/\1/p')"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 REPS="$reps" \
  "$py" "$root/bench/matmul/compare.py" "$n" "$dump" "$g" "$ms"
echo "load after: $(uptime)"
# The same products through the graph compiler (`kiln compile` on MatMul models), beside
# numpy/OpenBLAS and onnxruntime.
cargo build --release -q -p kiln-cli -p kiln
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 KILN_NUM_THREADS=1 \
  KILN_LIBRARY_PATH="$root/target/release" PYTHONPATH="$root/python" REPS="$reps" \
  "$py" "$root/bench/matmul/model.py" --n "$n" --reps "$reps"
