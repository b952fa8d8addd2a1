"""Shared fixtures of the torchneuron test suite.

The device is the emulated NeuronCore (4 logical cores at the default
NEURON_LOGICAL_NC_CONFIG=2). Tests that need another environment (visible
cores, HBM capacity, strict fallback, launch blocking) run a fresh Python
process through ``run_python``; TORCHNEURON_PROTECT_MEMORY is passed on, so
the protected-memory run of the suite covers those processes too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import torchneuron  # noqa: E402,F401  (autoload does this too; explicit for clarity)

# Variables that shape the device; a child process starts without them
# unless a test sets them (TORCHNEURON_PROTECT_MEMORY is kept: see above).
_DEVICE_ENV = (
    "NEURON_RT_VISIBLE_CORES",
    "NEURON_LOGICAL_NC_CONFIG",
    "NEURON_LAUNCH_BLOCKING",
    "TORCHNEURON_HBM_GIB",
    "TORCHNEURON_FALLBACK",
    "TORCHNEURON_NARROW_64BIT",
    "TORCHNEURON_WARN_PER_OP",  # set by an in-process `torchneuron check`
)


def run_python(
    code: str, env: dict[str, str] | None = None, timeout: float = 60, check: bool = True
) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with ``env`` added to a clean device
    environment. With ``check``, a non-zero exit fails the test and shows stderr."""
    full_env = {k: v for k, v in os.environ.items() if k not in _DEVICE_ENV}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        pytest.fail(
            f"child process failed (rc={proc.returncode}):\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc


def run_python_many(jobs: dict, timeout: float = 120) -> dict:
    """Run several ``{key: (code, env)}`` child processes at once (they spend
    most of their time importing torch); returns ``{key: CompletedProcess}``."""
    procs = {}
    for key, (code, env) in jobs.items():
        full_env = {k: v for k, v in os.environ.items() if k not in _DEVICE_ENV}
        full_env.update(env or {})
        procs[key] = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    out = {}
    for key, p in procs.items():
        stdout, stderr = p.communicate(timeout=timeout)
        out[key] = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    return out


@pytest.fixture
def run_py():
    return run_python


def assert_device_works(device: str | torch.device = "neuron") -> None:
    """The device still computes correctly (used after every expected error)."""
    x = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3)
    y = (x * 2 + 1).sum(dim=1)
    torch.neuron.synchronize(torch.device(device))
    assert torch.equal(y.cpu(), torch.tensor([9.0, 27.0]))


_NARROW_AT_START = torchneuron._C._narrow_64bit()
_FALLBACK_MODE_AT_START = torchneuron._C._fallback_mode()


@pytest.fixture(autouse=True)
def _device_state():
    """Each test starts on neuron:0 and the default stream; afterwards every
    core must be drained without a pending asynchronous error."""
    torch.neuron.set_device(0)
    yield
    errors = []
    for d in range(torch.neuron.device_count()):
        try:
            torch.neuron.synchronize(d)
        except RuntimeError as e:  # an asynchronous error the test left behind
            errors.append(f"neuron:{d}: {e}")
        torch.neuron.set_stream(torch.neuron.default_stream(d))
    torch.neuron.set_device(0)
    torchneuron._C._set_fallback_mode(_FALLBACK_MODE_AT_START)
    torchneuron._C._set_narrow_64bit(_NARROW_AT_START)
    assert not errors, "test left asynchronous errors behind: " + "; ".join(errors)


# A few operators without a native kernel, with in-place and out= variants,
# in order of preference. Tests take the first that really falls back (the
# native op list grows over time; see csrc/aten/native_ops.h).
_FALLBACK_CANDIDATES = ("erfc", "digamma", "lgamma", "i0", "sinc")


def find_fallback_op() -> str | None:
    """Name of a unary torch function that runs through the CPU fallback."""
    x = torch.linspace(0.5, 2.0, 4, device="neuron")
    for name in _FALLBACK_CANDIDATES:
        torch.neuron.reset_fallback_stats()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(torch, name)(x)
        hit = any(name in op for op in torch.neuron.fallback_stats())
        torch.neuron.reset_fallback_stats()
        if hit:
            return name
    return None


@pytest.fixture(scope="session")
def fallback_op() -> str:
    name = find_fallback_op()
    if name is None:
        pytest.skip("every candidate operator has a native kernel now")
    return name


@pytest.fixture(scope="module")
def burners(request):
    """One busy-looping process per core, for the module's duration. Each ends itself after
    the module's ``BURN_SECONDS``, even if the test process dies."""
    seconds = request.module.BURN_SECONDS
    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]
    yield procs
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()
