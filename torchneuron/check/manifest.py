"""The version manifest recorded in every result and baseline: software versions, the
device stack, the host, the instance profile and the environment that changes behaviour."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from importlib import metadata

import torch

import torchneuron

#: Environment variable prefixes recorded (the Neuron runtime's and ours).
ENV_PREFIXES = ("NEURON_", "TORCHNEURON_")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def host_cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def compile_backend_available(name: str = "neuron") -> bool:
    """Whether ``torch.compile(backend=name)`` is registered (imports torch._dynamo)."""
    try:
        import torch._dynamo as dynamo

        return name in dynamo.list_backends(exclude_tags=())
    except Exception:
        return False


def device_stack(device: str = "neuron") -> dict:
    """The device stack in use: runtime name and version, graph compiler, and the
    profile of the logical NeuronCore the check runs on (HBM bytes, LNC)."""
    info = dict(torch.neuron.runtime_info())
    dev = torch.device(device)
    props = torch.neuron.get_device_properties(dev.index if dev.index is not None else None)
    has_compiler = compile_backend_available("neuron")
    return {
        "runtime": info.get("name"),
        "runtime_version": info.get("version"),
        "compiler": "torch.compile backend 'neuron'" if has_compiler else None,
        "compiler_version": torchneuron.__version__ if has_compiler else None,
        "compiler_note": None
        if has_compiler
        else "no graph compiler in this build (torch.compile(backend='neuron') is not registered): eager only",
        "emulated": info.get("name") == "emulator",
        "device_name": props.name,
        "hbm_bytes_per_core": props.total_memory,
        "logical_nc_config": props.logical_nc_config,
        "logical_cores_total": info.get("logical_cores_total"),
        "visible_cores": info.get("visible"),
        "launch_blocking": info.get("launch_blocking"),
        "protect_memory": info.get("protect_memory"),
    }


def collect(device: str = "neuron", argv: list[str] | None = None) -> dict:
    """The whole manifest: a flat-ish JSON-ready dict."""
    try:
        cores_usable = len(os.sched_getaffinity(0))
    except AttributeError:
        cores_usable = os.cpu_count()
    return {
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(argv) if argv else None,
        "versions": {
            "torch": torch.__version__,
            "torchneuron": torchneuron.__version__,
            "python": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            "numpy": _version("numpy"),
            "transformers": _version("transformers"),
            "safetensors": _version("safetensors"),
        },
        "device_stack": device_stack(device),
        "host": {
            "cpu_model": host_cpu_model(),
            "cpu_count": os.cpu_count(),
            "cpu_usable": cores_usable,
            "torch_threads": torch.get_num_threads(),
            "os": platform.platform(),
            "machine": platform.machine(),
            "executable": sys.executable,
        },
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
    }


def diff(old: dict, new: dict, prefix: str = "") -> list[dict]:
    """Entries that differ between two manifests: ``[{"key", "baseline", "current"}]``
    (``created_utc`` and ``command`` are ignored)."""
    out: list[dict] = []
    for k in sorted(set(old) | set(new)):
        if not prefix and k in ("created_utc", "command"):
            continue
        a, b = old.get(k), new.get(k)
        key = f"{prefix}{k}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += diff(a, b, key + ".")
        elif a != b:
            out.append({"key": key, "baseline": a, "current": b})
    return out
