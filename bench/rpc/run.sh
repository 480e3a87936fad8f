#!/usr/bin/env bash
# RPC over loopback, Kiln client + Kiln server beside TVM client + TVM server, in the same run:
# round trip of a remote `testing.nop` and the bandwidth of a 64 MB tensor copy each way
# (medians of 7 runs after warm-up; Python clients on both sides).
#
#   bash bench/rpc/run.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
cargo build -q --release -p kiln -p kiln-cli
export KILN_LIBRARY_PATH="$ROOT/target/release/libkiln.so"
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
for side in kiln tvm; do
  .venv/bin/python bench/rpc/bench.py "$side" "$ROOT/target/release/kiln"
done | .venv/bin/python -c '
import json, sys
rows = {r["side"]: r for r in map(json.loads, sys.stdin)}
k, t = rows["kiln"], rows["tvm"]
print("%-22s %10s %10s %12s" % ("", "Kiln", "TVM", "Kiln / TVM"))
print("%-22s %10.1f %10.1f %12.2f" % ("nop round trip (us)", k["nop_us"], t["nop_us"], k["nop_us"] / t["nop_us"]))
for key, name in (("to_remote_GBps", "64 MB to remote GB/s"), ("from_remote_GBps", "64 MB from remote GB/s")):
    print("%-22s %10.2f %10.2f %12.2f" % (name, k[key], t[key], k[key] / t[key]))
'
