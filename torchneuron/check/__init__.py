"""``torchneuron check``: the three-phase migration evaluation of a model.

Phase 1 runs the model on the ``neuron`` device (fallbacks, 64-bit narrowing, memory,
determinism, failing op); phase 2 compares its outputs with a reference device and a
float64 golden run (PyTorch's benchmark accuracy rule); phase 3 measures stable
performance after warm-up. Results carry a version manifest, can be saved as a baseline
and compared with one, are priced per million samples, and are reported in the terminal,
as JSON, JUnit XML and a self-contained HTML page. See docs/check.md.

Library use::

    from torchneuron.check import CheckConfig, run
    result = run(CheckConfig(model="mlp", iterations=50))  # a CheckResult (result.py)
    result.verdict, result.exit_code, result.phase1.status, result.to_json()
"""

from __future__ import annotations

import functools

import torch

from .config import CheckConfig
from .errors import EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_PASS, EXIT_USAGE, CheckUsageError
from .result import CheckResult, Phase1Result
from .runner import run, write_outputs


@functools.cache
def autocast_available(dtype: torch.dtype = torch.bfloat16) -> bool:
    """Whether ``torch.autocast("neuron", dtype)`` actually changes a matmul's result
    dtype to ``dtype`` (False while autocast is not wired for the device)."""
    try:
        a = torch.ones(4, 4, device="neuron")
        with torch.autocast("neuron", dtype=dtype):
            out = a @ a
        return out.dtype == dtype
    except Exception:
        return False


__all__ = [
    "CheckConfig",
    "CheckResult",
    "CheckUsageError",
    "EXIT_FAIL",
    "EXIT_INCONCLUSIVE",
    "EXIT_PASS",
    "EXIT_USAGE",
    "Phase1Result",
    "autocast_available",
    "run",
    "write_outputs",
]
