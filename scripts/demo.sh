#!/usr/bin/env bash
# The README's main job: builds Kiln and runs the bundled example (`kiln demo`), which checks its
# own results and prints timings.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo run -q --release -p kiln-cli -- demo
