"""Tuning: schedule choices measured per layer on this machine's CPU (``kiln tune`` from
Python, in the role of TVM's auto-tuning).

- :func:`tune`: measures the distinct heavy layers of an ONNX model (convolutions and
  products by constant weights, with their fused epilogues) knob by knob (register tiles,
  the kernel of a 1x1 convolution, the input channels a pass) and writes the best into a
  tuning-records file; layers already in the file are skipped, so an interrupted tuning
  resumes, and records are keyed by the CPU they were measured on.
- :func:`kiln.onnx.compile` with ``tuning_records=`` builds with them (layers the file does
  not hold, and records of another CPU, take the heuristics)::

      kiln.tune.tune("model.onnx", "model.tuning.json")
      lib = kiln.onnx.compile("model.onnx", tuning_records="model.tuning.json")
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from . import core
from .onnx import _model_bytes, _shape_map

#: The global function that tunes a serialized ONNX model.
TUNE = "tune.Tune"


def tune(
    model: Any,
    records: str | os.PathLike,
    target: str = "llvm -mcpu=native",
    shape_dict: Mapping[str, Sequence[int]] | None = None,
    runs: int = 5,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[dict]:
    """Tune ``model`` (a path, bytes or ``onnx.ModelProto``) for ``target`` on this machine,
    extending the tuning-records file ``records`` (created when missing; a file of another
    CPU is refused). Each candidate is timed as the median of ``runs`` runs.
    ``progress(done, total, layer)`` is called before each layer and once at the end (with
    ``layer`` empty). Returns one dict per layer tuned now: ``signature``, ``heuristic_ms``,
    ``ms`` (the best time; the heuristic's when nothing beat it by 3%) and ``records`` (the
    knobs kept, by workload)."""
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ValueError(f"runs must be a positive int, got {runs!r}")
    fn = None if progress is None else core.convert(progress)
    res = core.call_global(TUNE, _model_bytes(model), os.fspath(records), target,
                           _shape_map(shape_dict), runs, fn)
    out = []
    for r in res:
        out.append({
            "signature": r["signature"],
            "heuristic_ms": float(r["heuristic_ms"]),
            "ms": float(r["ms"]),
            "records": {str(k): {str(n): int(v) for n, v in knobs.items()}
                        for k, knobs in r["records"].items()},
        })
    return out
