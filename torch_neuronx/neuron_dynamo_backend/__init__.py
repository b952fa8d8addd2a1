"""``torch_neuronx.neuron_dynamo_backend``: the torch.compile backend ``neuron``
(torchneuron/compiler). ``set_model_name`` names the graphs, metrics and artifacts of
the compiles that follow (as the ``model_name`` option does); the artifacts of a graph
go to ``TORCH_NEURONX_DEBUG_DIR`` (docs/compile.md). The MLIR I/O helpers of
TorchNeuron are not emulated (the debug directory holds the same files)."""

from __future__ import annotations

import torch

from torchneuron.compiler.backend import neuron_backend
from torchneuron.compiler.config import model_name as _model_name
from torchneuron.compiler.config import set_model_name
from torchneuron.compiler.errors import NeuronCompileError
from torchneuron.device_module import get_dynamo_metrics, reset_dynamo_metrics

from .._not_emulated import function as _function

# A graph that fails in the compile path (FX passes, lowering, the compiler).
NEFFCompilationError = NeuronCompileError


class NEFFExecutionError(RuntimeError):
    """TorchNeuron's error of a failed NEFF run. torchneuron reports a failed compiled
    kernel as a RuntimeError naming the graph at the next sync point; it is not this
    class."""


def get_model_name() -> str:
    """The name compiles without a ``model_name`` option use ("model_default" until set)."""
    return _model_name()


def get_rank() -> int:
    """The distributed rank when a process group exists, else the current NeuronCore."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return torch.neuron.current_device()


def create_neuron_backend():
    """The backend callable (the one registered as "neuron")."""
    return neuron_backend


# TorchNeuron's MLIR I/O helpers: they exist and raise when called.
_IO_WHY = (
    "set TORCH_NEURONX_DEBUG_DIR: each compiled graph's FX graph, raw torch-mlir and "
    "StableHLO are written there"
)
fx_to_mlir_string = _function(__name__ + ".fx_to_mlir_string", _IO_WHY)
load_mlir = _function(__name__ + ".load_mlir", _IO_WHY)
save_fx_as_mlir = _function(__name__ + ".save_fx_as_mlir", _IO_WHY)
save_fx_graph_all_formats = _function(__name__ + ".save_fx_graph_all_formats", _IO_WHY)
save_fx_graph_txt = _function(__name__ + ".save_fx_graph_txt", _IO_WHY)
save_mlir = _function(__name__ + ".save_mlir", _IO_WHY)


__all__ = [
    "NEFFCompilationError",
    "NEFFExecutionError",
    "create_neuron_backend",
    "get_dynamo_metrics",
    "get_model_name",
    "get_rank",
    "neuron_backend",
    "reset_dynamo_metrics",
    "set_model_name",
]
