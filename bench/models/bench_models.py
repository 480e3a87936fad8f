#!/usr/bin/env python3
"""Whole-model latency at one thread: Kiln beside onnxruntime and Apache TVM 0.27, same run.

    bench_models.py [--models NAME ...] [--skip-tvm] [--kiln-target T] [--hide-avx512] [--repeat 7] [--tvm-repeat 3] [--workdir D]

Models: model-zoo graphs with seeded random weights (tests/zoo/make_zoo.py), the transformer
encoder layer (tests/zoo/make_transformer.py) and networks of the architectures users deploy
(tests/zoo/make_arch.py: a YOLO-style detector, a DBNet-style text detector, an SVTR-style
recognizer with a 6625-class classifier, a BERT-style encoder, a MobileNetV2, a ViT-Tiny-style
classifier of 197 tokens); default all of them. For each:

- Kiln: `target/release/kiln compile` (wall time of the command = compile time), then in this
  process (KILN_LIBRARY_PATH=target/release, KILN_NUM_THREADS=1): `kiln.load_module`,
  GraphModule, the input and the last output bound once to numpy arrays without copies
  (`set_input_zero_copy`, `set_output_zero_copy`: onnxruntime's `run` also reads the caller's
  input array and writes the output array it returns); one run is `run`;
- onnxruntime: intra_op_num_threads = inter_op_num_threads = 1;
- Kiln, its tuned library (--tune) and onnxruntime timed in turns: 2 warm-up runs each, then
  --repeat rounds, each timing --number runs of every engine (the order alternating between
  rounds), so that the host's load drifting during a run weighs on every engine alike; the
  median round of each;
- TVM 0.27 (unless --skip-tvm), in another child process (its libtvm_ffi exports the same C
  symbols as Kiln's library) with TVM_NUM_THREADS=1: `from_onnx`, `tvm.compile` with
  `relax.get_default_pipeline` for llvm -mcpu=<the host CPU> (untuned: no MetaSchedule), the Relax VM;
  one warm-up run and the median of --tvm-repeat single runs (untuned TVM is slow).

--hide-avx512 compares AVX2 code with AVX2 code on an AVX-512 host: this process runs with
bench/isa/hide_avx512.c preloaded, which clears the AVX-512 bits of CPUID (through the kernel's
CPUID faulting), so onnxruntime's MLAS (and numpy's OpenBLAS) take their AVX2 kernels; Kiln
compiles for `llvm -mcpu=native -mattr=-avx512f` unless --kiln-target says otherwise, and TVM for
its -mcpu with `-avx512f`. `kiln compile` and `kiln tune` run without the preload.

Every engine's last output (the logits, for the zoo models) is compared with onnxruntime's
(after dividing by the reference's largest magnitude); a mismatch is printed beside the figures. Prints one table with
milliseconds, compile seconds and the ratios Kiln/ORT and Kiln/TVM (below 1: Kiln is faster).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = ["resnet50", "squeezenet", "shufflenet", "inception_v1"]
TRANSFORMERS = ["transformer_2d", "transformer"]
ARCH = ["yolo", "dbnet", "svtr", "bert", "mobilenet", "vit"]
DEFAULT = ZOO + TRANSFORMERS + ARCH


def ensure_models(names, workdir):
    """make_zoo.py / make_transformer.py outputs for ``names`` in ``workdir`` (kept between runs:
    the scripts are deterministic)."""
    for script, group in (("make_zoo.py", ZOO), ("make_transformer.py", TRANSFORMERS),
                          ("make_arch.py", ARCH)):
        missing = [n for n in names if n in group
                   and not os.path.exists(os.path.join(workdir, f"{n}.expected_0.npy"))]
        if missing:
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "zoo", script), workdir,
                            *missing], check=True, stdout=subprocess.DEVNULL,
                           env=without_preload())
    for n in names:
        if not os.path.exists(os.path.join(workdir, f"{n}.onnx")):
            raise SystemExit(f"unknown model {n!r} (known: {', '.join(DEFAULT)})")


def input_of(path):
    import onnx

    model = onnx.load(path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    return next(i.name for i in model.graph.input if i.name not in inits)


def scaled_error(got, ref):
    """Max |got - ref| / max |ref|, or None when the shapes differ."""
    got = np.asarray(got).reshape(-1) if np.size(got) == np.size(ref) else None
    if got is None:
        return None
    scale = max(float(np.abs(ref).max()), 1e-30)
    return float(np.abs(got / scale - np.asarray(ref).reshape(-1) / scale).max())


def median_ms(fn, number, repeat, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) * 1e3 / number)
    return statistics.median(times)


def paired_ms(fns, number, repeat, warmup):
    """Median milliseconds per run of each of ``fns`` (name -> callable), timed in turns: every
    round times ``number`` runs of each, the order reversed every other round."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeat):
        for name in names if r % 2 == 0 else names[::-1]:
            t = time.perf_counter()
            for _ in range(number):
                fns[name]()
            times[name].append((time.perf_counter() - t) * 1e3 / number)
    return {name: statistics.median(v) for name, v in times.items()}


def kiln_runner(lib_path, x):
    """A call running Kiln's library ``lib_path`` on ``x`` and returning its last output."""
    import kiln
    from kiln.graph_executor import GraphModule

    gm = GraphModule(kiln.load_module(lib_path)["default"](kiln.cpu()))
    last = gm.get_num_outputs() - 1
    gm.set_input_zero_copy(0, aligned(x))
    out = gm.get_output(last).numpy()
    out = aligned(out)
    gm.set_output_zero_copy(last, out)

    def run():
        gm.run()
        return out

    return run


def aligned(x, alignment=64):
    """A copy of ``x`` whose data starts on an ``alignment``-byte boundary."""
    buf = np.empty(x.nbytes + alignment, dtype=np.uint8)
    start = -buf.ctypes.data % alignment
    out = buf[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


# ---- TVM (in a child process) ------------------------------------------------------------------


def tvm_worker(onnx_path, x_path, out_path, repeat, mcpu):
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    x = np.load(x_path)
    t0 = time.perf_counter()
    model = onnx.load(onnx_path)
    mod = from_onnx(model, shape_dict={input_of(onnx_path): list(x.shape)})
    if mcpu == "native":
        mcpu = tvm.target.codegen.llvm_get_system_cpu()
    spec = {"kind": "llvm", "mcpu": mcpu}
    if os.environ.get(HIDDEN):
        spec["mattr"] = ["-avx512f"]
    target = tvm.target.Target(spec)
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    compile_s = time.perf_counter() - t0
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    xt = tvm.runtime.tensor(x, dev)
    out = vm["main"](xt)
    last = out if hasattr(out, "numpy") else out[len(out) - 1]
    np.save(out_path, last.numpy())
    ms = median_ms(lambda: vm["main"](xt), 1, repeat, 0)
    return {"ms": ms, "compile_s": compile_s}


HIDDEN = "KILN_BENCH_AVX512_HIDDEN"


def without_preload():
    """This process's environment without the AVX-512-hiding preload, for child processes
    (`kiln`, compilers and LLVM install their own SIGSEGV handlers, which CPUID faulting
    needs)."""
    env = dict(os.environ)
    if env.get(HIDDEN):
        env.pop("LD_PRELOAD", None)
    return env


def hide_avx512(workdir, kiln_target):
    """AVX-512 hidden from this process (see the module docs): the first call runs the script
    this process runs again with bench/isa/hide_avx512.c preloaded; in that run, Kiln's target
    (`kiln_target`, or this host without AVX-512). Stops when the host cannot hide it."""
    if not os.environ.get(HIDDEN):
        os.makedirs(workdir, exist_ok=True)
        src = os.path.join(ROOT, "bench", "isa", "hide_avx512.c")
        lib = os.path.join(workdir, "hide_avx512.so")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-o", lib, src],
                       check=True)
        env = dict(os.environ, LD_PRELOAD=lib, **{HIDDEN: "1"})
        os.execve(sys.executable, [sys.executable, os.path.abspath(sys.argv[0]), *sys.argv[1:]],
                  env)
    if os.environ.get("KILN_HIDE_AVX512_FAILED"):
        raise SystemExit("--hide-avx512: " + os.environ["KILN_HIDE_AVX512_FAILED"])
    return kiln_target or "llvm -mcpu=native -mattr=-avx512f"


def child(kind, *args):
    """Runs a worker in a child process; its result dict, or {"error": text}."""
    env = dict(without_preload(), TVM_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), f"--{kind}-worker",
                        *map(str, args)], capture_output=True, text=True, env=env)
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return {"error": tail[:200]}
    return json.loads(lines[-1][len("RESULT "):])


# ---- the run -----------------------------------------------------------------------------------


def bench_model(name, args):
    import onnxruntime as ort

    d = args.workdir
    onnx_path = os.path.join(d, f"{name}.onnx")
    x_path = os.path.join(d, f"{name}.input.npy")
    x = np.load(x_path)
    row = {"model": name}

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    feed = {input_of(onnx_path): x}
    ref = sess.run(None, feed)[-1]
    engines = {"ort_ms": lambda: sess.run(None, feed)}

    target = ["--target", args.kiln_target] if args.kiln_target else []
    suffix = "".join(c if c.isalnum() else "_" for c in args.kiln_target or "")
    lib = os.path.join(d, f"{name}.kiln{'.' + suffix if suffix else ''}.so")
    t = time.perf_counter()
    p = subprocess.run([args.kiln, "compile", onnx_path, "-o", lib, *target], capture_output=True,
                       text=True, env=without_preload())
    row["kiln_compile_s"] = time.perf_counter() - t
    if p.returncode != 0:
        row["kiln_error"] = (p.stderr.strip().splitlines() or ["?"])[-1][:200]
    else:
        run = kiln_runner(lib, x)
        row["kiln_err"] = scaled_error(run(), ref)
        engines["kiln_ms"] = run

    if args.tune:
        # `kiln tune` (one thread, resumable records per model), then the tuned library.
        records = os.path.join(d, f"{name}.tuning.json")
        t = time.perf_counter()
        env = dict(without_preload(), KILN_NUM_THREADS="1")
        p = subprocess.run([args.kiln, "tune", onnx_path, "-r", records], capture_output=True,
                           text=True, env=env)
        row["tune_s"] = time.perf_counter() - t
        tuned = os.path.join(d, f"{name}.kiln_tuned.so")
        if p.returncode == 0:
            p = subprocess.run([args.kiln, "compile", onnx_path, "-o", tuned, "--tuning-records",
                                records, *target], capture_output=True, text=True,
                               env=without_preload())
        if p.returncode != 0:
            row["kiln_error"] = "tuning: " + (p.stderr.strip().splitlines() or ["?"])[-1][:200]
        else:
            run = kiln_runner(tuned, x)
            row["kiln_err"] = max(row.get("kiln_err") or 0.0, scaled_error(run(), ref))
            engines["tuned_ms"] = run

    row.update(paired_ms(engines, args.number, args.repeat, 2))

    if not args.skip_tvm:
        out = os.path.join(d, f"{name}.tvm_out.npy")
        r = child("tvm", onnx_path, x_path, out, args.tvm_repeat, args.tvm_mcpu)
        if "error" in r:
            row["tvm_error"] = r["error"]
        else:
            row["tvm_ms"] = r["ms"]
            row["tvm_compile_s"] = r["compile_s"]
            row["tvm_err"] = scaled_error(np.load(out), ref)
    return row


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def print_table(rows):
    print()
    print("| model | Kiln ms | ORT ms | TVM ms | Kiln / ORT | Kiln / TVM | Kiln compile s "
          "| TVM compile s | max scaled error Kiln / TVM |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        k, o, t = r.get("kiln_ms"), r.get("ort_ms"), r.get("tvm_ms")
        kc = r.get("kiln_compile_s") if k is not None else None
        print("| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} |".format(
            r["model"], fmt(k, ".2f"), fmt(o, ".2f"), fmt(t, ".1f"),
            fmt(k / o if k and o else None, ".2f"), fmt(k / t if k and t else None, ".3f"),
            fmt(kc, ".2f"), fmt(r.get("tvm_compile_s"), ".1f"),
            fmt(r.get("kiln_err"), ".1e"), fmt(r.get("tvm_err"), ".1e")))
    if any("tuned_ms" in r for r in rows):
        print()
        print("| model | Kiln ms | Kiln tuned ms | ORT ms | tuned / ORT | tuning s |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            k, tu, o = r.get("kiln_ms"), r.get("tuned_ms"), r.get("ort_ms")
            print("| {} | {} | {} | {} | {} | {} |".format(
                r["model"], fmt(k, ".2f"), fmt(tu, ".2f"), fmt(o, ".2f"),
                fmt(tu / o if tu and o else None, ".2f"), fmt(r.get("tune_s"), ".0f")))
    for r in rows:
        for what in ("kiln_error", "tvm_error"):
            if what in r:
                print(f"{r['model']}: {what.split('_')[0]} failed: {r[what]}")
        for what in ("kiln_err", "tvm_err"):
            if r.get(what) is not None and r[what] > 1e-4:
                print(f"{r['model']}: {what.split('_')[0]} output differs from onnxruntime "
                      f"(max scaled error {r[what]:.2e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=DEFAULT)
    ap.add_argument("--skip-tvm", action="store_true")
    ap.add_argument("--tune", action="store_true",
                    help="also `kiln tune` each model (records kept in the workdir) and time "
                         "the tuned library")
    ap.add_argument("--repeat", type=int, default=7, help="measurements (Kiln, ORT); >= 5")
    ap.add_argument("--number", type=int, default=5, help="runs per measurement (Kiln, ORT)")
    ap.add_argument("--tvm-repeat", type=int, default=3, help="single runs of TVM")
    ap.add_argument("--tvm-mcpu", default="native",
                    help="TVM's -mcpu; native: the host CPU as TVM's LLVM names it")
    ap.add_argument("--kiln-target", default=None,
                    help="Kiln's --target (default Kiln's own: llvm -mcpu=native); e.g. "
                    "'llvm -mcpu=znver3' runs AVX2 code on an AVX-512 host")
    ap.add_argument("--hide-avx512", action="store_true",
                    help="onnxruntime and numpy on their AVX2 kernels, Kiln and TVM on AVX2 code, "
                    "on an AVX-512 host (see the module docs)")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench_models"))
    ap.add_argument("--kiln", default=os.path.join(ROOT, "target", "release", "kiln"))
    ap.add_argument("--tvm-worker", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.tvm_worker:
        onnx_path, x, out, repeat, mcpu = args.tvm_worker
        print("RESULT " + json.dumps(tvm_worker(onnx_path, x, out, int(repeat), mcpu)))
        return
    if args.repeat < 5:
        raise SystemExit("--repeat must be at least 5")
    if args.hide_avx512:
        args.kiln_target = hide_avx512(args.workdir, args.kiln_target)
    # Kiln runs in this process, on one thread, from this checkout's runtime and package.
    os.environ.setdefault("KILN_LIBRARY_PATH", os.path.join(ROOT, "target", "release"))
    os.environ["KILN_NUM_THREADS"] = "1"
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.makedirs(args.workdir, exist_ok=True)
    ensure_models(args.models, args.workdir)
    hidden = "AVX-512 hidden from CPUID (onnxruntime, TVM on AVX2); " if os.environ.get(HIDDEN) else ""
    print(f"load before: {os.getloadavg()[0]:.2f}; Kiln {args.kiln} "
          f"(target {args.kiln_target or 'llvm -mcpu=native'}), one thread everywhere; {hidden}"
          f"Kiln/ORT in turns: median of {args.repeat} x {args.number} runs; TVM: median of "
          f"{args.tvm_repeat} runs" + (" (skipped)" if args.skip_tvm else ""))
    rows = []
    for name in args.models:
        row = bench_model(name, args)
        rows.append(row)
        print(f"{name}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                      for k, v in row.items() if k != "model"), flush=True)
    print_table(rows)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
