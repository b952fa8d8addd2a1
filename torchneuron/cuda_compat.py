"""Run CUDA code on neuron unchanged: ``import torchneuron.cuda_compat`` at the top of a
script, or ``torchneuron run script.py [args]`` (the same, before the script starts).

What it remaps to the ``neuron`` device (said once, as a UserWarning, on activation):

- device arguments: ``"cuda"``, ``"cuda:N"`` and ``torch.device("cuda", N)`` passed to any
  torch function or Tensor method (factories' ``device=``, ``Tensor.to``, ``Module.to``),
  ``Tensor.cuda()`` / ``Module.cuda()``, ``Tensor.is_cuda`` (true for neuron tensors),
  ``torch.load(map_location=...)``;
- ``torch.cuda.*``: devices, streams, events, memory figures, RNG, ``synchronize``,
  properties, ``is_bf16_supported`` (the ``torch.neuron`` functions of the same names),
  and ``torch.cuda.amp`` (``torch.neuron.amp``);
- ``torch.autocast`` / ``torch.amp.autocast``, ``torch.amp.GradScaler``,
  ``torch.amp.custom_fwd`` / ``custom_bwd``, ``torch.is_autocast_enabled`` and
  ``torch.get_autocast_dtype`` with device type ``"cuda"``;
- ``torch.distributed``: backend ``"nccl"`` (also inside ``"cpu:gloo,cuda:nccl"``) becomes
  the c10d backend ``"neuron"``; ``is_nccl_available()`` tells whether that backend is
  registered; ``device_id=`` is remapped as a device.

``torch.backends.cuda`` and ``torch.backends.cudnn`` flags are accepted as on a CUDA
machine: the scaled-dot-product-attention switches (``enable_flash_sdp``,
``enable_math_sdp``, ``sdp_kernel``) steer neuron's attention kernel choice, the others
(TF32, cudnn.benchmark, cudnn.deterministic) do not change the emulator's results (its
float32 kernels never use TF32; it is deterministic).

Limits: the remapping is a ``torch.overrides.TorchFunctionMode`` on the thread that
activated it (threads started later, other than DataLoader's pin-memory thread which
needs none, see plain device names); ``tensor.device`` reports ``neuron``, so code that
compares ``x.device.type == "cuda"`` sees False; ``torch.cuda.get_device_capability()``
is (8, 0), what scripts test for bfloat16 (a NeuronCore has it), nothing more;
``torch.Generator(device="cuda")`` (a class, not a torch function) and CUDA-only APIs
(graphs, NVTX, cuBLAS handles) are not remapped.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

import torchneuron  # noqa: F401  (registers the neuron device)

from . import _warn

__all__ = ["activate", "is_active", "to_neuron_device", "map_backend"]

_active = False
_remapped: list[str] = []  # the torch.cuda functions sent to torch.neuron


def to_neuron_device(d: Any) -> Any:
    """``"cuda"``/``"cuda:N"``/``torch.device("cuda", N)`` -> the same on ``neuron``;
    anything else is returned unchanged."""
    if isinstance(d, str):
        if d == "cuda":
            return "neuron"
        if d.startswith("cuda:"):
            return "neuron:" + d[5:]
        return d
    if isinstance(d, torch.device) and d.type == "cuda":
        return torch.device("neuron", d.index) if d.index is not None else torch.device("neuron")
    return d


def _map_args(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    return (
        tuple(to_neuron_device(a) for a in args),
        {k: to_neuron_device(v) for k, v in kwargs.items()},
    )


def _tensor_cuda(t, device=None, non_blocking=False, memory_format=torch.preserve_format):
    if device is None:
        dev = torch.device("neuron", torch.neuron.current_device())
    elif isinstance(device, int):
        dev = torch.device("neuron", device)
    else:
        dev = torch.device(to_neuron_device(device))
    return t.to(dev, non_blocking=non_blocking, memory_format=memory_format)


_IS_CUDA = torch._C.TensorBase.__dict__["is_cuda"]  # property getters come as its __get__


class _CudaToNeuronMode(TorchFunctionMode):
    """Rewrites CUDA device arguments of every torch call to neuron."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return _tensor_cuda(*args, **kwargs)
        if getattr(func, "__self__", None) is _IS_CUDA:
            return args[0].device.type in ("neuron", "cuda")
        args, kwargs = _map_args(args, kwargs)
        return func(*args, **kwargs)


def map_backend(backend: Any) -> Any:
    """A c10d backend string with ``nccl`` replaced by ``neuron``
    (``"nccl"`` -> ``"neuron"``, ``"cpu:gloo,cuda:nccl"`` -> ``"cpu:gloo,neuron:neuron"``)."""
    if not isinstance(backend, str):
        return backend
    parts = []
    for p in backend.split(","):
        dev, sep, be = p.rpartition(":")
        dev = "neuron" if dev == "cuda" else dev
        be = "neuron" if be.lower() == "nccl" else be
        parts.append(f"{dev}{sep}{be}")
    return ",".join(parts)


def _patch_cuda_module() -> list[str]:
    import torch.cuda.amp as cuda_amp

    names = [
        "is_available",
        "device_count",
        "current_device",
        "set_device",
        "device",
        "synchronize",
        "Stream",
        "Event",
        "current_stream",
        "default_stream",
        "set_stream",
        "stream",
        "empty_cache",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "reset_peak_memory_stats",
        "reset_accumulated_memory_stats",
        "memory_stats",
        "memory_summary",
        "mem_get_info",
        "manual_seed",
        "manual_seed_all",
        "seed",
        "seed_all",
        "initial_seed",
        "get_rng_state",
        "set_rng_state",
        "get_rng_state_all",
        "set_rng_state_all",
        "get_device_name",
        "get_device_properties",
        "is_bf16_supported",
        "is_initialized",
        "StreamContext",
        "device_of",
        "set_per_process_memory_fraction",
        "get_per_process_memory_fraction",
        "reset_max_memory_allocated",
        "reset_max_memory_cached",
        "utilization",
        "ipc_collect",
        "get_arch_list",
    ]
    done = []
    for n in names:
        if hasattr(torch.neuron, n):
            setattr(torch.cuda, n, getattr(torch.neuron, n))
            done.append(n)

    def get_device_capability(device: Any = None) -> tuple[int, int]:
        """(8, 0): scripts test it for bfloat16 (compute capability >= 8), which a
        NeuronCore computes natively; no CUDA feature beyond that is implied."""
        torch.neuron.get_device_properties(device)  # a bad index raises as CUDA's does
        return (8, 0)

    torch.cuda.get_device_capability = get_device_capability
    done.append("get_device_capability")
    torch.cuda.init = lambda: None
    for n in ("autocast", "GradScaler", "custom_fwd", "custom_bwd", "amp_definitely_not_available"):
        setattr(cuda_amp, n, getattr(torch.neuron.amp, n))
    torch.cuda.amp = cuda_amp
    return done


def _map_device_kw(fn, pos: int, name: str):
    """Wrap `fn` so that its device argument (position `pos`, or keyword `name`) is remapped."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if len(args) > pos:
            args = args[:pos] + (to_neuron_device(args[pos]),) + args[pos + 1 :]
        if name in kwargs:
            kwargs[name] = to_neuron_device(kwargs[name])
        return fn(*args, **kwargs)

    wrapper._torchneuron_cuda_compat = True
    return wrapper


def _patch_amp() -> None:
    am = torch.amp.autocast_mode
    ac = am.autocast
    if not getattr(ac.__init__, "_torchneuron_cuda_compat", False):
        ac.__init__ = _map_device_kw(ac.__init__, 1, "device_type")
    gs = torch.amp.GradScaler
    if not getattr(gs.__init__, "_torchneuron_cuda_compat", False):
        mapped = _map_device_kw(gs.__init__, 1, "device")

        @functools.wraps(gs.__init__)
        def gs_init(self, *args, **kwargs):
            if not args and "device" not in kwargs:
                kwargs["device"] = "neuron"  # GradScaler()'s default device is "cuda"
            return mapped(self, *args, **kwargs)

        gs_init._torchneuron_cuda_compat = True
        gs.__init__ = gs_init
    for mod in (torch.amp, am):
        for n in ("custom_fwd", "custom_bwd"):
            f = getattr(mod, n)
            if not getattr(f, "_torchneuron_cuda_compat", False):
                setattr(mod, n, _map_device_kw(f, 10, "device_type"))
    for n in ("is_autocast_enabled", "get_autocast_dtype"):
        f = getattr(torch, n)
        if getattr(f, "_torchneuron_cuda_compat", False):
            continue

        def make(f):
            @functools.wraps(f)
            def g(device_type: str = "cuda"):
                return f(to_neuron_device(device_type))

            g._torchneuron_cuda_compat = True
            return g

        setattr(torch, n, make(f))


def _patch_load() -> None:
    load = torch.load
    if not getattr(load, "_torchneuron_cuda_compat", False):

        @functools.wraps(load)
        def _load(*args, **kwargs):
            if len(args) > 1:
                args = (args[0], _map_location(args[1])) + args[2:]
            if "map_location" in kwargs:
                kwargs["map_location"] = _map_location(kwargs["map_location"])
            return load(*args, **kwargs)

        _load._torchneuron_cuda_compat = True
        torch.load = _load


def _map_location(m: Any) -> Any:
    if isinstance(m, dict):
        return {k: to_neuron_device(v) for k, v in m.items()}
    return to_neuron_device(m)


def _patch_distributed() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    c10d = dist.distributed_c10d
    for n in ("init_process_group", "new_group"):
        f = getattr(c10d, n)
        if getattr(f, "_torchneuron_cuda_compat", False):
            continue

        def make(f, pos):
            @functools.wraps(f)
            def g(*args, **kwargs):
                if len(args) > pos:
                    args = args[:pos] + (map_backend(args[pos]),) + args[pos + 1 :]
                if "backend" in kwargs:
                    kwargs["backend"] = map_backend(kwargs["backend"])
                if "device_id" in kwargs:
                    kwargs["device_id"] = to_neuron_device(kwargs["device_id"])
                return f(*args, **kwargs)

            g._torchneuron_cuda_compat = True
            return g

        wrapped = make(f, 0 if n == "init_process_group" else 2)
        setattr(c10d, n, wrapped)
        setattr(dist, n, wrapped)

    def is_nccl_available() -> bool:
        return "neuron" in dist.Backend.backend_list

    c10d.is_nccl_available = dist.is_nccl_available = is_nccl_available


def activate(quiet: bool = False) -> None:
    """Turn the remapping on (idempotent; done on import of this module). With ``quiet``
    nothing is said."""
    global _active
    if _active:
        return
    cuda_names = _patch_cuda_module()
    _patch_amp()
    _patch_load()
    _patch_distributed()
    _CudaToNeuronMode().__enter__()  # stays on this thread's mode stack
    _active = True
    _remapped[:] = [f"torch.cuda.{n}" for n in cuda_names]
    if not quiet:  # at the user's line (their import or activate() call), not this file's
        _warn.warn(notice(), UserWarning)


def notice() -> str:
    """The one-line warning :func:`activate` gives (``torchneuron run`` gives it at the
    script's first line)."""
    return (
        "torchneuron.cuda_compat: CUDA code runs on neuron. Remapped: 'cuda' devices, "
        f".cuda(), torch.load(map_location), torch.cuda ({len(_remapped)} functions) and "
        "amp, autocast and GradScaler on 'cuda', distributed 'nccl' (all: "
        "torchneuron.cuda_compat.remapped(), docs/cuda.md)."
    )


def remapped() -> list[str]:
    """What the remapping covers, one item per API: the ``torch.cuda`` functions sent to
    ``torch.neuron``, then the rest (devices, amp, ``torch.load``, distributed, flags).
    Empty before :func:`activate`."""
    if not _active:
        return []
    return list(_remapped) + [
        "'cuda' devices in torch calls (factories, .to, .cuda(), .is_cuda)",
        "torch.load(map_location='cuda')",
        "torch.cuda.amp -> torch.neuron.amp",
        "autocast, GradScaler, custom_fwd/custom_bwd with 'cuda' -> 'neuron'",
        "torch.distributed backend 'nccl' -> 'neuron'",
        "torch.backends.cuda/cudnn flags: accepted (the SDPA switches act on neuron)",
    ]


def is_active() -> bool:
    """True once :func:`activate` ran in this process."""
    return _active


activate()
