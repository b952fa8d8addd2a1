"""Per-graph debug artifacts: TORCH_NEURONX_DEBUG_DIR with TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1.

``<debug dir>/run_<YYYYmmdd-HHMMSS>_<pid>/<graph_name>/`` (one run folder per process,
so a second process with the same model name does not overwrite the first's files):
``fx_graph.txt`` (the graph lowered, after the FX passes), ``torch_mlir_raw.mlir``
(torch-mlir's output), ``stablehlo.mlir`` (what the compiler got), ``graph.neff`` (the
executable's bytes) and ``compiler.txt`` (the compiler invocation: engine, versions,
options, flags, cache key and source). The graph's folder name is its name made safe
for a path (``folder_name``): nothing is written outside the debug dir.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time

from . import config

_lock = threading.Lock()
_run: dict = {}  # (debug dir, pid) -> this process's run folder in it


def enabled() -> bool:
    return config.preserve_artifacts() and config.debug_dir() is not None


def folder_name(graph_name: str) -> str:
    """``graph_name`` as one path component: characters other than letters, digits,
    ``.``, ``_`` and ``-`` become ``_``, runs of dots too (no ``..``), a leading dot
    too (no hidden folder); at most 200 characters. ``"../x/y_0_inference_0"`` ->
    ``"__x_y_0_inference_0"``."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", graph_name)
    s = re.sub(r"\.{2,}", "_", s)
    s = re.sub(r"^\.", "_", s)
    return s[:200] or "_"


def run_dir() -> str | None:
    """This process's run folder under TORCH_NEURONX_DEBUG_DIR (created on first use;
    None when artifacts are off)."""
    if not enabled():
        return None
    base = os.path.abspath(config.debug_dir())
    with _lock:
        d = _run.get((base, os.getpid()))  # a forked child gets its own
        if d is None:
            d = os.path.join(base, f"run_{time.strftime('%Y%m%d-%H%M%S')}_{os.getpid()}")
            os.makedirs(d, exist_ok=True)
            _run[(base, os.getpid())] = d
    return d


def save(graph_name: str, files: dict[str, str | bytes]) -> str | None:
    """Writes ``files`` (name -> text or bytes) under the graph's folder; returns it."""
    root = run_dir()
    if root is None:
        return None
    d = os.path.join(root, folder_name(graph_name))
    if os.path.commonpath([os.path.realpath(d), os.path.realpath(root)]) != os.path.realpath(root):
        raise ValueError(f"debug artifacts of graph {graph_name!r} would leave {root}")
    os.makedirs(d, exist_ok=True)
    for name, data in files.items():
        mode = "wb" if isinstance(data, bytes) else "w"
        with open(os.path.join(d, name), mode) as f:
            f.write(data)
    return d


def compiler_txt(info: dict) -> str:
    return json.dumps(info, indent=2, sort_keys=True, default=str) + "\n"
