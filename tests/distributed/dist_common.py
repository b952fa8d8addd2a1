"""What every rank of a dist_jobs.py job shares: its rank and world size from torchrun's
environment, the process group and device (``init``), deterministic inputs and the checks'
``ok``/``same``."""

from __future__ import annotations

import os
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning)

RANK = int(os.environ["RANK"])
WS = int(os.environ["WORLD_SIZE"])
LOCAL_RANK = int(os.environ["LOCAL_RANK"])


def ok(name: str) -> None:
    print(f"ok {name}", flush=True)


def same(a: torch.Tensor, b: torch.Tensor, name: str, atol: float = 0.0) -> None:
    a, b = a.cpu(), b.cpu()
    assert a.dtype == b.dtype and a.shape == b.shape, (
        f"{name}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    )
    if atol:
        diff = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
        assert diff <= atol, f"{name}: max |neuron - reference| = {diff:.3g} > {atol}"
    else:
        assert torch.equal(a, b), f"{name}: neuron {a} != cpu {b}"


def init(backend: str | None) -> torch.device:
    """The process group and this rank's device, by CUDA's recipe: set_device(local_rank)
    after init_process_group (with DIST_DEVICE_ID, init_process_group(device_id=...) too).
    The group has bound the rank to neuron:LOCAL_RANK already (checked)."""
    kw = (
        {"device_id": torch.device("neuron", LOCAL_RANK)}
        if os.environ.get("DIST_DEVICE_ID")
        else {}
    )
    dist.init_process_group(
        backend, timeout=timedelta(seconds=float(os.environ.get("DIST_TIMEOUT", "60"))), **kw
    )
    assert torch.neuron.current_device() == LOCAL_RANK, (torch.neuron.current_device(), LOCAL_RANK)
    torch.neuron.set_device(LOCAL_RANK)
    return torch.device("neuron", torch.neuron.current_device())


def data(seed: int, *shape, dtype=torch.float32, rank: int | None = None) -> torch.Tensor:
    """Rank ``rank``'s (default: this rank's) deterministic input."""
    g = torch.Generator().manual_seed(seed * 1000 + (RANK if rank is None else rank))
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)
