"""Training check: N optimizer steps on the device, on the reference device and in
float64 on the CPU (the golden run), from the same initial state.

For a factory that returns ``(model, example_inputs, loss_fn)``: each step is
``loss = loss_fn(model(**inputs)); loss.backward(); optimizer.step()`` with AdamW
(``lr`` ``TRAIN_LR``) over two parameter groups, as training scripts set them up:
``decay`` (matrices, weight decay 0.01) and ``no_decay`` (biases and norms). Modules stay
in eval mode (dropout off) so the device and the reference follow the same path.
Compared with phase 2's benchmark rule (allclose, else RMSE against float64): the loss
of every step, the gradient norm of every parameter group at every step, and every final
parameter. Also: the device's step time (synchronized, seconds) and its peak memory with
the optimizer's state.
"""
from __future__ import annotations

import copy
import time
import warnings
from typing import Any, Callable

import torch

from . import phase2, stats
from . import tensors as T

#: AdamW learning rate of the training check (small: a few steps must stay comparable).
TRAIN_LR = 1e-4
WEIGHT_DECAY = 0.01


def _groups(model: torch.nn.Module) -> list[dict]:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": WEIGHT_DECAY, "name": "decay"},
            {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"}]


def _to(inputs, device, float_dtype=None):
    return T.to_device(inputs, device, float_dtype)


def _steps(model: torch.nn.Module, inputs, loss_fn: Callable, device: str, steps: int, dtype: torch.dtype,
           sync: Callable[[], None]) -> dict:
    opt = torch.optim.AdamW(_groups(model), lr=TRAIN_LR)
    dev_type = torch.device(device).type
    losses, gnorms, times = [], [], []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with T.autocast_ctx(dev_type, dtype):
            out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
            loss = loss_fn(out)
        loss.backward()
        norms = []
        for g in opt.param_groups:
            # in float64 on the CPU: the device narrows 64-bit math (TorchNeuron's policy)
            sq = [p.grad.detach().to("cpu", torch.float64).pow(2).sum() for p in g["params"] if p.grad is not None]
            norms.append(torch.stack(sq).sum().sqrt() if sq else torch.zeros((), dtype=torch.float64))
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
        losses.append(loss.detach().to("cpu"))
        gnorms.append(norms)
    return {"losses": losses, "grad_norms": gnorms, "times_s": times,
            "params": {k: v.detach().to("cpu") for k, v in model.named_parameters()},
            "groups": [g["name"] for g in opt.param_groups]}


def run(loaded, cfg, ui, steps: int) -> dict:
    """The training section of the result (JSON-ready). ``status`` pass/fail/skipped."""
    if loaded.loss_fn is None:
        return {"status": "skipped", "reason": "the factory returned no loss_fn (inference model)"}
    ui.step(f"Training: {steps} AdamW steps on {cfg.device}, {cfg.reference} and float64")
    res: dict[str, Any] = {"steps": steps, "optimizer": f"AdamW(lr={TRAIN_LR}, weight_decay {WEIGHT_DECAY} on "
                                                        "matrices)", "tol": cfg.effective_tol}
    dev = torch.device(cfg.device)
    try:
        torch.neuron.reset_peak_memory_stats(dev)
        with warnings.catch_warnings(record=True) as caught:   # gathered in the report's warnings section
            warnings.simplefilter("always")
            d = _steps(copy.deepcopy(loaded.model).to(dev), _to(loaded.inputs, dev), loaded.loss_fn, cfg.device,
                       steps, cfg.torch_dtype, T.synchronizer(dev))
        res["device_warnings"] = sorted({str(w.message).split(" (Triggered")[0] for w in caught})
        res["peak_allocated_bytes"] = torch.neuron.max_memory_allocated(dev)
    except Exception as e:
        return res | {"status": "fail", "reason": f"training on {cfg.device} raised {type(e).__name__}: "
                                                  f"{str(e).splitlines()[0] if str(e) else ''}"}
    r = _steps(copy.deepcopy(loaded.model).to(cfg.reference), _to(loaded.inputs, cfg.reference), loaded.loss_fn,
               cfg.reference, steps, cfg.torch_dtype, T.synchronizer(cfg.reference))
    g = _steps(copy.deepcopy(loaded.model).double(), _to(loaded.inputs, "cpu", torch.float64), loaded.loss_fn,
               "cpu", steps, torch.float32, lambda: None)
    tol, dt = cfg.effective_tol, cfg.torch_dtype
    per_step = []
    for i in range(steps):
        c = phase2.compare(d["losses"][i], r["losses"][i], g["losses"][i], tol, dt)
        norms = {name: phase2.compare(d["grad_norms"][i][j], r["grad_norms"][i][j], g["grad_norms"][i][j], tol, dt)
                 for j, name in enumerate(d["groups"])}
        per_step.append({"step": i + 1, "loss_device": float(d["losses"][i]), "loss_reference": float(r["losses"][i]),
                         "loss_fp64": float(g["losses"][i]), "loss_passed": c["passed"],
                         "grad_norm_device": {k: float(d["grad_norms"][i][j]) for j, k in enumerate(d["groups"])},
                         "grad_norm_reference": {k: float(r["grad_norms"][i][j]) for j, k in enumerate(d["groups"])},
                         "grad_norm_passed": {k: v["passed"] for k, v in norms.items()},
                         "step_time_device_s": d["times_s"][i], "step_time_reference_s": r["times_s"][i]})
    params = {k: phase2.compare(d["params"][k], r["params"][k], g["params"][k], tol, dt) for k in d["params"]}
    bad_params = [k for k, v in params.items() if not v["passed"]]
    bad_steps = [s["step"] for s in per_step if not s["loss_passed"] or not all(s["grad_norm_passed"].values())]
    steady = d["times_s"][1:] or d["times_s"]    # the first step compiles/allocates
    res |= {
        "per_step": per_step,
        "final_params": {"compared": len(params), "failed": bad_params,
                         "worst": max(params.items(), key=lambda kv: kv[1].get("max_abs") or 0)[0] if params else None},
        "step_time": {"device_p50_s": stats.percentile(steady, 50),
                      "reference_p50_s": stats.percentile(r["times_s"][1:] or r["times_s"], 50),
                      "first_step_device_s": d["times_s"][0]},
        "status": "fail" if bad_params or bad_steps else "pass",
        "reason": (f"steps {bad_steps} differ (loss or grad norm)" if bad_steps else "")
                  + (f"; final parameters differ: {', '.join(bad_params[:5])}" if bad_params else "") or None,
    }
    return res
