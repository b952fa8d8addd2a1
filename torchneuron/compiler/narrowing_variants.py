"""A compiled graph that follows the 64-bit narrowing switch at call time, as eager does.

Eager reads ``torchneuron._C._narrow_64bit()`` (TORCHNEURON_NARROW_64BIT,
``_set_narrow_64bit``) at every op; Dynamo has no guard on it, so the graph it keeps
for a function was the one compiled under the setting of the first call: after the
switch changed, int64 ``x + 1`` at 2**31 - 1 still wrapped compiled where eager gave
full width. The callable the backend returns reads the switch at each call and runs
the executable built for the current value, compiling the other one on first use (the
graph index is keyed on the switch, so a warm start finds both). A graph with no
float64/int64 value is the same either way and is built once.
"""

from __future__ import annotations

import threading

import torch

from .. import _C
from .passes.policy.narrow_64bit import compiling_with

_WIDE = (torch.float64, torch.int64)


def _has_64bit_values(gm: torch.fx.GraphModule) -> bool:
    for n in gm.graph.nodes:
        vals = n.meta.get("val")
        for v in vals if isinstance(vals, (list, tuple)) else (vals,):
            if isinstance(v, torch.Tensor) and v.dtype in _WIDE:
                return True
    return False


class NarrowingVariants:
    """``build(reason) -> run(args)`` compiles the graph under the current switch; the
    first build happens now (compile time), the other on the first call that needs it."""

    def __init__(self, gm: torch.fx.GraphModule, build):
        self._build = build
        self._lock = threading.Lock()
        self._follows = _has_64bit_values(gm)
        first = bool(_C._narrow_64bit())
        with compiling_with(first):
            self._runs = {first: build(None)}

    def current(self):
        """The run built for the switch's current value, or None (not built yet)."""
        return self._runs.get(bool(_C._narrow_64bit()) if self._follows else next(iter(self._runs)))

    def __call__(self, args):
        key = bool(_C._narrow_64bit()) if self._follows else next(iter(self._runs))
        run = self._runs.get(key)
        if run is None:
            with self._lock:
                run = self._runs.get(key)
                if run is None:
                    with compiling_with(key):
                        run = self._build(
                            "64-bit narrowing switched "
                            + ("on" if key else "off")
                            + " since the last compile"
                        )
                    self._runs[key] = run
        return run(args)
