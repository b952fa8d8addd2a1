"""``torch_neuronx``: TorchNeuron's import name, over torchneuron.

TorchNeuron programs write ``import torch_neuronx`` and call its Python API; Hugging
Face transformers (5.x) and accelerate (1.x) detect TorchNeuron with
``importlib.util.find_spec("torch_neuronx")`` and then use device ``neuron``,
compile backend ``neuron`` and c10d backend ``neuron``. This package gives them the
names of TorchNeuron's public ``torch_neuronx/__init__.py`` with TorchNeuron's
meaning, computed by torchneuron. A name TorchNeuron has that this emulation does
not provide (NKI kernels, NRT traces, the internal op registry) exists (hasattr finds
it) and raises NotImplementedError naming it when called or instantiated.
docs/torch_neuronx.md lists the surface name by name.
"""

from __future__ import annotations

import os as _os
import sys as _sys


def _autoload() -> None:
    """TorchNeuron's ``torch.backends`` entry point; torchneuron's does the work."""


import torchneuron  # noqa: E402,F401  (registers the device, torch.neuron, the backends)
from torchneuron import device_module as neuron  # noqa: E402
from torchneuron import memory  # noqa: E402
from torchneuron.device_module import (  # noqa: E402,F401
    StreamContext,
    current_stream,
    default_stream,
    device,
    get_dynamo_metrics,
    reset_dynamo_metrics,
    set_stream,
    stream,
)
from torchneuron.memory import (  # noqa: E402,F401
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from torchneuron.streams import Event, Stream  # noqa: E402,F401

from . import (  # noqa: E402,F401
    distributed,
    kernels,
    metrics,
    neuron_dynamo_backend,
    nki_hop,
    nki_kernel,
    profiling,
    python_ops,
    streams,
)
from ._api import (  # noqa: E402,F401
    _get_device_index,
    _lazy_init,
    clear_op_tracking,
    current_device,
    device_count,
    empty_cache,
    get_device_properties,
    get_executed_ops,
    get_fallback_ops,
    is_neuron_runtime_initialized,
    set_device,
    synchronize,
)
from .nki_hop import nki_op, wrap_nki  # noqa: E402,F401
from .profiling import NeuronProfiler  # noqa: E402,F401

__version__ = torchneuron.__version__

# `import torch_neuronx.neuron` / `.memory` name torch.neuron's modules, as TorchNeuron's do.
_sys.modules[__name__ + ".neuron"] = neuron
_sys.modules[__name__ + ".memory"] = memory

# The runtime starts on first use (torchneuron), so it is initialized once imported.
_initialized = True

# TorchNeuron's flag (a bool, not a function): True in a process forked after the
# device was used (torchneuron's streams did not survive the fork).
_is_in_bad_fork = torchneuron.device_module._is_in_bad_fork()


def _after_fork() -> None:
    global _is_in_bad_fork
    _is_in_bad_fork = torchneuron.device_module._is_in_bad_fork()


_os.register_at_fork(after_in_child=_after_fork)

__all__ = [
    "Event",
    "NeuronProfiler",
    "Stream",
    "StreamContext",
    "clear_op_tracking",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "distributed",
    "empty_cache",
    "get_device_properties",
    "get_dynamo_metrics",
    "get_executed_ops",
    "get_fallback_ops",
    "is_neuron_runtime_initialized",
    "kernels",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "metrics",
    "neuron",
    "neuron_dynamo_backend",
    "nki_hop",
    "nki_kernel",
    "nki_op",
    "profiling",
    "python_ops",
    "reset_accumulated_memory_stats",
    "reset_dynamo_metrics",
    "reset_peak_memory_stats",
    "set_device",
    "set_stream",
    "stream",
    "streams",
    "synchronize",
    "wrap_nki",
]
