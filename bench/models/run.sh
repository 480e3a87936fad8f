#!/usr/bin/env bash
# Whole-model latency at one thread: Kiln beside onnxruntime and Apache TVM 0.27 (untuned) in
# the same run, with compile times and output checks (bench/models/bench_models.py).
# Usage: bash bench/models/run.sh [--models resnet50 ...] [--skip-tvm] [--kiln-target T] [--hide-avx512] [--tune] [--repeat N] [--tvm-repeat N]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
cargo build --release -q -p kiln-cli -p kiln
exec "${PYTHON:-$root/.venv/bin/python}" "$root/bench/models/bench_models.py" "$@"
