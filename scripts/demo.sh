#!/usr/bin/env bash
# The README's main job: builds Kiln and runs `kiln demo`: FFI and tensor-compiler checks, then the
# bundled model (examples/model/model.onnx) compiled to a deploy.so, run, checked against
# onnxruntime's stored output (examples/model/expected.npy), with compile time and latency.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --system   # llvm-19-dev (and a C compiler) on a fresh machine
cargo run -q --release -p kiln-cli -- demo
