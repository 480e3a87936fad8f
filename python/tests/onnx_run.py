"""Running an ONNX model through Kiln in the ONNX operator tests."""

import kiln
from kiln.graph_executor import GraphModule


def run_kiln(model, feeds, target="llvm"):
    """Kiln's outputs (numpy arrays, one per graph output) of `model` compiled for `target` and
    run on `feeds` (input name -> array; their shapes are the inputs' static shapes)."""
    shapes = {k: v.shape for k, v in feeds.items()}
    gm = GraphModule(kiln.onnx.compile(model, shapes, target=target)["default"](kiln.cpu()))
    for k, v in feeds.items():
        gm.set_input(k, v)
    gm.run()
    return [gm.get_output(i).numpy() for i in range(len(model.graph.output))]
