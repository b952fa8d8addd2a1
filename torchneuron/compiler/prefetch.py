"""Warm starts load their executables while AOTAutograd traces (a background thread).

A warm start's executable keys are known only once AOTAutograd has traced the graph
(graph_key.py keys the AOT graph), and XLA's deserialization of MiniLM's executable
(~50 ms: three parses of the optimized HLO module) was then most of the backend's
time. At the backend's entry, a hint key of Dynamo's graph (node names and targets,
input specs, model name, the 64-bit switch) finds the executable keys its last compile
used (``<hint>.prefetch`` in the cache folder, checksummed like the other entries) and
cache.prefetch() starts loading them; AOTAutograd's tracing (~0.7 s for MiniLM) runs
meanwhile, as XLA releases the GIL. The hint decides nothing: compile_graph looks its
executable up by its own key and takes a loaded one only under that key, so a stale or
colliding hint costs a wasted load, never a wrong executable.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
import time

import torch

from . import cache, config

_lock = threading.Lock()


def _path(hint: str) -> str:
    return cache.entry_path(hint)[: -len(".neff")] + ".prefetch"


def hint_key(gm: torch.fx.GraphModule, example_inputs, model_name: str) -> str:
    from .. import _C
    from .graph_key import _target

    h = hashlib.sha256(f"{model_name}\nnarrow64={int(bool(_C._narrow_64bit()))}\n".encode())
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            h.update(f"{tuple(x.shape)}{x.dtype}{x.requires_grad};".encode())
        else:
            h.update(f"{type(x).__name__};".encode())
    for n in gm.graph.nodes:
        h.update(f"{n.op} {n.name} {_target(n.target)}\n".encode())  # no addresses
    h.update(str(torch.is_grad_enabled()).encode())
    return h.hexdigest()


def _read(hint: str) -> list[str]:
    try:
        with open(_path(hint), "rb") as f:
            payload = cache.decode(f.read())
        keys = pickle.loads(payload) if payload is not None else []
    except Exception:  # missing or unreadable: no hint, nothing prefetched
        return []
    return (
        [k for k in keys if isinstance(k, str) and len(k) == 64] if isinstance(keys, list) else []
    )


class Hint:
    """The executable keys of one Dynamo graph: prefetched at creation, extended (and
    stored) as its graphs compile. ``setup_us``: what creating it cost (reported in the
    first graph's fx_passes_us, as the user waited for it)."""

    def __init__(self, gm, example_inputs, model_name: str):
        # imported and started before the clock starts, as compile_graph does
        from . import graph_compiler, neuron_cc

        neuron_cc.start()
        t0 = time.perf_counter()
        self.key = hint_key(gm, example_inputs, model_name)
        self.keys: list[str] = []  # what this process's compiles used (stored)
        stored = self._stored = _read(self.key)
        if stored:
            try:
                opts = graph_compiler.compiler_options("prefetch")
            except Exception:  # bad flags: compile_graph reports them
                opts = None
            if opts is not None:
                for k in stored:
                    cache.prefetch(
                        k, lambda b, o=opts: neuron_cc.NeuronExecutable.deserialize(b, o)
                    )
        self.setup_us = (time.perf_counter() - t0) * 1e6

    def take_setup_us(self) -> float:
        us, self.setup_us = self.setup_us, 0.0
        return us

    def note(self, exe_key: str) -> None:
        """Records that this graph uses ``exe_key``. The stored list becomes what this
        process used, so keys of an older version of the graph drop out."""
        if exe_key not in self._stored:  # the stored keys are of another graph version
            cache.discard_prefetch(self._stored)
        with _lock:
            if exe_key in self.keys or config.neff_cache_disabled():
                return
            self.keys.append(exe_key)
            keys = list(self.keys)
            if self._stored[: len(keys)] == keys:
                return  # a warm start writes nothing
        path = _path(self.key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            cache._write_atomic(path, cache.encode(pickle.dumps(keys)))
        except OSError as e:  # a hint only: the next warm start loads without it
            cache.warn_unwritable(path, e)


def start(gm, example_inputs, model_name: str) -> Hint | None:
    """The hint of Dynamo's graph ``gm``, its executables loading; None with the cache off."""
    if config.neff_cache_disabled():
        return None
    try:
        return Hint(gm, example_inputs, model_name)
    except Exception:  # an optimization only: never a reason for a compile to fail
        return None
