"""One device activity of a kernel trace, shared by the trace (``phases/trace.py``) and the
eager projection (``projection/kernels.py``), which sits below the phases."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

#: Element sizes of the profiler's dtype names (``_KinetoEvent.dtypes()``).
DTYPE_BYTES = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
}


#: The profiler's dtype names of torch dtypes (for kernels not read from a trace).
PROFILER_DTYPE = {
    torch.float64: "double",
    torch.float32: "float",
    torch.float16: "c10::Half",
    torch.bfloat16: "c10::BFloat16",
    torch.int64: "long int",
    torch.int32: "int",
    torch.int16: "short int",
    torch.int8: "signed char",
    torch.uint8: "unsigned char",
    torch.bool: "bool",
}


@dataclass
class Kernel:
    """One device activity: ``kind`` kernel | graph | fused | fallback | htod | dtoh | dtod;
    ``op`` the launching ATen operator (shapes and dtypes of its inputs; scalars as
    ``concrete``). A ``fused`` segment (adaptive eager execution) lists in ``ops`` the
    kernels it stands for, when known."""

    name: str
    kind: str
    op: str | None = None
    shapes: list = field(default_factory=list)
    dtypes: list = field(default_factory=list)
    concrete: list = field(default_factory=list)
    ops: list = field(default_factory=list)

    def tensors(self) -> list[tuple[list[int], str]]:
        """The (shape, dtype) of each tensor input of the launching operator."""
        return [
            (list(s), d)
            for s, d in zip(self.shapes, self.dtypes)
            if d in DTYPE_BYTES and isinstance(s, (list, tuple))
        ]

    def copy_bytes(self) -> int:
        """Bytes a copy moved: its source tensor (the launching copy's first tensor)."""
        ts = self.tensors()
        return math.prod(ts[0][0]) * DTYPE_BYTES[ts[0][1]] if ts else 0
