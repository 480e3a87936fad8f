"""RPC round trip and copy bandwidth over loopback, one side per run.

    python bench/rpc/bench.py kiln KILN_CLI     # Kiln's client against `kiln rpc server`
    python bench/rpc/bench.py tvm               # TVM's client against TVM's server

Prints one JSON line: per-call time of a remote `testing.nop` (median of runs of 2000 calls,
after 200 warm-up calls) and the bandwidth of copying a 64 MB float32 tensor to the remote
device and back (median of runs after one warm-up copy each way).
"""

import json
import re
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

RUNS = 7
CALLS = 2000
NBYTES = 64 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(nop, to_remote, from_remote):
    for _ in range(200):
        nop()
    per_call = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            nop()
        per_call.append((time.perf_counter() - t0) / CALLS)
    x = np.random.default_rng(0).random(NBYTES // 4, dtype="float32")
    remote = to_remote(x)
    back = from_remote(remote)
    assert np.array_equal(back, x)
    up, down = [], []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        remote = to_remote(x)
        up.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        from_remote(remote)
        down.append(time.perf_counter() - t0)
    return {
        "nop_us": statistics.median(per_call) * 1e6,
        "to_remote_GBps": NBYTES / statistics.median(up) / 1e9,
        "from_remote_GBps": NBYTES / statistics.median(down) / 1e9,
    }


def run_kiln(cli):
    import kiln
    import kiln.rpc

    proc = subprocess.Popen([cli, "rpc", "server", "--port", "0"], stdout=subprocess.PIPE, text=True)
    port = int(re.search(r":(\d+)$", proc.stdout.readline().strip()).group(1))
    try:
        sess = kiln.rpc.connect("127.0.0.1", port)
        dev = sess.cpu(0)
        nop = sess.get_function("testing.nop")
        return measure(nop, lambda x: kiln.tensor(x, dev), lambda t: t.numpy())
    finally:
        proc.kill()


def run_tvm():
    import tvm
    from tvm import rpc

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(port),
         "--port-end", str(port + 1)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    while "bind to" not in proc.stderr.readline():
        pass
    try:
        for attempt in range(40):  # the server logs its port just before it listens
            try:
                sess = rpc.connect("127.0.0.1", port)
                break
            except Exception:  # noqa: BLE001
                if attempt == 39:
                    raise
                time.sleep(0.25)
        dev = sess.cpu()
        nop = sess.get_function("testing.nop")
        return measure(nop, lambda x: tvm.runtime.tensor(x, dev), lambda t: t.numpy())
    finally:
        proc.kill()


if __name__ == "__main__":
    res = run_kiln(sys.argv[2]) if sys.argv[1] == "kiln" else run_tvm()
    print(json.dumps({"side": sys.argv[1], **res}))
