"""Random state of ``torch.neuron``: one generator per NeuronCore, with
``torch.cuda``'s seeding API. States are CPU ByteTensors (the generator keeps
a CPU-compatible state, so one seed gives the CPU's numbers).

Host-side calls, never traced: inside a compiled function each is a graph break run
eagerly (as torch.cuda's, which Dynamo skips); traced, ``freeze_rng_state()``'s
``set_rng_state`` under ``no_dispatch`` failed to compile."""

from __future__ import annotations

from typing import Any

import torch

from . import _C
from ._utils import _get_device_index


def _gen(device: Any = None) -> torch.Generator:
    return _C._default_generator(_get_device_index(device, optional=True))


@torch.compiler.disable
def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    # The generator waits for the kernels in flight that draw from it (not a
    # sync point: an earlier kernel's error stays for one).
    return _gen(_get_device_index(device, optional=True)).get_state()


@torch.compiler.disable
def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(_C._device_count())]


@torch.compiler.disable
def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    _gen(_get_device_index(device, optional=True)).set_state(new_state.clone().cpu())


@torch.compiler.disable
def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


@torch.compiler.disable
def manual_seed(seed: int) -> None:
    """Seed the current NeuronCore's generator."""
    _gen().manual_seed(int(seed))


@torch.compiler.disable
def manual_seed_all(seed: int) -> None:
    for i in range(_C._device_count()):
        _C._default_generator(i).manual_seed(int(seed))


@torch.compiler.disable
def seed() -> None:
    """Seed the current NeuronCore's generator with a non-deterministic number."""
    _gen().seed()


@torch.compiler.disable
def seed_all() -> None:
    s = _gen().seed()
    for i in range(_C._device_count()):
        _C._default_generator(i).manual_seed(s)


@torch.compiler.disable
def initial_seed() -> int:
    return _gen().initial_seed()


def default_generators() -> tuple:
    """The per-core default generators, as ``torch.cuda.default_generators``
    (torch._prims' graph-safe RNG reads it); exposed as an attribute."""
    return tuple(_C._default_generator(i) for i in range(_C._device_count()))


def _get_generator(device: Any) -> torch.Generator:
    """The default generator of ``device`` (torch.device, int or str); read
    by torch._functorch's graph-safe RNG state."""
    if isinstance(device, torch.device) and device.index is None:
        device = None
    return _gen(device)
