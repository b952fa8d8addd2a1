"""``torch_neuronx.distributed.ops``: TorchNeuron's collective lowerings (compiled
all_gather/all_reduce/all_to_all/reduce_scatter kernels). Not emulated (collectives
run on torchneuron's c10d backend): the names raise NotImplementedError when used."""

from __future__ import annotations

from ..._not_emulated import cls, function

_P = __name__ + "."
_WHY = (
    "TorchNeuron's internal collective lowerings; use torch.distributed's collectives, "
    "which run on torchneuron's c10d backend"
)

AllGatherOp = cls(_P + "AllGatherOp", _WHY)
AllReduceOp = cls(_P + "AllReduceOp", _WHY)
AllToAllOp = cls(_P + "AllToAllOp", _WHY)
ReduceScatterOp = cls(_P + "ReduceScatterOp", _WHY)
all_gather_op = function(_P + "all_gather_op", _WHY)
all_reduce_op = function(_P + "all_reduce_op", _WHY)
all_to_all_op = function(_P + "all_to_all_op", _WHY)
reduce_scatter_op = function(_P + "reduce_scatter_op", _WHY)
