"""The ONNX backend test data (node, pytorch-converted, pytorch-operator, simple), run through
Kiln and through onnxruntime in the same run.

The data come from the onnx==1.20.1 wheel, fetched from PyPI at run time into
``build/onnx_node/`` (nothing is committed). Each case (a model and its test_data_set_0 inputs and
expected outputs) runs in its own process, so that a crash is a failed case and not the end of
the run; outputs are compared with rtol 1e-3, atol 1e-5 (NaNs must match). Kiln fixes shapes
at compile time: when a case feeds a value that decides a shape as a run-time input (Resize's
``sizes``, a Reduce's ``axes``...), Kiln's error names it and the case is compiled again with that
input frozen to the case's value (``kiln.onnx.compile(..., frozen_inputs=...)``); such passes are
counted apart and listed in ``<out>/kiln_<suite>_frozen.txt``.

    python tests/onnx_node/run.py                       # every suite, every case
    python tests/onnx_node/run.py --suites node --sample 120
    python tests/onnx_node/run.py --cases test_relu test_resize_upsample_scales_nearest

Writes ``<out>/summary.md`` (pass counts per suite beside onnxruntime's, and a per-operator table
of what fails and why), ``<out>/results.json`` and one ``<out>/<engine>_<suite>_pass.txt`` list
per engine and suite; prints the table and ends with ``N passed, M failed`` for Kiln (cases that
onnxruntime also fails count as neither unless ``--strict``). Exit status 1 when a case in
``--expect-pass`` (a file of case names) fails in Kiln, or passes only with inputs frozen.
"""

import argparse
import concurrent.futures as cf
import glob
import json
import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHEEL = "onnx==1.20.1"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]


def fetch(cache):
    """The wheel's backend test data under ``cache/data`` (downloaded and unpacked once)."""
    data = os.path.join(cache, "data")
    if os.path.isdir(os.path.join(data, "node")):
        return data
    wheels = os.path.join(cache, "wheel")
    os.makedirs(wheels, exist_ok=True)
    if not glob.glob(os.path.join(wheels, "onnx-*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", WHEEL,
                        "-d", wheels], check=True)
    whl = glob.glob(os.path.join(wheels, "onnx-*.whl"))[0]
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            if "/backend/test/data/" not in n or n.endswith("/"):
                continue
            rel = n.split("/backend/test/data/", 1)[1]
            if rel.split("/")[0] not in SUITES:
                continue
            dst = os.path.join(data, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with z.open(n) as src, open(dst, "wb") as f:
                f.write(src.read())
    return data


def cases(data, suites):
    out = []
    for s in suites:
        for d in sorted(glob.glob(os.path.join(data, s, "*"))):
            if os.path.isfile(os.path.join(d, "model.onnx")) and glob.glob(
                    os.path.join(d, "test_data_set_0", "input_*.pb")):
                out.append((s, os.path.basename(d), d))
    return out


# ---- one case, in a child process -------------------------------------------------------

CHILD = r"""
import glob, json, os, sys, traceback
import numpy as np
import onnx
from onnx import numpy_helper

engine, case = sys.argv[1], sys.argv[2]
model = onnx.load(os.path.join(case, "model.onnx"))
ds = os.path.join(case, "test_data_set_0")
def read(kind):
    files = sorted(glob.glob(os.path.join(ds, kind + "_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    out = []
    for p in files:
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        out.append(numpy_helper.to_array(t))
    return out
inputs, expected = read("input"), read("output")
init = {i.name for i in model.graph.initializer}
names = [i.name for i in model.graph.input if i.name not in init][:len(inputs)]
ops = sorted({n.op_type for n in model.graph.node})
res = {"ops": ops, "ok": False, "error": ""}
try:
    feeds = dict(zip(names, inputs))
    if engine == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        got = sess.run(None, feeds)
    else:
        import re
        import kiln, kiln.onnx
        from kiln.graph_executor import GraphModule
        # An input whose value decides a shape (Resize's sizes, a Reduce's axes...) is frozen
        # to the case's value and the compile retried; such a pass is reported as frozen.
        frozen = {}
        while True:
            try:
                lib = kiln.onnx.compile(model.SerializeToString(),
                                        {k: v.shape for k, v in feeds.items()},
                                        target="llvm -mcpu=native", frozen_inputs=frozen)
                break
            except ValueError as e:
                m = re.search(r"\('([^']*)'\) is a run-time input of the graph", str(e))
                names = [m.group(1)] if m else []
                m = re.search(r"from the graph's run-time input\(s\) ([^(]*) \(freeze", str(e))
                if m:
                    names = re.findall(r"'([^']*)'", m.group(1))
                if not names or any(n not in feeds or n in frozen for n in names):
                    raise
                for n in names:
                    frozen[n] = np.require(feeds[n], requirements="C")
        res["frozen"] = sorted(frozen)
        gm = GraphModule(lib["default"](kiln.cpu()))
        for k, v in feeds.items():
            if k not in frozen:
                gm.set_input(k, np.require(v, requirements="C"))
        gm.run()
        got = [gm.get_output(i).numpy() for i in range(gm.get_num_outputs())]
    if len(got) < len(expected):
        raise AssertionError(f"{len(got)} outputs, expected {len(expected)}")
    for k, (g, w) in enumerate(zip(got, expected)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            raise AssertionError(f"output {k}: shape {g.shape}, expected {w.shape}")
        if w.dtype.name.startswith(("bfloat16", "float8", "float4", "int4", "uint4", "int2", "uint2")):
            # ml_dtypes types: exact, compared as float32 values (NaNs as NaNs).
            if g.dtype != w.dtype:
                raise AssertionError(f"output {k}: dtype {g.dtype}, expected {w.dtype}")
            np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32),
                                          err_msg=f"output {k}")
        elif w.dtype.kind in "fc":
            np.testing.assert_allclose(g.astype(w.dtype), w, rtol=1e-3, atol=1e-5,
                                       equal_nan=True, err_msg=f"output {k}")
        elif w.dtype.kind in "OUS":
            if not np.array_equal(g, w):
                raise AssertionError(f"output {k}: strings differ")
        else:
            if g.dtype != w.dtype:
                raise AssertionError(f"output {k}: dtype {g.dtype}, expected {w.dtype}")
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
    res["ok"] = True
except Exception as e:
    msg = (type(e).__name__ + ": " + str(e)).strip().replace("\n", " ")
    res["error"] = msg[:300]
print("RESULT " + json.dumps(res))
"""


def run_case(engine, path, timeout):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KILN_NUM_THREADS="1",
               OMP_NUM_THREADS="1")
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, engine, path], capture_output=True,
                           text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout} s", "ops": []}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [""]
    return {"ok": False, "error": f"crashed (exit {p.returncode}): {tail[0][:200]}", "ops": []}


def summarize(results, suites):
    lines = ["| suite | cases | Kiln passes | of which with shape inputs frozen | "
             "onnxruntime passes | both | Kiln only | onnxruntime only |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in suites:
        rs = [r for r in results if r["suite"] == s]
        if not rs:
            continue
        k = sum(r["kiln"]["ok"] for r in rs)
        fr = sum(bool(r["kiln"]["ok"] and r["kiln"].get("frozen")) for r in rs)
        o = sum(r["ort"]["ok"] for r in rs)
        both = sum(r["kiln"]["ok"] and r["ort"]["ok"] for r in rs)
        lines.append(f"| {s} | {len(rs)} | {k} | {fr} | {o} | {both} | {k - both} | "
                     f"{o - both} |")
    per_op = {}
    for r in results:
        if r["kiln"]["ok"] or not r["ort"]["ok"]:
            continue
        ops = r["kiln"]["ops"] or r["ort"]["ops"]
        key = ",".join(ops) if len(ops) <= 2 else ops[0] + ",..."
        e = per_op.setdefault(key, {"n": 0, "first": r["case"], "why": r["kiln"]["error"]})
        e["n"] += 1
    lines += ["", "Cases onnxruntime passes and Kiln fails, by operator (first error shown):", "",
              "| operators | cases | first case | Kiln's error |", "| --- | ---: | --- | --- |"]
    for key, e in sorted(per_op.items(), key=lambda kv: -kv[1]["n"]):
        why = e["why"].replace("|", "\\|")[:160]
        lines.append(f"| {key} | {e['n']} | {e['first']} | {why} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", nargs="+", default=SUITES, choices=SUITES)
    ap.add_argument("--cases", nargs="+", help="only these case names")
    ap.add_argument("--sample", type=int, default=0,
                    help="every k-th case of each suite so that about this many run")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "onnx_node", "results"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "onnx_node"))
    ap.add_argument("--expect-pass",
                    help="a file of case names that must pass in Kiln (run only those, unless "
                         "--cases is given)")
    ap.add_argument("--skip-ort", action="store_true")
    ap.add_argument("--fetch-only", action="store_true",
                    help="fetch the data, print its folder and stop")
    args = ap.parse_args()

    data = fetch(args.cache)
    if args.fetch_only:
        print(data)
        return
    todo = cases(data, args.suites)
    if args.expect_pass and not args.cases:
        with open(args.expect_pass) as f:
            args.cases = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    if args.cases:
        todo = [c for c in todo if c[1] in set(args.cases)]
    if args.sample:
        picked = []
        for s in args.suites:
            cs = [c for c in todo if c[0] == s]
            step = max(1, len(cs) // max(1, args.sample // len(args.suites)))
            picked += cs[::step]
        todo = picked
    engines = ["kiln"] if args.skip_ort else ["kiln", "ort"]
    results = [{"suite": s, "case": n, "path": p} for s, n, p in todo]
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = {pool.submit(run_case, e, r["path"], args.timeout): (r, e)
                for r in results for e in engines}
        for f in cf.as_completed(futs):
            r, e = futs[f]
            r[e] = f.result()
    for r in results:
        r.setdefault("ort", {"ok": True, "error": "", "ops": r["kiln"]["ops"]})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    for e in engines:
        for s in args.suites:
            with open(os.path.join(args.out, f"{e}_{s}_pass.txt"), "w") as f:
                f.writelines(r["case"] + "\n" for r in results
                             if r["suite"] == s and r[e]["ok"])
    for s in args.suites:
        with open(os.path.join(args.out, f"kiln_{s}_frozen.txt"), "w") as f:
            f.writelines(f"{r['case']} {' '.join(r['kiln']['frozen'])}\n" for r in results
                         if r["suite"] == s and r["kiln"]["ok"] and r["kiln"].get("frozen"))
    table = summarize(results, args.suites)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    passed = sum(r["kiln"]["ok"] for r in results)
    failed = sum(not r["kiln"]["ok"] and r["ort"]["ok"] for r in results)
    print(f"(onnxruntime fails {sum(not r['ort']['ok'] for r in results)} of "
          f"{len(results)} cases; Kiln passes "
          f"{sum(r['kiln']['ok'] and not r['ort']['ok'] for r in results)} of those)")
    status = 0
    if args.expect_pass:
        with open(args.expect_pass) as f:
            want = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        # Every shape-deciding input stays a run-time input: a listed case that passes only
        # with inputs frozen has regressed too.
        bad = sorted(r["case"] for r in results if r["case"] in want
                     and (not r["kiln"]["ok"] or r["kiln"].get("frozen")))
        for c in bad:
            r = next(r for r in results if r["case"] == c)
            err = r["kiln"].get("error") or f"passes only with {r['kiln']['frozen']} frozen"
            print(f"REGRESSION {c}: {err}")
        status = 1 if bad else 0
    print(f"{passed} passed, {failed} failed")
    return status


if __name__ == "__main__":
    sys.exit(main())
