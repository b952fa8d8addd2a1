"""Phase 1: does the model run on the device.

Runs the model on the ``neuron`` device in eager mode and records: success or the
exception with the failing operator and the traceback; the operators that fell back
to the CPU with their calls and share of the device run time; 64-bit narrowing events;
peak device memory (allocated: in program order, ``memory.py``, and with the host running
ahead; reserved); whether two device runs give bitwise
identical outputs; host dispatch time per operator (torch.profiler); and the cold
(first-iteration) latency. A model that fails the same way on the reference device
(or returns no tensor there either) is bad input: CheckUsageError. ``torch.compile(backend="neuron")`` is checked when that
backend is registered (check/phases/compiled.py); otherwise the result says that only eager mode was checked.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import reprlib
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..config import CheckConfig
from ..errors import CheckUsageError
from ..manifest import compile_backend_available
from ..model import tensors as T
from ..model.loading import LoadedModel
from ..result import Phase1Result
from ..result_compile import CompileCheckResult
from . import memory

_OP_IN_MESSAGE = re.compile(r"\baten::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?")


@dataclass
class DeviceSession:
    """The model and inputs on the device, kept for phases 2 and 3."""

    device: str
    model: torch.nn.Module | None = None
    inputs: Any = None
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)  # first run, on the CPU
    compiled_outputs: dict | None = None  # torch.compile(backend="neuron")'s first run, on the CPU
    sync: Any = None
    compiled_model: Any = None  # --mode both: the compiled model phase 3 times beside eager


class _OpRecorder(TorchDispatchMode):
    """Remembers the ATen operator during which an exception was raised."""

    def __init__(self):
        super().__init__()
        self.failed: str | None = None
        self.last: str | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.last = _op_name(func)
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            if self.failed is None:
                self.failed = self.last
            raise


def _op_name(func) -> str:
    # aten.sort.default -> aten::sort.default (the name the dispatcher and fallback use)
    s = str(func)
    ns, _, rest = s.partition(".")
    return f"{ns}::{rest}" if rest else s


def _fallback_ctx(mode: str | None):
    return torch.neuron.fallback_mode(mode) if mode else contextlib.nullcontext()


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _raised_at(frames: list, user_file: str | None):
    """The frame to show as where an exception was raised: the innermost in the user's
    factory file, else the innermost outside torch and torchneuron, else the innermost.
    Paths are compared resolved (a venv reached through a symlink names torch's files
    differently from ``torch.__file__``)."""
    lib = [
        os.path.realpath(os.path.dirname(torch.__file__)),
        os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    ]
    real = [os.path.realpath(f.filename) for f in frames]
    if user_file:
        mine = [f for f, r in zip(frames, real) if r == os.path.realpath(user_file)]
        if mine:
            return mine[-1]
    mine = [f for f, r in zip(frames, real) if not any(_under(r, d) for d in lib)]
    return mine[-1] if mine else (frames[-1] if frames else None)


#: (pattern in the exception message, hint) for failures with a known way around them.
HINTS: list[tuple[str, str]] = [
    (
        "failed to legalize operation",
        "the compile path has no lowering for this operator: --mode eager checks the model "
        "without compiling, and torch.compile(..., options={'fallback_execution': True}) "
        "runs such a graph eagerly on neuron",
    ),
    (
        "nested",
        "nn.TransformerEncoder's fast path builds nested tensors, which the device does not "
        "support: construct it with enable_nested_tensor=False",
    ),
    (
        "with arguments from the 'neuron' backend",
        "this operator has no neuron kernel: TORCHNEURON_FALLBACK=warn runs it on the CPU",
    ),
    (
        "out of memory",
        "the model does not fit the NeuronCore's HBM: a smaller --batch-size, or bfloat16",
    ),
]


def short_message(msg: str, limit: int = 240) -> str:
    """The first line of an exception message, at most ``limit`` characters (the
    dispatcher's full text, listing every backend, stays in the JSON)."""
    lines = [ln for ln in msg.strip().splitlines() if ln.strip()]
    # Dynamo wraps a backend's error: "backend='neuron' raised:" then the error itself
    if len(lines) > 1 and lines[0].rstrip().endswith("raised:"):
        lines = lines[1:]
    first = lines[0] if lines else ""
    if len(first) <= limit:
        return first
    cut = first[:limit]
    return (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2 :] else cut) + " ..."  # at a word's end


def hint_for(msg: str) -> str | None:
    """The known way around a failure, from its message (None when none is known)."""
    low = msg.lower()
    return next((h for pat, h in HINTS if pat.lower() in low), None)


def _error_info(e: BaseException, stage: str, user_file: str | None = None) -> dict:
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    f = _raised_at(traceback.extract_tb(e.__traceback__), user_file)
    where = f"{f.filename}:{f.lineno} in {f.name}" if f else None
    msg = str(e)
    m = _OP_IN_MESSAGE.search(msg)
    return {
        "stage": stage,
        "type": type(e).__name__,
        "message": msg if len(msg) < 4000 else msg[:4000] + " ... (truncated)",
        "short_message": short_message(msg),
        "hint": hint_for(msg),
        "op": m.group(0) if m else None,
        "op_source": "exception message" if m else None,
        "raised_at": where,  # innermost frame in the user's file, else outside torch and torchneuron
        "traceback": tb,
    }


def _find_failing_op(session: DeviceSession, cfg: CheckConfig) -> str | None:
    """Re-run the forward pass under an op recorder to name the operator that raised.
    Returns None when the failure came from Python code outside any operator, or did
    not happen again."""
    rec = _OpRecorder()
    try:
        with _fallback_ctx(cfg.fallback), rec:
            T.call(
                session.model, session.inputs, torch.device(session.device).type, cfg.torch_dtype
            )
        session.sync()
    except Exception:
        return rec.failed
    return None


class NoTensorsError(RuntimeError):
    """The model's forward returned no tensor (None, a number, an empty tuple...)."""


def describe_value(x: Any) -> str:
    """What a forward pass returned, in words: ``None``, ``a float (0.5)``, ``a tuple of 2 (int, str)``."""
    if x is None:
        return "None"
    if isinstance(x, (tuple, list, dict)):
        vals = list(x.values()) if isinstance(x, dict) else list(x)
        kinds = ", ".join(sorted({type(v).__name__ for v in vals}))
        return f"a {type(x).__name__} of {len(vals)}" + (
            f" ({kinds}), with no tensor in it" if vals else ""
        )
    return f"a {type(x).__name__} ({reprlib.repr(x)})"


def _forward_stage(stage: str) -> bool:
    return "forward pass" in stage


def _check_reference(
    loaded: LoadedModel, cfg: CheckConfig, e: BaseException, err: dict
) -> str | None:
    """Run the model once on the reference device after it failed on the device. Raises
    CheckUsageError when it fails there the same way (a model or input error, exit 2);
    returns a note for the device failure otherwise."""
    ref = cfg.reference
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = T.model_copy(loaded.model, ref)
            raw = T.call(
                model, T.to_device(loaded.inputs, ref), torch.device(ref).type, cfg.torch_dtype
            )
            T.synchronizer(ref)()
    except Exception as r:
        if type(r) is not type(e) or isinstance(e, NoTensorsError):
            return f"on the reference device {ref} it raises {type(r).__name__}: {r}"
        rerr = _error_info(r, "", loaded.path)
        raise CheckUsageError(
            f"model {loaded.spec!r} fails on the reference device {ref} too: this is a model/input error, "
            f"not a device problem\n{type(r).__name__}: {r}"
            + (f"\nfailing op on {cfg.device}: {err['op']}" if err.get("op") else "")
            + (f"\nraised at: {rerr['raised_at']}" if rerr["raised_at"] else "")
            + "\n"
            + "".join(
                traceback.format_exception(type(r), r, r.__traceback__, limit=-6, chain=False)
            ).rstrip()
        ) from r
    if isinstance(e, NoTensorsError) and not T.flatten(raw):
        raise CheckUsageError(
            f"model {loaded.spec!r} returned no tensors: forward returned {describe_value(raw)} on the "
            f"reference device {ref} as on {cfg.device}; it must return a tensor, or tuples, lists or dicts "
            "of tensors"
        )
    return f"the model runs on the reference device {ref}"


def _outputs_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict:
    per = {}
    for k, x in a.items():
        y = b.get(k)
        if y is None or x.shape != y.shape or x.dtype != y.dtype:
            per[k] = {"identical": False, "max_abs_diff": None}
            continue
        same = torch.equal(x, y) or bool(
            torch.equal(torch.isnan(x), torch.isnan(y))
            and torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))
        )
        diff = 0.0 if same else T.max_abs_diff(x, y, nan_to_num=True)
        per[k] = {"identical": same, "max_abs_diff": diff}
    return {
        "identical": all(v["identical"] for v in per.values()) and set(a) == set(b),
        "outputs": per,
    }


def profile_ops(session: DeviceSession, cfg: CheckConfig, top: int = 25) -> list[dict]:
    """Host time per ATen operator over one device forward pass: torch.profiler with CPU
    activity, self time (``self_cpu_time_total``), in seconds. This is the time the host
    spends dispatching (and, for CPU fallbacks and copies, executing and waiting), not
    the device's execution time of each kernel. ``prims::`` entries (decompositions
    inside an aten op) are left out."""
    from torch.profiler import ProfilerActivity, profile

    dev_type = torch.device(session.device).type
    with _fallback_ctx(cfg.fallback), warnings.catch_warnings(), _quiet_stderr_fd():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            T.call(session.model, session.inputs, dev_type, cfg.torch_dtype)
            session.sync()
    rows = [
        {"op": e.key, "calls": int(e.count), "self_host_s": e.self_cpu_time_total / 1e6}
        for e in prof.key_averages()
        if e.key.startswith("aten::")
    ]
    rows.sort(key=lambda r: r["self_host_s"], reverse=True)
    return rows[:top]


@contextlib.contextmanager
def _quiet_stderr_fd():
    """Silence file descriptor 2 (Kineto prints profiler_start/stop lines from C++)."""
    import sys

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _check_compile(
    session: DeviceSession, cfg: CheckConfig, eager: dict[str, torch.Tensor], resident_bytes: int
) -> CompileCheckResult:
    if not compile_backend_available("neuron"):
        return CompileCheckResult(
            checked=False,
            modes=["eager"],
            note="torch.compile(backend='neuron') does not exist in this build "
            "(no graph compiler registered): only eager mode was checked",
        )
    from .compiled import check_compile, use_compiled  # issue 6: compiled mode

    if cfg.mode == "eager":
        return CompileCheckResult(
            checked=False,
            modes=["eager"],
            note="--mode eager: torch.compile(backend='neuron') was not checked",
        )
    res = check_compile(session, cfg, eager, _error_info, resident_bytes)
    if cfg.mode == "compile" and res.ok:
        use_compiled(session, cfg)
        res.phases_2_3 = "compiled"
    return res


def run(loaded: LoadedModel, cfg: CheckConfig, ui) -> tuple[Phase1Result, DeviceSession]:
    """Run phase 1. Returns the phase result and the device session (its ``model`` is None
    when the model could not be placed on the device)."""
    dev = torch.device(cfg.device)
    session = DeviceSession(device=str(dev), sync=T.synchronizer(dev))
    res = Phase1Result(
        status="fail",
        device=str(dev),
        mode="eager",
        error=None,
        fallback_mode=cfg.fallback or _current_fallback_mode(),
    )
    gc.collect()  # device garbage of earlier work in this process freed now, not inside weights_bytes
    session.sync()
    torch.neuron.reset_fallback_stats()
    torch.neuron.reset_narrowing_stats()
    torch.neuron.reset_peak_memory_stats(dev)
    timed, caught, weights = _eager_passes(res, session, loaded, cfg, dev, ui)
    res.warnings = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    res.outputs = T.describe_outputs(session.outputs)
    if res.error is None:
        timed += _op_profile(res, session, cfg)
    # the eager runs' fallbacks and narrowing, before the compiled runs add theirs (their
    # time is not in `timed`; compiled launches count narrowing too)
    fb = torch.neuron.fallback_stats()
    narrowing = torch.neuron.narrowing_stats()
    # the peaks so far (the host running ahead of the device), before the in-order pass resets them
    ahead = [torch.neuron.max_memory_allocated(dev), torch.neuron.max_memory_reserved(dev)]
    in_order = {"peak_allocated_bytes": None, "note": "not measured: the model failed"}
    if res.error is None:
        in_order = _in_order_and_compile(res, session, cfg, weights)
    else:
        res.compile = _eager_only_compile()
    res.fallback = _fallback_summary(fb, timed)
    res.narrowing = dict(sorted(narrowing.items()))
    try:
        session.sync()
    except Exception as e:  # an asynchronous failure that surfaced late
        if res.error is None:
            res.error = _error_info(e, "synchronize after the runs")
    ahead = [
        max(ahead[0], torch.neuron.max_memory_allocated(dev)),
        max(ahead[1], torch.neuron.max_memory_reserved(dev)),
    ]
    res.memory = _memory_summary(res, dev, in_order, ahead, weights)
    res.status = "pass" if res.error is None else "fail"
    return res, session


def _eager_passes(
    res: Phase1Result, session: DeviceSession, loaded: LoadedModel, cfg: CheckConfig, dev, ui
) -> tuple[float, list, int | None]:
    """Place the model, run its cold and second (determinism) passes; on an exception, its
    stage, failing operator and whether the reference fails too (``res.error``). Returns
    the device runs' wall seconds, the warnings caught and the weights' bytes on the device
    (None when they were not placed)."""
    mem0 = torch.neuron.memory_allocated(dev)
    timed, weights = 0.0, None
    caught: list[warnings.WarningMessage] = []
    stage = "moving the model and inputs to the device"
    try:
        with _fallback_ctx(cfg.fallback), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ui.step(f"Phase 1: placing the model on {dev}")
            session.model = T.model_copy(loaded.model, dev)
            session.inputs = T.to_device(loaded.inputs, dev)
            session.sync()
            weights = torch.neuron.memory_allocated(dev) - mem0
            stage = "first forward pass (cold)"
            ui.step("Phase 1: first forward pass (cold)")
            t0 = time.perf_counter()
            raw = T.call(session.model, session.inputs, dev.type, cfg.torch_dtype)
            session.sync()
            res.cold_latency_s = time.perf_counter() - t0
            timed += res.cold_latency_s
            res.uncomparable_outputs = []
            out1 = T.flatten(raw, uncomparable=res.uncomparable_outputs, numbers=True)
            if not T.flatten(raw):
                raise NoTensorsError(
                    f"the model returned no tensors on {dev}: it returned {describe_value(raw)}"
                )
            del raw
            session.outputs = T.to_cpu(out1)
            del out1
            stage = "second forward pass (determinism)"
            t0 = time.perf_counter()
            out2 = T.to_cpu(
                T.flatten(
                    T.call(session.model, session.inputs, dev.type, cfg.torch_dtype), numbers=True
                )
            )
            session.sync()
            timed += time.perf_counter() - t0
            res.determinism = _outputs_identical(session.outputs, out2)
            del out2
    except Exception as e:
        err = _error_info(e, stage, loaded.path)
        if (
            err["op"] is None
            and session.model is not None
            and session.inputs is not None
            and not isinstance(e, NoTensorsError)
        ):
            op = _find_failing_op(session, cfg)
            if op:
                err["op"], err["op_source"] = op, "re-run under an operator recorder"
        if _forward_stage(stage):
            err["reference"] = _check_reference(
                loaded, cfg, e, err
            )  # raises when it fails there too
        res.error = err
    return timed, caught, weights


def _op_profile(res: Phase1Result, session: DeviceSession, cfg: CheckConfig) -> float:
    """Host time per operator over one forward pass (``res.op_profile``); returns the
    pass's wall seconds (0 when profiling failed)."""
    timed = 0.0
    try:
        t0 = time.perf_counter()
        res.op_profile = profile_ops(session, cfg)
        timed += time.perf_counter() - t0
        res.op_profile_note = (
            "host time per operator (torch.profiler, CPU activity, self "
            "time) over one forward pass: dispatch time, plus execution "
            "and waiting for CPU fallbacks and copies; not device kernel time"
        )
    except Exception as e:
        res.op_profile = []
        res.op_profile_note = f"profiling failed: {type(e).__name__}: {e}"
    return timed


def _in_order_and_compile(
    res: Phase1Result, session: DeviceSession, cfg: CheckConfig, weights: int | None
) -> dict:
    """The in-order peak memory pass, then the compile check (``res.compile``, its narrowing
    and warnings; a failed compile is phase 1's error). Returns the in-order peak."""
    with _fallback_ctx(cfg.fallback), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # phase 1's passes above recorded the warnings
        in_order = memory.in_order_peak(session, cfg.torch_dtype, weights)
    before = torch.neuron.narrowing_stats()
    # the compiled runs' device warnings (64-bit narrowing of ops eager did not run) go to
    # the report's warnings section, not raw to stderr
    with (
        _fallback_ctx(cfg.fallback),
        warnings.catch_warnings(record=True) as caught_c,
    ):  # filters kept
        res.compile = _check_compile(session, cfg, session.outputs, weights)
    res.warnings = sorted(
        set(res.warnings) | {f"{w.category.__name__}: {w.message}" for w in caught_c}
    )
    if res.compile.checked:
        after = torch.neuron.narrowing_stats()
        res.compile.narrowing = {
            k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] > before.get(k, 0)
        }
    if res.compile.checked and not res.compile.ok:
        res.error = res.compile.error
    return in_order


def _fallback_summary(fb: dict, timed: float) -> dict:
    """The CPU fallbacks by op: calls, seconds, share of the phase-1 device runs' wall time."""
    fb_total = sum(v["seconds"] for v in fb.values())
    return {
        "ops": {
            k: {
                "calls": int(v["calls"]),
                "seconds": float(v["seconds"]),
                "share": (v["seconds"] / timed) if timed > 0 else None,
            }
            for k, v in sorted(fb.items(), key=lambda kv: -kv[1]["seconds"])
        },
        "total_seconds": fb_total,
        "share": fb_total / timed if timed > 0 else None,
        "device_run_seconds": timed,
        "note": "share = fallback seconds (CPU kernel and copies) / wall time of the phase-1 device runs",
    }


def _memory_summary(
    res: Phase1Result, dev, in_order: dict, ahead: list, weights: int | None
) -> dict:
    """Peak device memory: in program order (what baselines compare), running ahead,
    reserved, the weights, the capacity; the compiled model's own peak beside."""
    mem = {
        # what baselines compare: program order (memory.py); the run-ahead peak moves between runs
        "peak_allocated_bytes": in_order["peak_allocated_bytes"] or ahead[0],
        "peak_allocated_basis": "in order" if in_order["peak_allocated_bytes"] else "run ahead",
        "peak_allocated_in_order_bytes": in_order["peak_allocated_bytes"],
        "peak_allocated_run_ahead_bytes": ahead[0],
        "peak_allocated_note": in_order.get("note"),
        "peak_reserved_bytes": ahead[1],
        "weights_bytes": weights,
        "capacity_bytes": torch.neuron.get_device_properties(
            dev.index if dev.index is not None else None
        ).total_memory,
    }
    # the figures above are the eager model's; the compiled model's own (memory.compiled_peak)
    cmem = res.compile.memory or {}
    mem["compiled_peak_allocated_bytes"] = cmem.get("peak_allocated_bytes")
    mem["compiled_peak_detail"] = cmem or None
    return mem


def _eager_only_compile() -> CompileCheckResult:
    """The compile entry when eager mode failed before the compile check."""
    return CompileCheckResult(
        checked=False,
        modes=["eager"],
        note=(
            "only eager mode was checked, and it failed; torch.compile(backend='neuron') "
            + (
                "was not tried"
                if compile_backend_available("neuron")
                else "does not exist in this build"
            )
        ),
    )


def _current_fallback_mode() -> str:
    from torchneuron import _C

    return _C._fallback_mode()
