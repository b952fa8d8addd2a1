"""Phase 2: are the device's results accurate.

The device's outputs (phase 1's first run) are compared with a reference device's
(``cpu`` by default, ``cuda`` where it exists) and both with a golden float64 run on
the CPU. The pass rule is the accuracy rule of PyTorch's dynamo benchmark harness
(``torch._dynamo.utils.same`` as used by ``benchmarks/dynamo/common.py``), per output
tensor:

1. pass if ``torch.allclose(device, reference, atol=atol, rtol=tol)``;
2. else pass if ``RMSE(device, fp64) <= m * RMSE(reference, fp64) + atol / 10``,
   with ``m = 2`` for float32 and ``m = 3`` for bfloat16/float16;
3. else fail;

with ``atol = tol * min(1, max |fp64|)`` (``scaled_atol``): ``tol`` as in the harness for an
output of order 1 or more, relative to the output's size below that (a fixed 1e-4 passes a
device that returns zeros for a softmax over 32k classes).

Before the rule, an output whose shape or dtype differs between the device and the
reference fails (no cast: it would hide a wrong dtype); integer and bool outputs must be equal.
Complex outputs are compared as their real and imaginary parts (``torch.view_as_real``);
Python numbers in the output arrive as 0-dim tensors (``tensors.flatten(numbers=True)``).
Before the rule, NaN or infinite elements on the device where the reference is finite fail
the output; non-finite elements on both sides are counted and warned about.
The result says which rule decided each output.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import torch

from ..config import CheckConfig
from ..errors import CheckUsageError
from ..model import tensors as T
from ..model.loading import LoadedModel
from ..result_phases import Phase2Result
from ..stats import summary as stats


def multiplier(dtype: torch.dtype) -> float:
    """The RMSE multiplier ``m`` of the benchmark rule: 3 for fp16/bf16, else 2."""
    return 3.0 if dtype in (torch.float16, torch.bfloat16) else 2.0


#: The metrics of a comparison: None where the comparison ended before them (a shape or
#: dtype mismatch, an integer output).
METRICS = (
    "max_abs",
    "max_rel",
    "cosine",
    "rmse_device_fp64",
    "rmse_reference_fp64",
    "atol",
    "rmse_bound",
    "allclose",
)


def _dt(x: torch.Tensor) -> str:
    return str(x.dtype).replace("torch.", "")


def autocast_dtypes_differ(a: torch.dtype, b: torch.dtype, dtype: torch.dtype) -> bool:
    """Whether ``a != b`` is autocast's doing under ``--dtype`` ``dtype``: both are float32 or
    ``dtype`` (bfloat16/float16). Autocast picks, per device type, which ops run in ``dtype`` and
    which in float32: the CPU has its own op lists, the neuron device PyTorch's shared ones
    (``csrc/aten/autocast.cpp``; a layer norm's output is float32 there, bfloat16 on the CPU)."""
    lower = (torch.bfloat16, torch.float16)
    return a != b and dtype in lower and {a, b} <= {torch.float32, dtype}


def mismatch(
    device: torch.Tensor,
    reference: torch.Tensor,
    fp64: torch.Tensor,
    dtype: torch.dtype = torch.float32,
) -> dict | None:
    """The failed verdict of a comparison whose tensors do not match in shape (device,
    reference, fp64) or dtype (device, reference), with ``METRICS`` (None except ``max_abs``
    where the shapes agree); None when they match. The device restores each output's dtype
    (the 64-bit policy narrows only the math), so a dtype that differs is the device's error:
    casting one side first would hide it (a float where the reference is int64, say). Under
    autocast (``dtype`` bfloat16/float16) float32 against ``dtype`` is the devices' autocast
    op lists (``autocast_dtypes_differ``), not a mismatch."""
    d, r, g = device, reference, fp64
    res: dict[str, Any] = {"shape": list(d.shape), "dtype": _dt(d), **dict.fromkeys(METRICS)}
    if d.shape != r.shape or d.shape != g.shape:
        return res | {
            "passed": False,
            "decided_by": "shape mismatch",
            "detail": f"device {list(d.shape)}, reference {list(r.shape)}, fp64 {list(g.shape)}",
        }
    if d.dtype != r.dtype and not autocast_dtypes_differ(d.dtype, r.dtype, dtype):
        # informative only: how far apart the values are
        res["max_abs"] = T.max_abs_diff(d, r)
        return res | {
            "passed": False,
            "decided_by": f"dtype mismatch: device {_dt(d)}, reference {_dt(r)}",
        }
    return None


def failure_text(c: dict) -> str:
    """Why a comparison (``compare``'s dict) failed, in one line: the rule that decided and
    the figures it has (early endings have no RMSE)."""
    parts = [c.get("decided_by") or "not compared"]
    if c.get("detail"):
        parts[0] += f" ({c['detail']})"
    if c.get("rmse_device_fp64") is not None and c.get("rmse_bound") is not None:
        parts.append(f"RMSE vs fp64 {c['rmse_device_fp64']:.3g} > bound {c['rmse_bound']:.3g}")
    if c.get("max_abs") is not None:
        parts.append(f"max abs {c['max_abs']:.3g}")
    return "; ".join(parts)


def scaled_atol(fp64: torch.Tensor, tol: float) -> float:
    """The rule's absolute tolerance for an output whose float64 values are ``fp64``:
    ``tol * min(1, max |fp64|)`` over its finite elements (``tol`` when none is finite or
    all are 0). An output of order 1 or more keeps ``tol``; a smaller one is judged against
    its own size: a softmax over 32k classes (elements ~3e-5) is otherwise within an absolute
    1e-4 of anything, all zeros included."""
    v = fp64.detach().abs()
    v = v[torch.isfinite(v)]
    top = float(v.max()) if v.numel() else 0.0
    return tol * min(1.0, top) if top > 0 else tol


def compare(
    device: torch.Tensor,
    reference: torch.Tensor,
    fp64: torch.Tensor,
    tol: float,
    dtype: torch.dtype,
    atol: float | None = None,
) -> dict:
    """Metrics and verdict for one output tensor (all inputs on the CPU). ``atol``
    (default ``scaled_atol(fp64, tol)``) is the absolute tolerance in both steps of the
    rule (``atol`` in the result); ``tol`` is the relative one.

    max_abs = max |d - r|; max_rel = max |d - r| / |r| over elements with r != 0 (as
    ``torch.testing.assert_close`` reports it); cosine = cosine similarity of the
    flattened tensors in float64; RMSE in float64 against the fp64 golden output.
    A shape or dtype that differs between the device and the reference fails
    (``mismatch``), whatever the values; under autocast, float32 against ``dtype`` (the
    devices' autocast op lists) is compared in float64 (``reference_dtype`` in the result).
    """
    d, r, g = (x.detach().to("cpu") for x in (device, reference, fp64))
    bad = mismatch(d, r, g, dtype)
    if bad:
        return bad
    res: dict[str, Any] = {"shape": list(d.shape), "dtype": _dt(d)}
    if d.dtype != r.dtype:  # autocast's lists (mismatch): the values compared in float64
        res["reference_dtype"] = _dt(r)
        d, r = d.double(), r.double()
    if d.is_complex():
        # both parts compared: .double() of a complex tensor would drop the imaginary part
        d, r, g = (
            torch.view_as_real(x.resolve_conj() if x.is_complex() else x.to(torch.complex128))
            for x in (d, r, g)
        )
    if not (d.is_floating_point() or d.is_complex()):
        return _compare_exact(res, d, r)
    _differences(res, d, r, g)
    m = multiplier(dtype)
    atol = scaled_atol(g, tol) if atol is None else atol
    res["atol"] = atol
    res["rmse_bound"] = m * res["rmse_reference_fp64"] + atol / 10
    res["allclose"] = bool(torch.allclose(d, r, atol=atol, rtol=tol, equal_nan=True))
    fin_d, fin_r = torch.isfinite(d), torch.isfinite(r)
    res["nonfinite"] = {"device": int((~fin_d).sum()), "reference": int((~fin_r).sum())}
    worse = int((~fin_d & fin_r).sum())
    if worse:
        res.update(
            passed=False,
            decided_by="non-finite on the device where the reference is finite",
            detail=f"{worse} of {d.numel()} element(s) are NaN or infinite on the device only",
        )
        return res
    if res["nonfinite"]["device"] and res["allclose"]:
        res["warning"] = (
            f"{res['nonfinite']['device']} of {d.numel()} element(s) are NaN or infinite on "
            "both the device and the reference: the accuracy rule cannot judge them"
        )
    if res["allclose"]:
        res.update(
            passed=True,
            decided_by=f"allclose(atol=rtol={tol:g})"
            if atol == tol
            else f"allclose(atol={atol:.3g}, rtol={tol:g})",
        )
    else:
        ok = res["rmse_device_fp64"] <= res["rmse_bound"]
        res.update(
            passed=ok, decided_by=f"RMSE vs fp64 (m={m:g}, + {'tol' if atol == tol else 'atol'}/10)"
        )
    return res


def _compare_exact(res: dict, d: torch.Tensor, r: torch.Tensor) -> dict:
    """An integer output: passed on exact equality."""
    equal = torch.equal(d, r)
    res.update(
        max_abs=T.max_abs_diff(d, r),
        max_rel=None,
        cosine=None,
        rmse_device_fp64=None,
        rmse_reference_fp64=None,
        allclose=equal,
        rmse_bound=None,
        passed=equal,
        decided_by="exact equality (integer output)",
    )
    return res


def _differences(res: dict, d: torch.Tensor, r: torch.Tensor, g: torch.Tensor) -> None:
    """max_abs, max_rel, cosine (float64) and the RMSEs against the fp64 golden output."""
    dd, rd = d.double(), r.double()
    diff = (dd - rd).abs()
    nz = rd != 0
    res["max_abs"] = float(diff.max()) if d.numel() else 0.0
    res["max_rel"] = float((diff[nz] / rd[nz].abs()).max()) if bool(nz.any()) else None
    denom = dd.norm() * rd.norm()
    res["cosine"] = float(torch.dot(dd.flatten(), rd.flatten()) / denom) if denom > 0 else None
    res["rmse_device_fp64"] = stats.rmse(d, g)
    res["rmse_reference_fp64"] = stats.rmse(r, g)


def golden_outputs(loaded: LoadedModel) -> dict[str, torch.Tensor]:
    """The model's outputs in float64 on the CPU (weights and floating inputs cast to
    float64, no autocast): the golden values of the accuracy rule."""
    m64 = T.model_copy(loaded.model, "cpu", torch.float64)
    inp = T.to_device(loaded.inputs, "cpu", torch.float64)
    return T.to_cpu(T.flatten(T.call(m64, inp, "cpu", torch.float32), numbers=True))


def reference_outputs(
    loaded: LoadedModel, cfg: CheckConfig
) -> tuple[torch.nn.Module, Any, dict, float]:
    """The reference device's model, inputs, outputs (on the CPU) and the seconds of
    that first (cold) forward pass, synchronized."""
    ref = cfg.reference
    if ref == "cuda" and not torch.cuda.is_available():
        raise CheckUsageError("--reference cuda: CUDA is not available on this machine")
    model = T.model_copy(loaded.model, ref)
    inputs = T.to_device(loaded.inputs, ref)
    sync = T.synchronizer(ref)
    sync()
    t0 = time.perf_counter()
    out = T.flatten(T.call(model, inputs, torch.device(ref).type, cfg.torch_dtype), numbers=True)
    sync()
    cold = time.perf_counter() - t0
    return model, inputs, T.to_cpu(out), cold


def compiled_section(
    compiled: dict[str, torch.Tensor], eager: dict[str, torch.Tensor], extra: dict, cfg: CheckConfig
) -> dict:
    """``--mode both``: the compiled model's outputs (``torch.compile(backend="neuron")``'s
    first run) against the reference and fp64 with the same rule as eager's, and their
    largest absolute difference from eager's. ``status`` pass/fail."""
    ref, gold, tol = extra["outputs"]["reference"], extra["outputs"]["fp64"], cfg.effective_tol
    outs = {}
    for name, c in compiled.items():
        if name not in ref or name not in gold:
            outs[name] = {"passed": False, "decided_by": "output missing on the reference"}
            continue
        outs[name] = compare(c, ref[name], gold[name], tol, cfg.torch_dtype)
        if name in eager and eager[name].shape == c.shape:
            outs[name]["max_abs_vs_eager"] = T.max_abs_diff(c, eager[name])
    for name in sorted(set(ref) - set(compiled)):
        outs[name] = {"passed": False, "decided_by": "output missing in the compiled model"}
    return {
        "status": "pass" if all(o["passed"] for o in outs.values()) else "fail",
        "outputs": outs,
    }


def run(
    loaded: LoadedModel,
    cfg: CheckConfig,
    device_outputs: dict[str, torch.Tensor],
    ui,
    skip_reason: str | None = None,
) -> tuple[Phase2Result, dict]:
    """Run phase 2. Returns the phase result and
    ``{"reference": (model, inputs), "outputs": {"reference": ..., "fp64": ...}}`` for
    phase 3 and the baseline."""
    tol = cfg.effective_tol
    res = Phase2Result(
        status="skipped",
        reason=skip_reason,
        reference_device=cfg.reference,
        dtype=cfg.dtype,
        tol=tol,
        tol_source="--tol" if cfg.tol is not None else f"default for {cfg.dtype}",
        multiplier=multiplier(cfg.torch_dtype),
        rule="PyTorch dynamo benchmark rule: allclose(atol, rtol=tol), else "
        "RMSE(device, fp64) <= m * RMSE(reference, fp64) + atol/10; "
        "atol = tol * min(1, max |fp64|)",
    )
    extra: dict[str, Any] = {"reference": None, "outputs": {}, "reference_cold_s": None}
    if skip_reason:
        return res, extra
    ui.step(f"Phase 2: reference run on {cfg.reference} and float64 golden run on cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_model, ref_inputs, ref_out, extra["reference_cold_s"] = reference_outputs(loaded, cfg)
        gold = golden_outputs(loaded)
    extra["reference"] = (ref_model, ref_inputs)
    extra["outputs"] = {"reference": ref_out, "fp64": gold}
    missing = sorted(set(device_outputs) ^ set(ref_out))
    for name, d in device_outputs.items():
        if name not in ref_out or name not in gold:
            res.outputs[name] = {
                "passed": False,
                "decided_by": "output missing on the reference",
            }
            continue
        res.outputs[name] = compare(d, ref_out[name], gold[name], tol, cfg.torch_dtype)
    for name in missing:
        if name not in res.outputs:
            res.outputs[name] = {"passed": False, "decided_by": "output missing on the device"}
    res.status = "pass" if all(o["passed"] for o in res.outputs.values()) else "fail"
    res.warnings = [
        f"phase 2: output {k!r}: {o['warning']}" for k, o in res.outputs.items() if o.get("warning")
    ]
    res.reason = None
    return res, extra
