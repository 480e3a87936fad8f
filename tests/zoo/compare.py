#!/usr/bin/env python3
"""Compare Kiln's outputs for a model-zoo library with onnxruntime's stored ones.

    compare.py DIR NAME         runs DIR/NAME.so on DIR/NAME.input.npy through kiln.graph_executor
                                and compares every output with DIR/NAME.expected_K.npy

Outputs are compared after dividing both by the reference's largest magnitude (deep networks with
random weights reach large values), with rtol 1e-4 and atol 1e-5. Exit status 1 on a mismatch.
"""
import os
import sys

import numpy as np

import kiln
from kiln import graph_executor


def main():
    d, name = sys.argv[1], sys.argv[2]
    lib = kiln.load_module(os.path.join(d, f"{name}.so"))
    gm = graph_executor.GraphModule(lib["default"](kiln.cpu()))
    x = np.load(os.path.join(d, f"{name}.input.npy"))
    gm.set_input(0, x)
    gm.run()
    ok = True
    for k in range(gm.get_num_outputs()):
        ref_path = os.path.join(d, f"{name}.expected_{k}.npy")
        if not os.path.exists(ref_path):
            continue
        ref = np.load(ref_path)
        got = gm.get_output(k).numpy()
        if got.shape != ref.shape:
            print(f"{name} output {k}: shape {got.shape} != onnxruntime's {ref.shape}")
            ok = False
            continue
        scale = max(float(np.abs(ref).max()), 1e-30)
        err = np.abs(got / scale - ref / scale)
        bad = err > 1e-5 + 1e-4 * np.abs(ref / scale)
        print(f"{name} output {k}: scale {scale:.3g}, max normalized error {err.max():.3g}, "
              f"{int(bad.sum())} of {bad.size} elements off")
        ok = ok and not bad.any()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
