"""How a lowered graph's executable maps onto the call the backend receives.

The FX passes change a graph's signature (random ops take a key input, scalar inputs
become constants, in-place updates of inputs become outputs, None outputs go);
each records here what it changed, and executable.py follows the record at run time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class GraphPlan:
    """``inputs``: per executable input, ("arg", i) = the call's i-th argument, or
    ("rng_key", None) = a Threefry key drawn from the device's generator at each launch
    (passes/random_ops_to_inputs.py). ``outputs``: per value the call returns, ("out", j) = the
    executable's j-th output, or ("const", v) (None outputs). ``mutations``: (i, j):
    after the run, the call's argument i takes the executable's output j (in place,
    as the eager program mutated it)."""
    n_args: int
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    mutations: list = field(default_factory=list)
    scalar_args: dict = field(default_factory=dict)  # arg index -> value baked in
    # ((eager op name, ops in the graph), ...): added to torch.neuron.narrowing_stats()
    # / full_width_stats() at each launch (passes/narrow_64bit.py)
    narrowed: tuple = ()
    full_width: tuple = ()

    @classmethod
    def identity(cls, gm: torch.fx.GraphModule) -> "GraphPlan":
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        out = next(n for n in gm.graph.nodes if n.op == "output")
        n_out = len(out.args[0]) if isinstance(out.args[0], (tuple, list)) else 1
        return cls(len(phs), [("arg", i) for i in range(len(phs))],
                   [("out", j) for j in range(n_out)])
