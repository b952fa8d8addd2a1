"""Phase 1's peak device memory in program order: a figure that does not depend on timing.

The device is asynchronous and a queued kernel holds its tensors until it has run, so a
tensor the host has dropped stays allocated until the device reaches it. How many such
tensors are alive at the peak depends on how far the host ran ahead of the device, which
the host's load decides: ``mlp``'s peak over phase 1's runs read 417,280, 446,976 and
484,352 bytes in eight identical checks (with and without ``--save-baseline``; the option
changes nothing before phase 3). ``in_order_peak`` runs one more forward pass with the
device synchronized after every operator, so every tensor is freed when the program drops
it: the peak of the program's own live tensors, the same in every run (414,208 bytes for
``mlp``, five of five passes in three processes). Baselines compare that figure. It counts
the bytes the model and its inputs took when placed (phase 1's ``weights_bytes``) plus the
pass's rise above what was allocated when it started, so device tensors that are not the
model's (another check's garbage not yet collected in the same process: 3,072 bytes more
in the third of three library runs of ``mlp``) do not count.
"""

from __future__ import annotations

import gc
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..model import tensors as T
from ..result import Phase1Result


class _SyncEachOp(TorchDispatchMode):
    """Waits for the device after every ATen operator: the host never runs ahead."""

    def __init__(self, sync):
        super().__init__()
        self._sync = sync

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self._sync()
        return out


def _peak_rise(session, call, what: str) -> tuple[int, str | None]:
    """(peak rise of the device allocator during ``call(device)``, in bytes, None) with the
    device's garbage collected and its peak statistics reset first, or (0, why) when the
    call raised (``what`` names it in that message)."""
    dev = torch.device(session.device)
    gc.collect()  # earlier device garbage of this process freed now, not during the call
    session.sync()
    torch.neuron.reset_peak_memory_stats(dev)
    start = torch.neuron.memory_allocated(dev)
    out: Any | None = None
    try:
        out = call(dev)
        session.sync()
    except Exception as e:
        return 0, f"{what} raised {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    finally:
        del out
    return int(torch.neuron.max_memory_allocated(dev) - start), None


def in_order_peak(session, dtype: torch.dtype, resident_bytes: int) -> dict[str, Any]:
    """One forward pass of ``session.model`` in program order (the device synchronized after
    each operator). Returns ``{"peak_allocated_bytes": int}``: ``resident_bytes`` (the model's
    and inputs' bytes on the device) plus the pass's peak rise above what was allocated when
    it started, in bytes; or ``{"peak_allocated_bytes": None, "note": why}`` when the pass
    raised. The device's peak statistics are reset by it: read any other peak first."""

    def call(dev):
        with _SyncEachOp(session.sync):
            return T.call(session.model, session.inputs, dev.type, dtype)

    rise, note = _peak_rise(session, call, "the in-order pass")
    if note:
        return {"peak_allocated_bytes": None, "note": note}
    return {"peak_allocated_bytes": int(resident_bytes + rise)}


def compiled_peak(session, compiled, dtype: torch.dtype, resident_bytes: int) -> dict[str, Any]:
    """The compiled model's own peak, from one warm call of ``compiled`` (its executables
    already built): ``resident_bytes`` + the call's peak rise of the device allocator (its
    outputs, and the tensors of any eager code between graphs) + the largest temporaries of
    the graphs it ran (``temp_bytes`` of ``torch.neuron.get_dynamo_metrics()``: XLA's buffer
    assignment, which the emulator holds in host memory, outside the device allocator; on a
    NeuronCore they are in HBM). The rise and the temporaries may not peak together: the sum
    is an upper bound. Returns ``{"peak_allocated_bytes", "rise_bytes", "temp_bytes"}`` in
    bytes, or ``{"peak_allocated_bytes": None, "note": why}`` when the call raised. Resets
    the device's peak statistics."""
    temp = max(
        (int(r.get("temp_bytes") or 0) for r in torch.neuron.get_dynamo_metrics()), default=0
    )
    rise, note = _peak_rise(
        session, lambda dev: T.call(compiled, session.inputs, dev.type, dtype), "the compiled call"
    )
    if note:
        return {"peak_allocated_bytes": None, "note": note}
    return {
        "peak_allocated_bytes": int(resident_bytes + rise + temp),
        "rise_bytes": rise,
        "temp_bytes": temp,
    }


def measured_peak(phase1: Phase1Result) -> tuple[int | None, str | None]:
    """The peak a baseline saves and compares, and its basis: under ``--mode compile`` (phases
    2 and 3 measured the compiled model) the compiled model's own (``compiled``, None when
    not measured), never the eager one's; otherwise the eager peak (``in order`` or ``run
    ahead``)."""
    m = phase1.memory or {}
    if phase1.compile.phases_2_3 == "compiled":
        return m.get("compiled_peak_allocated_bytes"), "compiled"
    return m.get("peak_allocated_bytes"), m.get("peak_allocated_basis")
