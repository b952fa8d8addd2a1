"""Per-graph compile records: ``torch.neuron.get_dynamo_metrics()`` / ``reset_dynamo_metrics()``.

One record per compiled graph with TorchNeuron's fields (graph_id = cache key,
graph_name ``{model}_{aot_id}_{forward|backward|inference}_{n}``, model_name,
graph_node_count, timestamp, fx_passes_us, lower_us, compile_us; times in
microseconds) and ours (cache: "compiled", "disk" or "memory"; recompile_reason:
None for a first compile, else what changed; fallback: None for a compiled graph,
else the first line of the error after which it runs eagerly (a non-empty str); background_load_us: the time a background load (prefetch.py)
spent on the executable while AOTAutograd traced, not in compile_us, which counts
only the wait for it; temp_bytes: the executable's temporaries, XLA's buffer assignment,
which the emulator holds in host memory outside the device allocator). Dynamo's ``torch._dynamo.utils.counters["neuron"]`` counts
graphs, cache hits, recompiles, fallbacks and ``graph_runs`` (compiled-graph launches).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import asdict, dataclass

_lock = threading.Lock()
_records: list[dict] = []


@dataclass
class GraphMetrics:
    graph_id: str
    graph_name: str
    model_name: str
    graph_node_count: int
    timestamp: float
    fx_passes_us: float
    lower_us: float
    compile_us: float
    cache: str
    recompile_reason: str | None = None
    fallback: str | None = None
    background_load_us: float = 0.0
    temp_bytes: int = 0


def _counters():
    from torch._dynamo.utils import counters

    return counters["neuron"]


def count(name: str, n: int = 1) -> None:
    _counters()[name] += n


def record(m: GraphMetrics) -> None:
    with _lock:
        _records.append(asdict(m))
    c = _counters()
    c["graphs"] += 1
    if m.cache in ("disk", "memory"):
        c[f"cache_hit_{m.cache}"] += 1
    if m.recompile_reason and "_backward_" not in m.graph_name:
        c["recompiles"] += 1  # one per recompiled forward/inference graph, not its backward
    if m.fallback:
        c["fallback_graphs"] += 1


def get_dynamo_metrics() -> list[dict]:
    """A copy of the records, oldest first (one dict per compiled graph)."""
    with _lock:
        return copy.deepcopy(_records)


def reset_dynamo_metrics() -> None:
    """Forgets the records and Dynamo's counters["neuron"]."""
    with _lock:
        _records.clear()
    try:
        _counters().clear()
    except Exception:
        pass
