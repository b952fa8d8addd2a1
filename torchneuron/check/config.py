"""The options of one ``torchneuron check`` run (what the CLI parses)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

#: Default ``tol`` of the accuracy rule per dtype: the inference defaults of PyTorch's
#: dynamo benchmark harness (``benchmarks/dynamo/torchbench.py``,
#: ``get_tolerance_and_cosine_flag``: 1e-4 for float32, 1e-3 under fp16/amp; bf16
#: models on its "higher_bf16" list get 1e-2, which we use for every bf16 model
#: because bfloat16 keeps only 8 significand bits).
DEFAULT_TOL: dict[str, float] = {"float32": 1e-4, "float16": 1e-3, "bfloat16": 1e-2}

#: Default length of the rolling window of the warm-up (iterations), shortened to
#: ``max_warmup`` when that is smaller and no window is given.
DEFAULT_CV_WINDOW = 10

#: Default regression thresholds against a baseline (fractions: 0.10 = +10 %; bytes).
DEFAULT_THRESHOLDS: dict[str, float] = {
    "latency_p50": 0.10,
    "peak_memory": 0.10,
    # an increase must also exceed this many bytes: the peak of a tiny model moves by a few
    # allocator blocks between identical runs (frees are stream-ordered, so timing matters)
    "peak_memory_min_bytes": 1 << 20,
    # the exact gates (baseline/exact.py): fractions, then increases in counts
    "projected_time": 0.10,
    "kernels": 0.10,
    "fallbacks": 0,
    "graph_breaks": 0,
    "recompiles": 0,
    "new_signatures": 0,
}


@dataclass
class CheckConfig:
    """Everything that decides what a check measures. Times are in seconds."""

    model: str
    batch_size: int | None = None  # None: the factory's default
    dtype: str = "float32"  # float32 | bfloat16 | float16 (autocast)
    seed: int = 0
    device: str = "neuron"
    reference: str = "cpu"  # cpu | cuda
    tol: float | None = None  # None: DEFAULT_TOL[dtype]
    fallback: str | None = None  # None: keep the process setting; warn | error
    mode: str = "both"  # eager | compile | both (torch.compile backend neuron)
    # phase 3
    iterations: int | None = 100  # measured iterations (when seconds is None)
    seconds: float | None = None  # measure for this long instead
    max_warmup: int = 100  # bound on warm-up iterations
    cv_window: int | None = None  # iterations in the rolling window; None: DEFAULT_CV_WINDOW,
    # at most max_warmup (a given one may not exceed it)
    cv_threshold: float = 0.05  # stable when rolling CV <= this
    skip_reference_perf: bool = False
    timing_threads: int | None = (
        1  # PyTorch intra-op threads while timing; None/0: PyTorch's default
    )
    # baseline
    baseline: str | None = None
    save_baseline: str | None = None
    max_latency_regression: float | None = None  # None: baseline's or default
    max_memory_regression: float | None = None
    max_projected_time_regression: float | None = (
        None  # the exact gates: None: baseline's or default
    )
    max_kernel_regression: float | None = None
    max_fallback_increase: int | None = None
    max_graph_break_increase: int | None = None
    max_recompile_increase: int | None = None
    max_new_signature_increase: int | None = None
    gate_host_latency: bool = False  # the emulator's host latency decides (today's statistics)
    launch_overhead_us: float | None = None  # eager projection's cost per launch; None: default
    max_rounds: int = 3  # measurement rounds before "inconclusive"
    baseline_runs: int = 3  # --save-baseline: processes phase 3 is measured in; --baseline:
    # at most, to confirm a latency regression (baseline_runs.py)
    baseline_process: bool = False  # internal: this run is one of a baseline's extra processes
    # cost
    instance: str | None = None  # None: default for the device
    price_per_hour: float | None = None
    reference_instance: str | None = None  # None: default for the reference device
    reference_price_per_hour: float | None = None
    amortize_samples: int = 1_000_000
    max_cost_per_million: float | None = None
    train_steps: int = 5  # optimizer steps of the training check (factories with a loss_fn)
    projection: bool = False  # project Trainium2/3 time and cost from the StableHLO graph
    # outputs
    json_path: str | None = None
    junit_path: str | None = None
    html_path: str | None = None
    progress: bool = True
    profile: bool = False  # --profile: torch.profiler of one steady-state iteration
    argv: list[str] = field(default_factory=list)

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype of ``dtype``."""
        return DTYPES[self.dtype]

    @property
    def effective_tol(self) -> float:
        """``tol``, else the default for ``dtype``."""
        return self.tol if self.tol is not None else DEFAULT_TOL[self.dtype]

    @property
    def effective_cv_window(self) -> int:
        """``cv_window``, else DEFAULT_CV_WINDOW shortened to ``max_warmup`` (at least 2)."""
        if self.cv_window is not None:
            return self.cv_window
        return max(2, min(DEFAULT_CV_WINDOW, self.max_warmup))

    def to_dict(self) -> dict:
        """JSON-ready options."""
        return dataclasses.asdict(self)
