#!/usr/bin/env bash
# Fuzzes Kiln's ONNX import (decode, validation, conversion to the graph IR) with libFuzzer
# through cargo-fuzz, starting from the onnx wheel's backend test models.
#   scripts/fuzz_onnx.sh [SECONDS]     (default 600)
# Needs cargo-fuzz (`cargo install cargo-fuzz`); the stable toolchain builds the instrumented
# target with RUSTC_BOOTSTRAP=1 and no sanitizer (Rust code is memory safe; the fuzzer looks for
# panics, aborts, stack overflows and runaway memory). Crashes land in fuzz/artifacts/onnx_import/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_TO_RUN="${1:-600}"

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
bash scripts/setup.sh >/dev/null

corpus=fuzz/corpus/onnx_import
if [[ ! -d "$corpus" ]]; then
  data="$(.venv/bin/python tests/onnx_node/run.py --fetch-only | tail -1)"
  mkdir -p "$corpus"
  for m in "$data"/*/*/model.onnx; do
    case_dir="$(dirname "$m")"
    cp "$m" "$corpus/$(basename "$(dirname "$case_dir")")_$(basename "$case_dir").onnx"
  done
fi
echo "fuzz_onnx: corpus of $(ls "$corpus" | wc -l) models, running ${SECONDS_TO_RUN}s"
cd fuzz
RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none onnx_import "corpus/onnx_import" -- \
  -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=4096 -timeout=30 -max_len=65536 \
  -print_final_stats=1
