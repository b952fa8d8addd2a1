"""Environment settings of the compile path, read when a graph is compiled.

Every variable is listed in docs/compile.md. Names are TorchNeuron's where the
meaning is TorchNeuron's (TORCH_NEURONX_*, NEURON_*), TORCHNEURON_* otherwise.
"""

from __future__ import annotations

import os

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(name: str, default: bool) -> bool:
    """A boolean variable: 1/true/yes/on or 0/false/no/off (any case); unset or empty:
    ``default``. Another value is a ValueError naming the variable (it was read as 1:
    a typo such as "ture" or "disable" silently turned a switch on)."""
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    w = v.strip().lower()
    if w in _TRUE:
        return True
    if w in _FALSE:
        return False
    raise ValueError(
        f"{name}={v!r} is not a boolean; use 1 or 0 (also accepted: true/false, yes/no, on/off)"
    )


def fallback_execution_disabled() -> bool:
    """TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION (default 1): compile failures raise."""
    return _flag("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", True)


def neff_cache_dir() -> str:
    """TORCH_NEURONX_NEFF_CACHE_DIR, default /tmp/neff_cache (TorchNeuron's default)."""
    return os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or "/tmp/neff_cache"


def neff_cache_disabled() -> bool:
    """TORCH_NEURONX_DISABLE_NEFF_CACHE=1 (or TORCH_NEURONX_NEFF_DISABLE_CACHE=1)."""
    return _flag("TORCH_NEURONX_DISABLE_NEFF_CACHE", False) or _flag(
        "TORCH_NEURONX_NEFF_DISABLE_CACHE", False
    )


def cpu_autocopy_disabled() -> bool:
    """TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1: CPU inputs are an error, not copied."""
    return _flag("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", False)


def debug_dir() -> str | None:
    """TORCH_NEURONX_DEBUG_DIR: where per-graph artifacts go (None: nowhere)."""
    return os.environ.get("TORCH_NEURONX_DEBUG_DIR") or None


def preserve_artifacts() -> bool:
    """TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1: keep them in the debug dir."""
    return _flag("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", False)


def cc_flags() -> str:
    """NEURON_CC_FLAGS: extra flags for the compiler (see neuron_cc.py)."""
    return os.environ.get("NEURON_CC_FLAGS", "")


def opt_level() -> int:
    """NEURON_COMPILER_OPT_LEVEL: 1, 2 or 3; default 2 for compiled graphs (as TorchNeuron)."""
    v = os.environ.get("NEURON_COMPILER_OPT_LEVEL", "").strip()
    if not v:
        return 2
    if v not in ("1", "2", "3"):
        raise ValueError(f"NEURON_COMPILER_OPT_LEVEL must be 1, 2 or 3, got {v!r}")
    return int(v)


def lower_in_process() -> bool:
    """TORCHNEURON_LOWER_IN_PROCESS=1: torch-mlir's conversion runs in this process, not in
    a forked child (faster by the fork, ~10-30 ms a graph; a crash in torch-mlir then ends
    the process instead of raising NeuronCompileError). Default 0; always 1 where fork is
    unavailable."""
    return _flag("TORCHNEURON_LOWER_IN_PROCESS", False)


_model_name: str | None = None


def set_model_name(name: str) -> None:
    """The ``model_name`` a torch.compile call without that option uses (names graphs,
    metrics and artifacts; TorchNeuron's ``neuron_dynamo_backend.set_model_name``).
    ValueError for an empty or non-str name."""
    global _model_name
    if not isinstance(name, str) or not name:
        raise ValueError(f"set_model_name: the name must be a non-empty str, got {name!r}")
    _model_name = name


def model_name() -> str:
    """The name set by ``set_model_name``, else "model_default" (TorchNeuron's)."""
    return _model_name or "model_default"


def partitioner() -> str:
    """TORCHNEURON_PARTITIONER: AOTAutograd's joint-graph partitioner, "min_cut" (default,
    Inductor's) or "default" (saves every intermediate the backward graph reads)."""
    v = os.environ.get("TORCHNEURON_PARTITIONER", "min_cut")
    if v not in ("min_cut", "default"):
        raise ValueError(f"TORCHNEURON_PARTITIONER must be 'min_cut' or 'default', got {v!r}")
    return v


def aot_cache() -> bool:
    """TORCHNEURON_AOT_CACHE=1 (default 0): AOTAutograd's results (the traced, partitioned
    graphs and their runtime wrappers) are kept in PyTorch's AOTAutogradCache, so a new
    process skips AOTAutograd's tracing (aot_cache.py)."""
    return _flag("TORCHNEURON_AOT_CACHE", False)
