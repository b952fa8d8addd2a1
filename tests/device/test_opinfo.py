"""OpInfo sweep: every OpInfo of PyTorch's ``op_db`` in float32 on `neuron`
against the CPU (issue section 5).

Per OpInfo, the first samples of ``sample_inputs(device="cpu", float32)`` are
moved to `neuron` keeping their memory layout (same storage size, strides and
offset, so views and ``as_strided`` samples mean the same thing), and the
functional, in-place and ``out=`` variants are run on both devices. A variant
whose run went through the CPU fallback (``torch.neuron.fallback_stats``
changed) is counted as "fallback", not as native. Any mismatch fails the
test; the summary (pass / fail / fallback counts, failing ops, the aten ops
that fell back) is printed at the end (``pytest -s``) and written to
``build/opinfo_summary.txt``.
"""

from __future__ import annotations

import collections
import os
import time
import warnings
from pathlib import Path

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map

import torchneuron  # noqa: F401

MAX_SAMPLES = 5
RTOL, ATOL = 1.3e-6, 1e-5  # assert_close's float32 defaults, also used for narrowed float64
# Fused segments (make test-fused) compute float32 in a compiled graph, which rounds once
# where ATen's CPU kernels may round per op: the compile path's tolerance (its OpInfo sweep's).
FUSED = os.environ.get("TORCHNEURON_CONCATENATION_FUSE") == "1"

# Skipped: random results, uninitialised memory, sparse layouts (neuron
# tensors are strided only).
RANDOM_WORDS = (
    "rand",
    "normal",
    "bernoulli",
    "multinomial",
    "uniform",
    "dropout",
    "exponential",
    "cauchy",
    "geometric",
    "log_normal",
    "poisson",
    "rrelu",
)
UNINITIALISED = {
    "empty",
    "empty_like",
    "new_empty",
    "new_empty_strided",
    "empty_strided",
    "empty_permuted",
    "resize_",
    "resize_as_",
}
SPARSE = ("sparse.", "to_sparse")

# Non-input tensor arguments the op requires on the CPU (as on CUDA).
CPU_ARGS = {"tensor_split"}


# Results whose value the op leaves unspecified, per (op name, sample):
# batch norm in eval mode returns save_mean/save_invstd as [0] on the CPU and
# neuron (the CPU kernel's geometry), [C] of unspecified values on CUDA.
def _unspecified_results(op_name, sample):
    if op_name in ("native_batch_norm", "_native_batch_norm_legit") and not _training(sample):
        return {1, 2}
    return set()


def _training(sample):
    args = sample.args
    return bool(args[4]) if len(args) > 4 and isinstance(args[4], bool) else True


def _op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _skip_reason(op) -> str | None:
    if op.name in UNINITIALISED:
        return "uninitialised result"
    if any(w in op.name for w in RANDOM_WORDS):
        return "random"
    if op.name.startswith(SPARSE):
        return "sparse layout"
    if torch.float32 not in op.supported_dtypes("cpu"):
        return "no float32 on CPU"
    return None


OPS = list(op_db)
RESULTS: dict[str, dict] = {}


def to_neuron(t):
    """``t`` on neuron with the same storage size, strides and offset."""
    if not isinstance(t, torch.Tensor):
        return t
    if t.layout != torch.strided:
        return t.to("neuron")
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    return flat.to("neuron").as_strided(t.size(), t.stride(), t.storage_offset())


def _to_cpu(x):
    return tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, x)


def _tensors(x):
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _compare(got, ref, narrowed: bool, unspecified=frozenset()):
    if isinstance(ref, (tuple, list)) and unspecified:
        got = [g for i, g in enumerate(got) if i not in unspecified]
        ref = [r for i, r in enumerate(ref) if i not in unspecified]
    for t in _tensors(got):
        assert t.device.type == "neuron", f"a result is on {t.device}, not on neuron"
    got = _to_cpu(got)
    if narrowed:  # float64 computed as float32 (the 64-bit policy): float32 tolerances
        rtol = 1e-5 if FUSED else RTOL
        torch.testing.assert_close(got, ref, rtol=rtol, atol=ATOL, equal_nan=True)
    elif FUSED and any(t.dtype == torch.float32 for t in _tensors(ref)):
        g, r = _tensors(got), _tensors(ref)
        assert len(g) == len(r), f"{len(g)} results where the CPU gave {len(r)}"
        for a, b in zip(g, r):
            tol = {"rtol": 1e-5, "atol": 1e-5} if b.dtype == torch.float32 else {}
            torch.testing.assert_close(a, b, equal_nan=True, **tol)
    else:
        torch.testing.assert_close(got, ref, equal_nan=True)


class _Run:
    """One variant's run on neuron: its result, and whether it fell back or narrowed."""

    def __init__(self, fn):
        torch.neuron.reset_fallback_stats()
        torch.neuron.reset_narrowing_stats()
        self.error = None
        try:
            self.result = fn()
            torch.neuron.synchronize()
        except Exception as e:  # noqa: BLE001
            self.error = e
        self.fallbacks = set(torch.neuron.fallback_stats())
        self.narrowed = bool(torch.neuron.narrowing_stats())


def _variants(op):
    yield "functional", op
    if op.inplace_variant is not None:
        yield "inplace", op.inplace_variant
    if op.supports_out:
        yield "out", op


def _device_arg(a):
    if (isinstance(a, str) and a == "cpu") or (isinstance(a, torch.device) and a.type == "cpu"):
        return "neuron"
    return a


def _close(a, b) -> bool:
    try:
        torch.testing.assert_close(a, b, equal_nan=True)
        return True
    except AssertionError:
        return False


def _check_sample(op, sample, record):
    dev_sample = sample.transform(to_neuron)
    if op.name in CPU_ARGS:
        dev_sample.args, dev_sample.kwargs = sample.args, sample.kwargs
    # Device arguments (factory functions, Tensor.to) name neuron instead.
    dev_sample.args = tuple(_device_arg(a) for a in dev_sample.args)
    dev_sample.kwargs = {k: _device_arg(v) for k, v in dev_sample.kwargs.items()}
    unspecified = _unspecified_results(op.name, sample)
    for kind, fn in _variants(op):
        if kind == "functional":
            try:
                ref = fn(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001  (not a valid call on the CPU either)
                continue
            run = _Run(lambda: fn(dev_sample.input, *dev_sample.args, **dev_sample.kwargs))
        elif kind == "inplace":
            if not isinstance(sample.input, torch.Tensor):
                continue
            cpu_self = sample.input.clone()
            try:
                ret = fn(cpu_self, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001  (dtype or broadcast not valid in place)
                continue
            ref = (ret, cpu_self)
            dev_self = to_neuron(sample.input.clone())
            run = _Run(lambda: (fn(dev_self, *dev_sample.args, **dev_sample.kwargs), dev_self))
        else:  # out=
            try:
                res = fn(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001
                continue
            if isinstance(res, torch.Tensor):
                cpu_out = torch.empty_like(res)
                dev_out = torch.empty_like(res, device="neuron")
            elif isinstance(res, tuple) and res and all(isinstance(r, torch.Tensor) for r in res):
                cpu_out = tuple(torch.empty_like(r) for r in res)
                dev_out = tuple(torch.empty_like(r, device="neuron") for r in res)
            else:
                continue
            try:
                ret = fn(sample.input, *sample.args, out=cpu_out, **sample.kwargs)
            except Exception:  # noqa: BLE001
                continue
            if not _close(cpu_out, res):
                continue  # the CPU's own out= disagrees with its functional form (ihfft2)
            ref = (ret, cpu_out)
            run = _Run(
                lambda: (
                    fn(dev_sample.input, *dev_sample.args, out=dev_out, **dev_sample.kwargs),
                    dev_out,
                )
            )
            if unspecified:
                continue  # unspecified results of out= are not comparable either
        v = record["variants"].setdefault(kind, {"samples": 0, "fallbacks": set()})
        v["samples"] += 1
        v["fallbacks"] |= run.fallbacks
        what = f"{kind} variant, sample {sample}"
        if run.error is not None:
            record["failures"].append(
                f"{kind}: raised {type(run.error).__name__}: {str(run.error).splitlines()[0][:300]}"
            )
            continue
        try:
            _compare(
                run.result, ref, run.narrowed, unspecified if kind != "inplace" else frozenset()
            )
        except AssertionError as e:
            record["failures"].append(f"{kind}: {str(e).strip()[:600]}\n  in {what[:400]}")


@pytest.fixture(scope="module", autouse=True)
def _summary():
    yield
    if RESULTS:
        text = summarize(RESULTS)
        print("\n" + text)
        out = Path(__file__).resolve().parents[2] / "build" / "opinfo_summary.txt"
        out.parent.mkdir(exist_ok=True)
        out.write_text(text + "\n")


def summarize(results: dict[str, dict]) -> str:
    counts = collections.Counter(r["status"] for r in results.values())
    fell_back = collections.Counter()
    for r in results.values():
        for v in r["variants"].values():
            fell_back.update(v["fallbacks"])
    failing = sorted(
        k + ("" if r["native"] else " (fell back)")
        for k, r in results.items()
        if r["status"] == "fail"
    )
    variant_counts = collections.Counter()
    for r in results.values():
        for kind, v in r["variants"].items():
            variant_counts[(kind, "fallback" if v["fallbacks"] else "native")] += 1
    secs = sum(r["seconds"] for r in results.values())
    lines = [
        f"OpInfo sweep, float32, first {MAX_SAMPLES} samples per OpInfo, neuron vs CPU "
        f"({len(results)} OpInfos, {secs:.0f} s)",
        f"  pass: {counts['pass']}   fail: {counts['fail']}   "
        f"fallback: {counts['fallback']}   skipped: {counts['skip']}",
        "  (pass: the functional variant is native and every variant matched; fallback: the",
        "  functional variant took the CPU fallback and every variant matched; fail: a mismatch)",
        "  variants checked: "
        + ", ".join(
            f"{k} {variant_counts[(k, 'native')]} native + {variant_counts[(k, 'fallback')]} "
            f"fallback"
            for k in ("functional", "inplace", "out")
        ),
        f"  failing: {', '.join(failing) or 'none'}",
        f"  aten ops that fell back ({len(fell_back)}): "
        + ", ".join(n.removeprefix("aten::") for n, _ in sorted(fell_back.items())),
    ]
    skipped = collections.Counter(r["reason"] for r in results.values() if r["status"] == "skip")
    lines.append("  skipped by reason: " + ", ".join(f"{k} {n}" for k, n in skipped.items()))
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS, ids=[_op_id(o) for o in OPS])
def test_opinfo(op):
    name = _op_id(op)
    record = {"status": "skip", "reason": None, "variants": {}, "failures": [], "seconds": 0.0}
    RESULTS[name] = record
    reason = _skip_reason(op)
    if reason:
        record["reason"] = reason
        pytest.skip(reason)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=False))
        except Exception as e:  # noqa: BLE001
            record["reason"] = "no samples"
            pytest.skip(f"sample_inputs failed: {e}")
        for sample in samples[:MAX_SAMPLES]:
            _check_sample(op, sample, record)
    record["seconds"] = time.perf_counter() - t0
    functional = record["variants"].get("functional")
    if functional is None and not record["variants"]:
        record["reason"] = "no sample valid on the CPU"
        pytest.skip(record["reason"])
    record["native"] = native = functional is not None and not functional["fallbacks"]
    record["status"] = "fail" if record["failures"] else "pass" if native else "fallback"
    assert not record["failures"], f"{name}:\n" + "\n".join(record["failures"])


# OpInfos whose failures the sweep found and csrc/aten fixes; checked quickly
# (not slow) so that `make test-protected` covers them too.
REGRESSIONS = {
    "rot90": "kernel captured the result tensor; transpose_ after launch changed what it wrote",
    "_native_batch_norm_legit": "fresh results of an op that also writes its arguments were dropped",
    "native_batch_norm": "eval mode: CPU returns [0] save stats, Meta [C]; strided input: .out kernel wrong",
    "fft.hfft": "copy of a conj() view recursed through the Conjugate fallback (segfault)",
    "softmax.with_dtype": "out= with narrowed float64 inputs: the out= kernel wanted float32 outs",
    "log_softmax.with_dtype": "same, for log_softmax",
    "mode": "mode.values's composite kernel refused the neuron device",
    "as_strided.partial_views": "samples must keep their storage offset on neuron",
    "nn.functional.scaled_dot_product_attention": "fused kernel chosen through the PrivateUse1 stub",
    "isin": "native (generate()'s stopping criteria)",
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_sweep_regression(name):
    ops = [o for o in OPS if _op_id(o) == name]
    assert ops, f"no OpInfo {name} in this PyTorch"
    op = ops[0]
    record = {"variants": {}, "failures": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for sample in list(op.sample_inputs("cpu", torch.float32, requires_grad=False))[
            :MAX_SAMPLES
        ]:
            _check_sample(op, sample, record)
    assert record["variants"], "no sample ran"
    assert not record["failures"], f"{name} ({REGRESSIONS[name]}):\n" + "\n".join(
        record["failures"]
    )


def test_sweep_detects_a_mismatch():
    """The comparison is not vacuous: an op that is wrong on neuron fails."""

    class WrongOnNeuron:
        name, variant_test_name, inplace_variant, supports_out = "wrong", "", None, False

        def __call__(self, x):
            return x + 1 if x.device.type == "neuron" else x.clone()

    from torch.testing._internal.opinfo.core import SampleInput

    record = {"variants": {}, "failures": []}
    _check_sample(WrongOnNeuron(), SampleInput(torch.randn(4)), record)
    assert record["variants"]["functional"]["samples"] == 1
    assert len(record["failures"]) == 1 and "not close" in record["failures"][0]


def test_kernel_reads_storage_as_of_its_launch():
    """A queued kernel keeps reading the memory it was launched with when
    its input's storage is swapped by a growing resize_ before it runs."""
    a = torch.randn(1500, 1500, device="neuron")
    x_cpu = torch.randn(1000)
    x = x_cpu.to("neuron")
    torch.neuron.synchronize()
    a @ a  # keeps the stream busy while the next kernel waits in the queue
    y = x * 2
    x.resize_(4_000_000)  # new storage; the old contents are copied over later
    torch.testing.assert_close(y.cpu(), x_cpu * 2, rtol=0, atol=0)
    torch.testing.assert_close(x[:1000].cpu(), x_cpu, rtol=0, atol=0)
