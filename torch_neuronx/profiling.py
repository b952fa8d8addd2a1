"""``torch_neuronx.profiling``: TorchNeuron's ``NeuronProfiler`` combines NRT system and
device traces with a torch.profiler trace. The NRT traces are not emulated; the
device's activity is in torch.profiler itself (ProfilerActivity.PrivateUse1 rows from
the emulator's streams, docs/profiler.md)."""

from __future__ import annotations

from ._not_emulated import not_emulated


class NRTProfilerError(Exception):
    """TorchNeuron's error of the NRT profiler (never raised here)."""


class NeuronProfiler:
    """Not emulated: constructing one raises NotImplementedError."""

    def __init__(self, *args, **kwargs):
        not_emulated(
            "torch_neuronx.profiling.NeuronProfiler",
            "Neuron Runtime system/device traces (NRT inspect) do not exist on the emulated "
            "NeuronCore; use torch.profiler.profile(activities=[ProfilerActivity.CPU, "
            "ProfilerActivity.PrivateUse1]), whose device rows come from the emulator",
        )
