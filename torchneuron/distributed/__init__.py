"""The c10d backend ``neuron`` (``torch.distributed`` on neuron tensors).

Importing torchneuron registers it: ``init_process_group("neuron")``,
``"cpu:gloo,neuron:neuron"``, or no backend on a process whose accelerator is
neuron. The transport is Gloo (shipped with PyTorch) over the tensors' device
memory; ordering with the streams is done in C++ (``csrc/distributed/``).
CPU tensors given to this backend are served by its Gloo group as is.

Under torchrun, the first group of a process sets ``NEURON_RT_VISIBLE_CORES``
to ``LOCAL_RANK`` (as TorchNeuron does) when it is unset and the device has
not been used yet; otherwise every core stays visible and
``torch.neuron.set_device(local_rank)`` selects the rank's core.
"""
from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from .. import _C

BACKEND_NAME = "neuron"


def _visible_core_for_local_rank() -> None:
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is None or os.environ.get("NEURON_RT_VISIBLE_CORES"):
        return
    if _C._distributed._runtime_started():
        # Too late to narrow the view: set_device(local_rank) selects the core.
        # Without it every local rank would share the current core, silently.
        if int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1 and torch.neuron.current_device() != int(local_rank):
            import warnings

            warnings.warn(
                f"torchneuron: the neuron device was used before the process group was created, so "
                f"NEURON_RT_VISIBLE_CORES could not be set to LOCAL_RANK={local_rank}; this rank uses "
                f"neuron:{torch.neuron.current_device()} of {torch.neuron.device_count()} visible cores. Call "
                f"torch.neuron.set_device(int(os.environ['LOCAL_RANK'])) first, or create the group before "
                f"using the device.", UserWarning, stacklevel=3)
        return
    os.environ["NEURON_RT_VISIBLE_CORES"] = local_rank


def _create_backend(store, rank: int, size: int, timeout: timedelta):
    """Backend factory given to ``Backend.register_backend`` (store, group rank,
    group size, timeout: the group's, for every Gloo operation)."""
    _visible_core_for_local_rank()
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


def _wrap_group_creation() -> None:
    import torch.distributed.distributed_c10d as c10d

    helper = c10d._new_process_group_helper
    if getattr(helper, "_torchneuron", False):
        return

    def _new_process_group_helper(*args, **kwargs):
        backend = kwargs.get("backend", args[3] if len(args) > 3 else None)
        if backend is None or str(backend) == "undefined" or BACKEND_NAME in str(backend):
            # Before PyTorch looks up the accelerator (which starts the runtime).
            _visible_core_for_local_rank()
        pg, store = helper(*args, **kwargs)
        _default_to_neuron(pg)
        return pg, store

    _new_process_group_helper._torchneuron = True
    c10d._new_process_group_helper = _new_process_group_helper


def _wrap_monitored_barrier() -> None:
    """``dist.monitored_barrier`` on a group whose CPU backend is ``neuron``:
    PyTorch accepts only groups named "gloo"; this backend's CPU side is a
    Gloo group, so the same host-side barrier runs (Gloo's, naming the ranks
    that did not arrive within ``timeout``)."""
    import torch.distributed.distributed_c10d as c10d

    original = c10d.monitored_barrier
    if getattr(original, "_torchneuron", False):
        return

    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        if c10d._rank_not_in_group(group) or BACKEND_NAME not in str(c10d.get_backend(group)):
            return original(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
        if timeout is None:
            timeout = c10d._get_default_timeout(c10d.get_backend(group))
        elif isinstance(timeout, (int, float)):
            timeout = timedelta(seconds=timeout)
        c10d._check_valid_timeout(timeout)
        pg = c10d._get_default_group() if group is None else group
        return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

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
