"""``torch.neuron``: the device module, with ``torch.cuda``'s meanings.

Devices are the visible logical NeuronCores (``NEURON_RT_VISIBLE_CORES``,
``NEURON_LOGICAL_NC_CONFIG``); memory figures are bytes of the core's HBM.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from . import (
    _C,
    _utils,  # noqa: F401  (torch.serialization looks for _utils._get_device_index)
    amp,  # noqa: F401,E402  (torch.neuron.amp, the torch.cuda.amp shape)
    memory,  # noqa: F401  (torch.neuron.memory, as torch.cuda.memory)
)
from . import random as _random
from ._utils import _get_device_index
from .memory import (  # noqa: F401
    empty_cache,
    get_per_process_memory_fraction,
    ipc_collect,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .random import (  # noqa: F401
    _get_generator,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (  # noqa: F401
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)


def is_available() -> bool:
    """True when at least one NeuronCore is visible."""
    return _C._device_count() > 0


def is_initialized() -> bool:
    """True: the runtime starts when torchneuron is imported (no lazy init to wait for)."""
    return True


def init() -> None:
    """Nothing to do (as ``torch.cuda.init`` after initialization)."""


import time as _time  # noqa: E402

_START_NS = _time.monotonic_ns()  # the runtime starts with this module's import

# torch.cuda.OutOfMemoryError is torch.OutOfMemoryError; the HBM allocator raises it.
OutOfMemoryError = torch.OutOfMemoryError


# torch.utils.checkpoint (and torch.random.fork_rng's callers) save and
# restore a device's RNG state only when its module says it is initialized,
# as torch.cuda._initialized does after lazy init. The runtime starts on
# first use, so the device module is always initialized.
_initialized = True


def _lazy_init() -> None:
    """Nothing to do: the runtime starts on first use."""


def exchange_device(device: int) -> int:
    """Make ``device`` current and return the previous index (as
    ``torch.cuda._exchange_device``); -1 changes nothing and returns -1."""
    if device < 0:
        return -1
    prev = current_device()
    if prev != device:
        set_device(device)
    return prev


def maybe_exchange_device(device: int) -> int:
    """As ``exchange_device`` (no device context to avoid creating here)."""
    return exchange_device(device)


_exchange_device = exchange_device
_maybe_exchange_device = maybe_exchange_device


def device_count() -> int:
    """Number of visible logical NeuronCores."""
    return _C._device_count()


def current_device() -> int:
    """Index of the calling thread's current NeuronCore."""
    return _C._get_device()


def set_device(device: Any) -> None:
    """Set the calling thread's current NeuronCore. Raises torch.AcceleratorError
    (a RuntimeError, "invalid device ordinal", as CUDA) on a bad index."""
    idx = _get_device_index(device)
    if idx >= 0:
        _C._set_device(idx)


class device:
    """Context manager that changes the current NeuronCore (as ``torch.cuda.device``)."""

    def __init__(self, device: Any):
        self.idx = _get_device_index(device, optional=True)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0 and self.idx != self.prev:
            _C._set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev != self.idx:
            _C._set_device(self.prev)
        return False


def synchronize(device: Any = None) -> None:
    """Wait for all work on every stream of the NeuronCore. Raises RuntimeError
    with the failing kernel's name if asynchronous work failed."""
    _C._synchronize(_get_device_index(device, optional=True))


class NeuronDeviceProperties:
    """Properties of one logical NeuronCore (``total_memory`` in bytes)."""

    def __init__(self, props: dict):
        self.name: str = props["name"]
        self.total_memory: int = props["total_memory"]
        self.logical_nc_config: int = props["logical_nc_config"]
        self.logical_id: int = props["logical_id"]

    def __repr__(self) -> str:
        return (
            f"NeuronDeviceProperties(name='{self.name}', total_memory="
            f"{self.total_memory // 2**20}MB, logical_nc_config={self.logical_nc_config}, "
            f"logical_id={self.logical_id})"
        )


class device_of(device):
    """Context manager that makes the device of tensor ``obj`` current (nothing for a
    tensor that is not on neuron), as ``torch.cuda.device_of``."""

    def __init__(self, obj: Any):
        idx = obj.get_device() if obj.device.type == "neuron" else -1
        super().__init__(idx)


# NeuronCore generation per device name (AWS Neuron documentation: Trainium1 and
# Inferentia2 have NeuronCore-v2, Trainium2 NeuronCore-v3).
def get_device_capability(device: Any = None) -> tuple[int, int]:
    """(major, minor) NeuronCore version of the device, as CUDA's compute capability:
    (3, 0) for Trainium2's NeuronCore-v3. Code comparing it to CUDA's (8, 0) learns
    nothing about CUDA features; it is the Neuron generation."""
    name = get_device_name(device)
    for v in (3, 2, 1):
        if f"NeuronCore-v{v}" in name:
            return (v, 0)
    raise RuntimeError(f"neuron: unknown NeuronCore generation in device name {name!r}")


def get_arch_list() -> list[str]:
    """Targets the compile path builds executables for (neuronx-cc's ``--target``
    names; the emulator compiles for Trainium2)."""
    return ["trn2"]


def utilization(device: Any = None) -> int:
    """Percent of the last sampling period during which a kernel ran on the core, as
    ``torch.cuda.utilization`` (NVML's GPU utilization): from the runtime's busy time
    over the last ``utilization`` call's interval (the first call covers the time since
    the runtime started). An int in [0, 100]."""
    import time

    idx = _get_device_index(device, optional=True)
    now, busy = time.monotonic_ns(), _C._counters(idx)["busy_ns"]
    t0, b0 = _util_last.get(idx, (_START_NS, 0))
    _util_last[idx] = (now, busy)
    if now <= t0:
        return 0
    return max(0, min(100, round(100 * (busy - b0) / (now - t0))))


_util_last: dict[int, tuple[int, int]] = {}


def get_device_properties(device: Any = None) -> NeuronDeviceProperties:
    return NeuronDeviceProperties(_C._core_properties(_get_device_index(device, optional=True)))


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Trainium computes bfloat16 natively."""
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    """dtypes ``torch.autocast("neuron")`` accepts."""
    return [torch.bfloat16, torch.float16]


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("neuron")


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("neuron")


def fallback_stats() -> dict[str, dict[str, float]]:
    """``{op_name: {"calls": int, "seconds": float}}`` for operators that ran
    through the CPU fallback since the last reset (seconds include copies)."""
    return _C._fallback_stats()


def reset_fallback_stats() -> None:
    _C._reset_fallback_stats()


def narrowing_stats() -> dict[str, int]:
    """``{op_name: calls}`` of operators whose float64/int64 inputs were
    computed as float32/int32 (the 64-bit policy)."""
    return _C._narrowing_stats()


def reset_narrowing_stats() -> None:
    _C._reset_narrowing_stats()


def kernel_signature_stats() -> dict[str, int]:
    """``{op_name: count}`` of kernel signatures first seen since the last reset.

    On Trainium every eager op with a new signature compiles a kernel before it runs
    (then cached): the signature is the op, its tensor arguments' dtypes and shapes, and
    its static attributes (ints, bools, strings such as ``dim``); floats and CPU scalar
    tensors are runtime operands and do not count. Native device kernels only (not CPU
    fallbacks, copies or compiled graphs). A loop whose shapes change every step keeps
    adding signatures: read this after warm-up to see the compiles it would pay."""
    return _C._kernel_signature_stats()


def reset_kernel_signature_stats() -> None:
    """Zero the counts; signatures already seen stay cached and are not counted again."""
    _C._reset_kernel_signature_stats()


def concatenation_stats() -> dict:
    """Adaptive eager execution's buffering (``TORCH_NEURONX_ENABLE_CONCATENATION=1``;
    docs/design/concatenation-engine.md): ``buffered`` native kernels that waited in their
    stream's buffer because the stream had at least
    ``TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD`` (15) kernels queued, ``direct`` ones
    enqueued at once, and ``flushes`` by cause (``launch``: another launch on the stream;
    ``wait``: a host wait; ``event``: an event or a query; ``limit``:
    ``TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT`` (1024) kernels; ``queue_low``: the
    stream ran low). All zero with the variable unset.

    With ``TORCHNEURON_CONCATENATION_FUSE=1`` too, ``fused`` counts the fusing of flushed
    runs of ops into one executable: ``segments`` launched fused and their ``ops_fused``;
    ``ops_unfused`` (of runs that went one by one: a first sight, an unfusable signature);
    ``cache_hits`` (a cached executable replayed), ``cache_misses`` (a signature's first
    sight), ``compiles`` (at its second sight), ``unfusable`` (compiles that failed: that
    signature stays unfused); ``compile_s`` (seconds spent compiling)."""
    out = _C._concatenation_stats()
    out["fused"] = _C._fusion_stats()
    from .compiler import fused

    out["fused"]["compile_s"] = fused.compile_seconds()
    return out


def reset_concatenation_stats() -> None:
    _C._reset_concatenation_stats()
    _C._reset_fusion_stats()


def full_width_stats() -> dict[str, int]:
    """``{op_name: calls}`` of operators with float64/int64 inputs computed at
    full width because the narrowed dtype has no kernel (int64 convolution and
    average pooling): the 64-bit policy never turns a working call into an error."""
    return _C._full_width_stats()


def reset_full_width_stats() -> None:
    _C._reset_full_width_stats()


@contextlib.contextmanager
def fallback_mode(mode: str):
    """Temporarily set the fallback mode: ``"warn"`` or ``"error"``."""
    old = _C._fallback_mode()
    _C._set_fallback_mode(mode)
    try:
        yield
    finally:
        _C._set_fallback_mode(old)


def wait_stream(other: torch.Stream) -> None:
    """The current stream waits for the work queued on ``other`` so far."""
    current_stream().wait_stream(other)


def wait_event(event: torch.Event) -> None:
    """The current stream waits for ``event``."""
    current_stream().wait_event(event)


def record_event(event: torch.Event | None = None) -> Event:
    """Record ``event`` (a new one if None) on the current stream; returns it."""
    return current_stream().record_event(event)


def query() -> bool:
    """True when all work queued on the current stream has completed."""
    return current_stream().query()


def _sleep(cycles: int) -> None:
    """A no-op, as TorchNeuron's (torch.cuda._sleep spins the GPU for ``cycles``)."""


def runtime_info() -> dict:
    """The device stack in use: runtime name and version, LNC, visible cores, HBM."""
    return _C._runtime_info()


def _is_in_bad_fork() -> bool:
    """True in a process forked after the device was used: its stream workers
    did not survive the fork, so the device is unusable there (as CUDA)."""
    return _C._is_in_bad_fork()


def __getattr__(name: str):
    # Computed on access: the visible cores are known once the runtime started.
    if name == "default_generators":
        return _random.default_generators()
    raise AttributeError(f"module 'torch.neuron' has no attribute '{name}'")


def get_dynamo_metrics() -> list[dict]:
    """One record per graph compiled by torch.compile(backend="neuron") (torchneuron/compiler/metrics.py)."""
    from .compiler.metrics import get_dynamo_metrics as _get

    return _get()


def reset_dynamo_metrics() -> None:
    """Forgets the compile records and Dynamo's counters["neuron"]."""
    from .compiler.metrics import reset_dynamo_metrics as _reset

    _reset()
