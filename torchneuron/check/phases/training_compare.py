"""The training check's accuracy rule: phase 2's benchmark rule on each step's loss and gradient
norms per group (an absolute tolerance scaled to each series' float64 size, ``scaled_atol``) and
on every parameter's update (final - initial, ``compare_update``).
"""

from __future__ import annotations

import torch

from ..stats import summary as stats
from . import phase2


def _steps_text(at: list[int]) -> str:
    return (
        f"{at[0]}-{at[-1]}"
        if len(at) > 2 and at == list(range(at[0], at[-1] + 1))
        else ", ".join(map(str, at))
    )


def scaled_atol(fp64_series: list, tol: float) -> float:
    """The absolute tolerance for a per-step scalar series (losses, one group's gradient
    norms): ``tol * min(1, max |fp64|)`` over its finite values (``tol`` when all are 0 or
    non-finite), phase 2's ``scaled_atol`` over the steps. A loss of 1e-12 is then judged
    against its own size, not passed by an absolute tolerance a hundred million times larger;
    series of magnitude >= 1 keep ``tol``."""
    return phase2.scaled_atol(
        torch.stack([x.detach().to("cpu", torch.float64).reshape(()) for x in fp64_series]), tol
    )


def compare_update(
    d: torch.Tensor,
    r: torch.Tensor,
    g: torch.Tensor,
    initial: torch.Tensor,
    tol: float,
    dtype: torch.dtype,
) -> dict:
    """One parameter's final values (device ``d``, reference ``r``, float64 ``g``; same
    shape, on the CPU) compared as its update from ``initial`` (their common start): phase
    2's rule on ``final - initial`` in float64 (``dtype``: the run's, for its multiplier),
    with the absolute tolerance scaled to the update's size, ``tol * min(1, max |update
    fp64|)``, plus the parameter's own resolution, ``eps * max |fp64|`` (one unit in the last
    place of its largest value: the parameter holds its update only to its precision). The
    final values differ from the start by about steps * lr: compared as they are, within an
    absolute ``tol`` (1e-2 for bfloat16), an update of the wrong sign passed. A shape or
    dtype of the final values that differs fails (phase 2's ``mismatch``)."""
    bad = phase2.mismatch(d, r, g)  # autocast never changes a parameter's dtype
    if bad:
        return bad
    wide = (
        torch.complex128 if d.is_complex() else torch.float64
    )  # .double() drops an imaginary part
    p0, g, dw, rw = (x.detach().to("cpu", wide) for x in (initial, g, d, r))
    top = g.abs()[torch.isfinite(g)]
    resolution = (
        torch.finfo(d.dtype).eps * float(top.max())
        if (d.is_floating_point() or d.is_complex()) and top.numel()
        else 0.0
    )
    atol = phase2.scaled_atol(g - p0, tol) + resolution
    c = phase2.compare(dw - p0, rw - p0, g - p0, tol, dtype, atol=atol)
    c |= {"dtype": str(d.dtype).replace("torch.", ""), "compared": "update (final - initial)"}
    u = torch.view_as_real(g - p0) if d.is_complex() else g - p0  # as compare's RMSE counts it
    rms = stats.rmse(u, torch.zeros_like(u))
    if not c["passed"] and c["decided_by"].startswith("RMSE") and rms > 0:
        # Adam's update is about lr * sign(gradient) per element: a low-precision gradient near 0
        # flips an element's step, and the count of flips varies between runs, so the RMSE step
        # fails on a few: the update is then judged as a whole against its own size
        c["relative_rmse"], bound = c["rmse_device_fp64"] / rms, (2 * tol) ** 0.5
        if c["relative_rmse"] <= bound:
            c.update(passed=True, decided_by=f"relative RMSE vs fp64 <= sqrt(2 tol) = {bound:.3g}")
    return c


def compare(d: dict, r: dict, g: dict, steps: int, cfg, initial: dict) -> dict:
    """One mode's training steps (device ``d``) against the reference's (``r``) and the float64
    run's (``g``): per-step losses and gradient norms, parameter updates, step times, peak
    memory, warnings, status and reason (the keys of the training section)."""
    tol, dt = cfg.effective_tol, cfg.torch_dtype
    loss_atol = scaled_atol(g["losses"], tol)
    norm_atol = [scaled_atol([s[j] for s in g["grad_norms"]], tol) for j in range(len(d["groups"]))]
    per_step, judged = _per_step(d, r, g, steps, tol, dt, loss_atol, norm_atol)
    params = {
        k: compare_update(d["params"][k], r["params"][k], g["params"][k], initial[k], tol, dt)
        for k in d["params"]
    }
    warns = _unjudged(judged, params)
    bad_params = [k for k, v in params.items() if not v["passed"]]
    bad_steps = [
        s["step"]
        for s in per_step
        if not s["loss_passed"] or not all(s["grad_norm_passed"].values())
    ]
    steady = d["times_s"][1:] or d["times_s"]  # the first step compiles/allocates
    return {
        "per_step": per_step,
        "loss_atol": loss_atol,
        "grad_norm_atol": dict(zip(d["groups"], norm_atol)),
        "final_params": {
            "compared": len(params),
            "compared_as": "update (final - initial)",
            "failed": bad_params,
            "atol": {k: v.get("atol") for k, v in params.items()},
            "worst": max(params.items(), key=lambda kv: kv[1].get("max_abs") or 0)[0]
            if params
            else None,
        },
        "step_time": {
            "device_p50_s": stats.percentile(steady, 50),
            "reference_p50_s": stats.percentile(r["times_s"][1:] or r["times_s"], 50),
            "first_step_device_s": d["times_s"][0],
        },
        "peak_allocated_bytes": d["peak"],
        "device_warnings": d["warnings"],
        "warnings": warns,
        "status": "fail" if bad_params or bad_steps else "pass",
        "reason": "; ".join(
            ([f"steps {bad_steps} differ (loss or grad norm)"] if bad_steps else [])
            + ([f"parameter updates differ: {', '.join(bad_params[:5])}"] if bad_params else [])
        )
        or None,
    }


def _per_step(
    d: dict, r: dict, g: dict, steps: int, tol: float, dt, loss_atol: float, norm_atol: list
) -> tuple[list[dict], dict[str, list]]:
    """Each step's loss and gradient norms per group, device against reference and float64;
    returns the rows and, by quantity, the steps the rule could not judge (non-finite on both
    sides)."""
    per_step = []
    judged: dict[
        str, list
    ] = {}  # phase 2's rule: non-finite on both sides passes allclose, with a warning
    for i in range(steps):
        c = phase2.compare(d["losses"][i], r["losses"][i], g["losses"][i], tol, dt, atol=loss_atol)
        norms = {
            name: phase2.compare(
                d["grad_norms"][i][j],
                r["grad_norms"][i][j],
                g["grad_norms"][i][j],
                tol,
                dt,
                atol=norm_atol[j],
            )
            for j, name in enumerate(d["groups"])
        }
        for what, v in [("loss", c)] + [(f"gradient norm ({k})", n) for k, n in norms.items()]:
            if v.get("warning"):
                judged.setdefault(what, []).append(i + 1)
        per_step.append(
            {
                "step": i + 1,
                "loss_device": float(d["losses"][i]),
                "loss_reference": float(r["losses"][i]),
                "loss_fp64": float(g["losses"][i]),
                "loss_passed": c["passed"],
                "grad_norm_device": {
                    k: float(d["grad_norms"][i][j]) for j, k in enumerate(d["groups"])
                },
                "grad_norm_reference": {
                    k: float(r["grad_norms"][i][j]) for j, k in enumerate(d["groups"])
                },
                "grad_norm_passed": {k: v["passed"] for k, v in norms.items()},
                "step_time_device_s": d["times_s"][i],
                "step_time_reference_s": r["times_s"][i],
            }
        )
    return per_step, judged


def _unjudged(judged: dict[str, list], params: dict) -> list[str]:
    """Warnings for what was NaN or infinite on both the device and the reference."""
    warns = [
        f"{what} at step(s) {_steps_text(at)} is NaN or infinite on both the device and the reference: "
        "the accuracy rule cannot judge it"
        for what, at in judged.items()
    ]
    nf = [k for k, v in params.items() if v.get("warning")]
    if nf:
        warns.append(
            f"final parameter(s) {', '.join(nf[:5])}{' ...' if len(nf) > 5 else ''} have NaN or infinite "
            "elements on both the device and the reference: the accuracy rule cannot judge them"
        )
    return warns
