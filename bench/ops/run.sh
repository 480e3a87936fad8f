#!/usr/bin/env bash
# One-operator models of the shapes networks bring (convolutions of every kind, transposed
# convolutions, matrix products), Kiln beside onnxruntime at one thread (bench/ops/shapes.py).
# Usage: bash bench/ops/run.sh [--only SUBSTRING ...] [--kiln-target T] [--hide-avx512] [--repeat N]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
cargo build --release -q -p kiln-cli -p kiln
export KILN_LIBRARY_PATH="$root/target/release" PYTHONPATH="$root/python" KILN_NUM_THREADS=1
exec "${PYTHON:-$root/.venv/bin/python}" "$root/bench/ops/shapes.py" "$@"
