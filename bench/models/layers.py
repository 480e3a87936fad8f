#!/usr/bin/env python3
"""Per-layer table of one benchmark model: each distinct heavy layer (Conv, ConvTranspose,
MatMul, Gemm) cut out as a one-node model with the network's shapes and weights, compiled by
`kiln compile` and timed beside onnxruntime at one thread, in GFLOP/s against the core's FMA
peak measured in the same run (bench/fma_peak/peak.c, built with `cc -O2 -march=native`).

    layers.py MODEL [--kiln-target T] [--hide-avx512] [--workdir build/bench_models] [--reps 15]

MODEL is a name bench/models knows (its .onnx is made if missing). Prints one row per distinct
layer signature: its count in the network, shapes, MFLOP, Kiln and onnxruntime milliseconds
(median of --reps), Kiln GFLOP/s and its share of the peak, and Kiln / ORT time.
--hide-avx512 runs AVX2 code on an AVX-512 host as bench_models.py's option does (onnxruntime's
AVX2 kernels; Kiln for `llvm -mcpu=native -mattr=-avx512f` unless --kiln-target says otherwise;
the peak with `-mno-avx512f`).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
HEAVY = {"Conv", "ConvTranspose", "MatMul", "Gemm"}

from bench_models import ensure_models, hide_avx512, median_ms, without_preload  # noqa: E402


def fma_peak(flags=()):
    exe = os.path.join(tempfile.mkdtemp(), "peak")
    subprocess.run(["cc", "-O2", "-march=native", *flags, "-o", exe,
                    os.path.join(ROOT, "bench", "fma_peak", "peak.c")], check=True,
                   env=without_preload())
    out = subprocess.run([exe], check=True, capture_output=True, text=True,
                         env=without_preload()).stdout
    return float(out.split("fma peak:")[1].split()[0]), out.strip()


def flops(node, shapes, inits):
    """Multiply-adds x 2 of a heavy node from its input/output shapes."""
    out = shapes[node.output[0]]
    if node.op_type in ("MatMul", "Gemm"):
        a = shapes[node.input[0]]
        return 2 * int(np.prod(out)) * a[-1] if node.op_type == "MatMul" or not any(
            at.name == "transA" and at.i for at in node.attribute) else 2 * int(np.prod(out)) * a[0]
    w = shapes[node.input[1]]
    if node.op_type == "Conv":
        return 2 * int(np.prod(out)) * int(np.prod(w[1:]))
    x = shapes[node.input[0]]  # ConvTranspose: every input element meets C/g x O/g x K taps
    return 2 * int(np.prod(x)) * int(np.prod(w[1:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench_models"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--kiln-target", default=None, help="Kiln's --target (default its own)")
    ap.add_argument("--hide-avx512", action="store_true",
                    help="AVX2 code for every engine on an AVX-512 host (see the module docs)")
    args = ap.parse_args()
    import onnx
    import onnxruntime as ort
    from onnx import helper, shape_inference

    peak_flags = ()
    if args.hide_avx512:
        args.kiln_target = hide_avx512(args.workdir, args.kiln_target)
        peak_flags = ("-mno-avx512f",)
    target = ["--target", args.kiln_target] if args.kiln_target else []
    # One thread, as onnxruntime here: the runtime's pool reads this when it starts.
    os.environ["KILN_NUM_THREADS"] = "1"
    import kiln
    from kiln.graph_executor import GraphModule

    os.makedirs(args.workdir, exist_ok=True)
    ensure_models([args.model], args.workdir)
    model = onnx.load(os.path.join(args.workdir, f"{args.model}.onnx"))
    # Shapeless entries (the zoo's value_info, and its initializers listed as inputs) would
    # stop inference.
    del model.graph.value_info[:]
    names = {t.name for t in model.graph.initializer}
    kept = [i for i in model.graph.input if i.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.ir_version = max(model.ir_version, 4)
    model = shape_inference.infer_shapes(model)
    g = model.graph
    shapes = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        # A value whose shape inference left unknown (no shape, or a symbolic dimension) is
        # not cut out: its layer could not be built with the network's shapes.
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = [d.dim_value for d in tt.shape.dim]
    inits = {t.name: t for t in g.initializer}
    for t in g.initializer:
        shapes[t.name] = list(t.dims)
    peak, peak_line = fma_peak(peak_flags)
    print(peak_line)
    groups = {}
    for node in g.node:
        if node.op_type not in HEAVY or node.output[0] not in shapes:
            continue
        if any(i and i not in shapes for i in node.input):
            continue
        ins = [shapes[i] if i else None for i in node.input]
        attrs = tuple(sorted((a.name, str(helper.get_attribute_value(a))) for a in node.attribute))
        key = (node.op_type, str(ins), attrs)
        groups.setdefault(key, []).append(node)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    rng = np.random.default_rng(0)
    rows = []
    for k, ((op, ins, _), nodes) in enumerate(groups.items()):
        node = nodes[0]
        runtime = [i for i in node.input if i and i not in inits]
        consts = [inits[i] for i in node.input if i in inits]
        vi = [helper.make_tensor_value_info(i, onnx.TensorProto.FLOAT, shapes[i]) for i in runtime]
        out = helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT,
                                            shapes[node.output[0]])
        one = helper.make_model(helper.make_graph([node], f"layer{k}", vi, [out], consts),
                                opset_imports=model.opset_import)
        one.ir_version = 8
        path = os.path.join(args.workdir, f"{args.model}.layer{k}.onnx")
        onnx.save(one, path)
        feeds = {i: rng.standard_normal(shapes[i]).astype(np.float32) for i in runtime}
        lib = path[:-5] + ".so"
        subprocess.run([os.path.join(ROOT, "target", "release", "kiln"), "compile", path, "-o",
                        lib, *target], check=True, stdout=subprocess.DEVNULL, env=without_preload())
        gm = GraphModule(kiln.load_module(lib)["default"](kiln.cpu()))
        for i, v in feeds.items():
            gm.set_input(i, v)
        gm.run()
        t_kiln = gm.benchmark(kiln.cpu(), repeat=args.reps, number=1).median
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        ref = sess.run(None, feeds)[0]
        err = float(np.abs(gm.get_output(0).numpy() - ref).max() / max(np.abs(ref).max(), 1e-30))
        t_ort = median_ms(lambda: sess.run(None, feeds), 1, args.reps, 3) / 1e3
        f = flops(node, shapes, inits)
        rows.append((op, len(nodes), ins, shapes[node.output[0]], f / 1e6, t_kiln * 1e3,
                     t_ort * 1e3, f / t_kiln / 1e9, err))
    print(f"\n{args.model}: heavy layers, one thread; FMA peak {peak:.1f} GFLOP/s\n")
    print("| op | count | inputs | output | MFLOP | Kiln ms | ORT ms | Kiln GFLOP/s | % of peak |"
          " Kiln / ORT | max rel error |")
    print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for op, n, ins, out, mf, tk, to, gf, err in sorted(rows, key=lambda r: -r[1] * r[5]):
        print(f"| {op} | {n} | {ins} | {out} | {mf:.1f} | {tk:.3f} | {to:.3f} | {gf:.1f} |"
              f" {100 * gf / peak:.0f}% | {tk / to:.2f} | {err:.1e} |")


if __name__ == "__main__":
    main()
