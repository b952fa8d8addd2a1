"""``torch_neuronx.distributed.utils``: TorchNeuron's helpers of its collectives.
``get_free_port`` and ``get_reduce_type`` work; the lowering helpers raise
NotImplementedError when called (collectives run on torchneuron's c10d backend)."""

from __future__ import annotations

import socket

import torch.distributed as dist

from .._not_emulated import function

_P = __name__ + "."
_WHY = "TorchNeuron's internal collective lowerings (torchneuron's collectives ride on Gloo)"


def get_free_port() -> str:
    """A TCP port free on this host now, as a str (for MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return str(s.getsockname()[1])


def get_reduce_type(reduce_op) -> str:
    """The name of a ``dist.ReduceOp`` ("SUM", ..., "PREMUL_SUM"); ValueError otherwise."""
    for name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG", "PREMUL_SUM"):
        if reduce_op == getattr(dist.ReduceOp, name):
            return name
    raise ValueError(f"Unsupported reduce operation: {reduce_op}")


create_global_replica_group = function(_P + "create_global_replica_group", _WHY)
parse_and_update_inputs = function(_P + "parse_and_update_inputs", _WHY)
get_reduce_scatter_inputs_outputs = function(_P + "get_reduce_scatter_inputs_outputs", _WHY)
reconstruct_reduce_scatter_output = function(_P + "reconstruct_reduce_scatter_output", _WHY)
