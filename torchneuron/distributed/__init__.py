"""The c10d backend ``neuron`` (``torch.distributed`` on neuron tensors).

Importing torchneuron registers it: ``init_process_group("neuron")``,
``"cpu:gloo,neuron:neuron"``, or no backend on a process whose accelerator is
neuron. The transport is Gloo (shipped with PyTorch) over the tensors' device
memory; ordering with the streams is done in C++ (``csrc/distributed/``).
CPU tensors given to this backend are served by its Gloo group as is.

Under torchrun, the first group of a process makes neuron:LOCAL_RANK (or
``device_id``'s core) the current device; every core stays visible, so the
CUDA recipe (``set_device(local_rank)``, ``device_ids=[local_rank]``,
``device_id=torch.device("neuron", local_rank)``) names this rank's core.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from .. import _C

BACKEND_NAME = "neuron"


_bound = False  # the first group of the process binds the rank's core, once


def _bind_local_rank(device_id: torch.device | None = None) -> None:
    """Make this rank's core the calling thread's current device, once per process:
    ``device_id``'s (``init_process_group(device_id=...)``) if given, else
    ``LOCAL_RANK``'s under torchrun. Every core stays visible, so neuron:LOCAL_RANK
    is this rank's core (CUDA's and TorchNeuron's index): ``set_device(local_rank)``,
    ``DDP(device_ids=[local_rank])`` and ``device_id=neuron:local_rank`` name it.

    Left alone: a thread that already chose another device than neuron:0; a
    launcher that made one core visible per rank (it is neuron:0); a rank that
    holds tensors on neuron:0 already (warns once: it shares local rank 0's core).
    Raises torch.AcceleratorError when LOCAL_RANK has no core of its own."""
    global _bound
    local_rank = os.environ.get("LOCAL_RANK")
    if _bound or (local_rank is None and device_id is None):
        return
    _bound = True
    if device_id is not None and device_id.type == "neuron" and device_id.index is not None:
        want = device_id.index
    elif local_rank is not None:
        want = int(local_rank)
    else:
        return
    count = torch.neuron.device_count()
    current = torch.neuron.current_device()
    if current == want or count == 1 or current != 0:
        return
    if want >= count:
        raise torch.AcceleratorError(
            f"neuron error: invalid device ordinal (LOCAL_RANK={want}, but {count} NeuronCore(s) are "
            f"visible: run at most {count} processes per host (NEURON_RT_VISIBLE_CORES, "
            f"NEURON_LOGICAL_NC_CONFIG))"
        )
    if torch.neuron.memory_allocated(0) > 0:
        import warnings

        warnings.warn(
            f"torchneuron: this rank created tensors on neuron:0 before the process group, so it stays "
            f"on neuron:0 (local rank 0's core as well) instead of its own, neuron:{want}. Call "
            f"torch.neuron.set_device({want}) before creating tensors, or create the group first.",
            UserWarning,
            stacklevel=4,
        )
        return
    torch.neuron.set_device(want)


def _create_backend(store, rank: int, size: int, timeout: timedelta):
    """Backend factory given to ``Backend.register_backend`` (store, group rank,
    group size, timeout: the group's, for every Gloo operation)."""
    _bind_local_rank()
    gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
    return _C._distributed._create_backend(gloo, rank, size)


def _default_to_neuron(pg) -> None:
    """Give a group a default backend it has. With no backend named, PyTorch
    makes Gloo the default (anything but NCCL) although only ``neuron`` was
    created for the neuron accelerator, and DDP's logger then fails with
    "Could not find backend type 1"; with "cpu:gloo,neuron:neuron" it sets
    none (a warning at destroy_process_group)."""
    from torch._C._distributed_c10d import ProcessGroup

    if not isinstance(pg, ProcessGroup) or pg._get_backend_name() not in ("gloo", "undefined"):
        return

    def has(device: str, name: str) -> bool:
        try:
            return pg._get_backend(torch.device(device)).name() == name
        except RuntimeError:
            return False

    if has("cpu", "gloo"):
        if pg._get_backend_name() == "undefined":
            pg._set_default_backend(ProcessGroup.BackendType.GLOO)
    elif has("neuron", BACKEND_NAME):
        pg._set_default_backend(ProcessGroup.BackendType.CUSTOM)


def _serves_neuron(backend) -> bool:
    """Whether a group created with this backend string has a neuron backend."""
    if backend is None or str(backend) == "undefined":
        return True
    try:
        return "neuron" in dist.distributed_c10d.BackendConfig(backend).get_device_backend_map()
    except (ValueError, KeyError):
        return True  # let PyTorch report the bad string


def _wrap_group_creation() -> None:
    import torch.distributed.distributed_c10d as c10d

    helper = c10d._new_process_group_helper
    if getattr(helper, "_torchneuron", False):
        return

    def _new_process_group_helper(*args, **kwargs):
        backend = kwargs.get("backend", args[3] if len(args) > 3 else None)
        if backend is None or str(backend) == "undefined" or BACKEND_NAME in str(backend):
            _bind_local_rank(kwargs.get("device_id"))
        device_id = kwargs.get("device_id")
        if device_id is not None and device_id.type == "neuron" and not _serves_neuron(backend):
            # new_group(backend="gloo") after init_process_group(device_id=neuron:k)
            # inherits that device; PyTorch then looks up the group's neuron
            # backend, which Gloo is not (its cuda one is, hence no error there).
            kwargs["device_id"] = None
        pg, store = helper(*args, **kwargs)
        _default_to_neuron(pg)
        return pg, store

    _new_process_group_helper._torchneuron = True
    c10d._new_process_group_helper = _new_process_group_helper


def _wrap_monitored_barrier() -> None:
    """``dist.monitored_barrier`` on a group served by ``neuron``: created with
    "neuron", "cpu:gloo,neuron:neuron", or no backend (then the group has no
    CPU backend, only this one). PyTorch accepts only groups named "gloo";
    this backend's host side is a Gloo group, so the same host-side barrier
    runs (Gloo's, naming the ranks that did not arrive within ``timeout``)."""
    import torch.distributed.distributed_c10d as c10d

    original = c10d.monitored_barrier
    if getattr(original, "_torchneuron", False):
        return

    def host_side(group):
        # The group's Gloo group on the host: its CPU backend, or with no backend
        # named (only the accelerator gets one) this backend's own.
        pg = c10d._get_default_group() if group is None else group
        for device in ("cpu", "neuron"):
            try:
                backend = pg._get_backend(torch.device(device))
            except RuntimeError:
                continue
            if backend.name() in ("gloo", BACKEND_NAME):
                return backend
        return None

    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        backend = None
        if not c10d._rank_not_in_group(group) and str(c10d.get_backend(group)) != "gloo":
            backend = host_side(group)
        if backend is None:
            return original(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
        if timeout is None:
            timeout = c10d._get_default_timeout(c10d.get_backend(group))
        elif isinstance(timeout, (int, float)):
            timeout = timedelta(seconds=timeout)
        c10d._check_valid_timeout(timeout)
        return backend.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier.__doc__ = original.__doc__
    monitored_barrier._torchneuron = True
    c10d.monitored_barrier = monitored_barrier
    dist.monitored_barrier = monitored_barrier


def _register() -> None:
    if not dist.is_available() or BACKEND_NAME in dist.Backend.backend_list:
        return
    # cpu too: object collectives and checkpoint metadata of a group created
    # with backend="neuron" travel as CPU tensors.
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=["neuron", "cpu"])
    _wrap_group_creation()
    _wrap_monitored_barrier()


_register()
