"""Per-graph debug artifacts: TORCH_NEURONX_DEBUG_DIR with TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1.

``<debug dir>/<graph_name>/``: ``fx_graph.txt`` (the graph lowered, after the FX
passes), ``torch_mlir_raw.mlir`` (torch-mlir's output), ``stablehlo.mlir`` (what the
compiler got), ``graph.neff`` (the executable's bytes) and ``compiler.txt`` (the
compiler invocation: engine, versions, options, flags, cache key and source).
"""
from __future__ import annotations

import json
import os

from . import config


def enabled() -> bool:
    return config.preserve_artifacts() and config.debug_dir() is not None


def save(graph_name: str, files: dict[str, str | bytes]) -> str | None:
    """Writes ``files`` (name -> text or bytes) under the graph's folder; returns it."""
    if not enabled():
        return None
    d = os.path.join(config.debug_dir(), graph_name)
    os.makedirs(d, exist_ok=True)
    for name, data in files.items():
        mode = "wb" if isinstance(data, bytes) else "w"
        with open(os.path.join(d, name), mode) as f:
            f.write(data)
    return d


def compiler_txt(info: dict) -> str:
    return json.dumps(info, indent=2, sort_keys=True, default=str) + "\n"
