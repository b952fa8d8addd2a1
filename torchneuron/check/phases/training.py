"""Training check: N optimizer steps on the device, on the reference device and in
float64 on the CPU (the golden run), from the same initial state.

For a factory that returns ``(model, example_inputs, loss_fn)``: each step is
``loss = loss_fn(model(**inputs)); loss.backward(); optimizer.step()`` with AdamW; a factory
returning ``(model, example_inputs, step)`` with ``step(model, inputs) -> loss`` (forward and
loss, two required positional parameters) replaces the first part: the check still calls
``loss.backward()`` and owns the optimizer, so every form is compared the same way. Under
``--mode compile|both`` the device's model is also ``torch.compile(backend="neuron")``:
forward and backward graphs compiled, the optimizer step eager;
(``lr`` ``TRAIN_LR``) over two parameter groups, as training scripts set them up:
``decay`` (matrices, weight decay 0.01) and ``no_decay`` (biases and norms). Modules stay
in eval mode (dropout off) so the device and the reference follow the same path.
Compared with phase 2's benchmark rule (allclose, else RMSE against float64): the loss
of every step, the gradient norm of every parameter group at every step, and every
parameter's update (final - initial, ``training_compare.compare_update``); the per-step series get an absolute
tolerance scaled by their float64 size (``training_compare.scaled_atol``), so tiny losses are judged relative
to themselves, and the updates one scaled to the update (they are ~steps * lr: final values
within an absolute tol passed an update of the wrong sign). Compiled steps in which
no compiled graph ran (the backend's ``graph_runs`` counter) fail: their figures are eager.
Also: the device's step time (synchronized, seconds) and its peak memory with the optimizer's
state.
"""

from __future__ import annotations

import copy
import time
import traceback
import warnings
from collections.abc import Callable

import torch

from ..errors import CheckUsageError
from ..model import tensors as T
from ..result_training import TrainingResult
from . import trace
from .training_compare import compare as _compare

#: AdamW learning rate of the training check (small: a few steps must stay comparable).
TRAIN_LR = 1e-4
WEIGHT_DECAY = 0.01


def _groups(model: torch.nn.Module) -> list[dict]:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return [
        {"params": decay, "weight_decay": WEIGHT_DECAY, "name": "decay"},
        {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"},
    ]


def _to(inputs, device, float_dtype=None):
    return T.to_device(inputs, device, float_dtype)


GOLDEN_RUN = "the float64 golden run"
#: Why a loss_fn/step that ran on the reference raises in the golden run, and the fix.
GOLDEN_HINT = (
    "that run casts the model and the inputs to float64 on the CPU; a tensor the loss_fn or step "
    "closes over keeps its dtype: move or cast closed-over tensors with .to(output) (device and "
    "dtype; integer labels need only .to(output.device))"
)


def _user_call(what: str, run: str | None, fn: Callable, *args):
    """Call the factory's loss_fn/step. ``run``: the name of the reference or float64 run (they
    go first; None on the device). An exception there is the factory's, not the device's:
    CheckUsageError naming it and the run (exit 2), with a hint for the float64 run."""
    if run is None:
        return fn(*args)
    try:
        return fn(*args)
    except CheckUsageError:
        raise
    except Exception as e:
        from .phase1 import _raised_at

        f = _raised_at(traceback.extract_tb(e.__traceback__), None)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        golden = run == GOLDEN_RUN
        raise CheckUsageError(
            f"training: {what} raised {type(e).__name__} in {run}"
            + (" (it ran on the reference)" if golden else "")
            + f": {msg}"
            + (f"\nraised at: {f.filename}:{f.lineno} in {f.name}" if f else "")
            + (f"\nhint: {GOLDEN_HINT}" if golden else "")
        ) from e


def _loss(
    model, inputs, loss_fn: Callable | None, step_fn: Callable | None, run: str | None = None
) -> torch.Tensor:
    """Forward and loss: ``loss_fn(model(inputs))`` or ``step_fn(model, inputs)``. Raises
    CheckUsageError when the result is not a scalar floating tensor with a gradient, when the
    callable ran backward() itself, or (``run``, a reference or float64 run) when the callable raised."""
    if step_fn is not None:
        what = "step(model, inputs)"
        loss = _user_call(what, run, step_fn, model, inputs)
    else:
        what = "loss_fn(output)"
        out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        loss = _user_call(what, run, loss_fn, out)
    if any(
        p.grad is not None for p in model.parameters()
    ):  # zero_grad(set_to_none) ran just before
        raise CheckUsageError(
            f"training: {what} called backward() itself (the parameters have gradients "
            "before the check's backward): return the loss without calling backward(); "
            "the check calls loss.backward() and steps its optimizer"
        )
    if not isinstance(loss, torch.Tensor):
        raise CheckUsageError(
            f"training: {what} returned a {type(loss).__name__}; expected a scalar tensor"
        )
    if loss.numel() != 1 or not loss.is_floating_point():
        raise CheckUsageError(
            f"training: {what} returned a {str(loss.dtype).replace('torch.', '')} tensor of "
            f"shape {list(loss.shape)}; expected a floating scalar (one element)"
        )
    if not loss.requires_grad:
        raise CheckUsageError(
            f"training: {what} returned a loss that does not require grad (computed "
            "under no_grad or detached, e.g. a step that ran its own backward and optimizer "
            "and returned loss.detach()): nothing to backpropagate; return the loss itself, "
            "the check calls loss.backward() and steps its optimizer"
        )
    return loss.reshape(())


def _steps(
    model: torch.nn.Module,
    inputs,
    loss_fn: Callable | None,
    device: str,
    steps: int,
    dtype: torch.dtype,
    sync: Callable[[], None],
    step_fn: Callable | None = None,
    params_of=None,
    run: str | None = None,
    traced: bool = False,
) -> dict:
    params_of = params_of or model  # a compiled module's own parameters (no _orig_mod. prefix)
    opt = torch.optim.AdamW(_groups(params_of), lr=TRAIN_LR)
    dev_type = torch.device(device).type
    losses, gnorms, times = [], [], []
    exact, prev = None, None
    for i in range(steps):
        sync()
        t0 = time.perf_counter()
        if traced and i >= steps - 2:  # the last two steps' kernel traces (phases/trace.py)
            box: list = []
            ks = trace.record(
                lambda: box.append(
                    _step(model, inputs, loss_fn, step_fn, run, opt, dev_type, dtype)
                ),
                sync,
            )
            loss, norms = box[0]
            exact = trace.summarize(ks)
            # the last step's signatures the step before did not run (None: one step only)
            exact["new_signatures"] = None if prev is None else trace.new_signatures(prev, ks)
            prev = ks
        else:
            loss, norms = _step(model, inputs, loss_fn, step_fn, run, opt, dev_type, dtype)
            sync()
        times.append(time.perf_counter() - t0)
        losses.append(loss.detach().to("cpu"))
        gnorms.append(norms)
    return {
        "losses": losses,
        "grad_norms": gnorms,
        "times_s": times,
        "params": {k: v.detach().to("cpu") for k, v in params_of.named_parameters()},
        "groups": [g["name"] for g in opt.param_groups],
        "exact": exact,
    }


def _step(model, inputs, loss_fn, step_fn, run, opt, dev_type, dtype):
    """One optimizer step: (loss, gradient norms per group in float64 on the CPU)."""
    opt.zero_grad(set_to_none=True)
    with T.autocast_ctx(dev_type, dtype):
        loss = _loss(model, inputs, loss_fn, step_fn, run)
    try:
        loss.backward()
    except RuntimeError as e:  # a step that ran backward() through autograd.grad, say
        if run and "backward through the graph a second time" in str(e):
            raise CheckUsageError(
                f"training: {'step(model, inputs)' if step_fn else 'loss_fn(output)'} "
                "ran backward through the loss's graph itself (\"Trying to backward through "
                'the graph a second time"): return the loss without calling backward(); '
                "the check calls loss.backward()"
            ) from e
        raise
    norms = []
    for g in opt.param_groups:
        # in float64 on the CPU: the device narrows 64-bit math (TorchNeuron's policy)
        sq = [
            p.grad.detach().to("cpu", torch.float64).pow(2).sum()
            for p in g["params"]
            if p.grad is not None
        ]
        norms.append(torch.stack(sq).sum().sqrt() if sq else torch.zeros((), dtype=torch.float64))
    opt.step()
    return loss, norms


def _graph_counts() -> tuple[int, int]:
    """(compiled-graph launches, fallback graphs) so far: the neuron backend's counters."""
    from torch._dynamo.utils import counters

    c = counters["neuron"]
    return c["graph_runs"], c["fallback_graphs"]


def _not_compiled_reason(d: dict, step_form: bool) -> str | None:
    """Why the compiled steps were not a compiled run, or None when a compiled graph ran.
    Without this, eager figures would be reported (and passed) as compiled."""
    if d.get("graph_runs", 1):
        return None
    why = (
        f"{d['fallback_graphs']} graph(s) fell back to eager (fallback_execution)"
        if d.get("fallback_graphs")
        else "the step function calls a submodule or another object than the model passed to it (e.g. "
        "model.inner(...) on the compiled wrapper reaches the uncompiled module); call model(...) itself"
        if step_form
        else "Dynamo compiled no graph of the model's forward (it ran eagerly)"
    )
    return (
        "no graph compiled by torch.compile(backend='neuron') ran during the compiled steps: "
        + why
        + "; the compiled mode was not checked"
    )


def _device_steps(loaded, cfg, steps: int, compiled: bool) -> dict:
    """N steps on the device, eager or ``torch.compile(backend="neuron")`` (forward and
    backward graphs compiled by AOTAutograd); peak memory and device warnings recorded."""
    dev = torch.device(cfg.device)
    model = copy.deepcopy(loaded.model).to(dev)
    run_model = torch.compile(model, backend="neuron") if compiled else model
    if compiled:
        torch._dynamo.reset()
    torch.neuron.reset_peak_memory_stats(dev)
    runs0, fallbacks0 = _graph_counts()
    with warnings.catch_warnings(
        record=True
    ) as caught:  # gathered in the report's warnings section
        warnings.simplefilter("always")
        d = _steps(
            run_model,
            _to(loaded.inputs, dev),
            loaded.loss_fn,
            cfg.device,
            steps,
            cfg.torch_dtype,
            T.synchronizer(dev),
            loaded.train_step,
            params_of=model,
            traced=True,
        )
    if compiled:
        runs1, fallbacks1 = _graph_counts()
        d["graph_runs"], d["fallback_graphs"] = runs1 - runs0, fallbacks1 - fallbacks0
        torch._dynamo.reset()
    d["warnings"] = sorted({str(w.message).split(" (Triggered")[0] for w in caught})
    d["peak"] = torch.neuron.max_memory_allocated(dev)
    return d


def run(loaded, cfg, ui, steps: int) -> TrainingResult:
    """The training section of the result. ``status`` pass/fail/skipped.

        Eager steps fill the top-level keys (``--mode eager|both``); compiled steps
        (``--mode compile|both``) fill ``compiled`` with the same keys, or its ``error`` when
        compilation failed (stage, op, source as phase 1 reports them). ``status`` is "fail"
        when either mode failed (compiled: also when no compiled graph ran in its steps, ``graph_runs``
    0, e.g. a step calling ``model.inner``); ``warnings`` lists what the rule cannot judge (non-finite on both
        sides). CheckUsageError (exit 2): the model has no trainable parameter, or the factory's
        loss_fn or step raised on the reference or float64 run, called backward() itself, or
        returned something that is not a scalar floating loss with a gradient."""
    if loaded.loss_fn is None and loaded.train_step is None:
        return TrainingResult(
            status="skipped", reason="the factory returned no loss_fn or step (inference model)"
        )
    modes = {"eager": ["eager"], "compile": ["compile"], "both": ["eager", "compile"]}[cfg.mode]
    ui.step(
        f"Training: {steps} AdamW steps on {cfg.device} ({', '.join(modes)}), {cfg.reference} and float64"
    )
    res = TrainingResult(
        status="pass",
        steps=steps,
        optimizer=f"AdamW(lr={TRAIN_LR}, weight_decay {WEIGHT_DECAY} on matrices)",
        tol=cfg.effective_tol,
        form="step(model, inputs)" if loaded.train_step else "loss_fn(output)",
        modes=modes,
    )
    if not any(p.requires_grad for p in loaded.model.parameters()):
        raise CheckUsageError(
            "training: the model has no trainable parameter (every parameter has "
            "requires_grad=False): nothing to train; unfreeze at least one parameter"
        )
    initial = {k: v.detach().to("cpu", copy=True) for k, v in loaded.model.named_parameters()}
    r, g = _reference_and_golden(loaded, cfg, steps)
    if "eager" in modes:
        failed = _eager(res, loaded, cfg, steps, r, g, initial)
        if failed:
            res.status, res.reason = failed["status"], failed["reason"]
            return res
    else:
        res.device_warnings, res.warnings = [], []
        res.note = "--mode compile: eager training steps not run"
    # eager's own verdict (the top-level status and reason below also carry compiled's)
    res.eager_verdict = {"status": res.status, "reason": res.reason}
    if "compile" in modes:
        _merge_compiled(res, _compiled(res, loaded, cfg, steps, r, g, initial))
    return res


def _reference_and_golden(loaded, cfg, steps: int) -> tuple[dict, dict]:
    """The reference run and the float64 golden run, first: a bad loss_fn/step is a usage
    error (exit 2)."""
    r = _steps(
        copy.deepcopy(loaded.model).to(cfg.reference),
        _to(loaded.inputs, cfg.reference),
        loaded.loss_fn,
        cfg.reference,
        steps,
        cfg.torch_dtype,
        T.synchronizer(cfg.reference),
        loaded.train_step,
        run=f"the reference run ({cfg.reference})",
    )
    g = _steps(
        copy.deepcopy(loaded.model).double(),
        _to(loaded.inputs, "cpu", torch.float64),
        loaded.loss_fn,
        "cpu",
        steps,
        torch.float32,
        lambda: None,
        loaded.train_step,
        run=GOLDEN_RUN,
    )
    return r, g


def _eager(
    res: TrainingResult, loaded, cfg, steps: int, r: dict, g: dict, initial: dict
) -> dict | None:
    """The eager device steps compared into ``res``; returns the failure to report when they
    raised (a usage error raises on)."""
    try:
        d = _device_steps(loaded, cfg, steps, compiled=False)
    except CheckUsageError:
        raise
    except Exception as e:
        return {
            "status": "fail",
            "reason": f"training on {cfg.device} raised {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}",
        }
    for k, v in _compare(d, r, g, steps, cfg, initial).items():
        setattr(res, k, v)
    res.exact = {"eager": d.get("exact")}
    return None


def _compiled(
    res: TrainingResult, loaded, cfg, steps: int, r: dict, g: dict, initial: dict
) -> TrainingResult:
    """The compiled device steps compared (``res.exact["compiled"]`` filled), or their
    failure: no compiled graph ran, or compiling raised (stage, op, source as phase 1 reports
    them)."""
    from . import phase1
    from .compiled import _compile_failure

    try:
        dc = _device_steps(loaded, cfg, steps, compiled=True)
        why = _not_compiled_reason(dc, loaded.train_step is not None)
        # no compiled graph ran: the figures are eager ones, not shown under the compiled label
        c = (
            {
                "status": "fail",
                "reason": why,
                "graph_runs": 0,
                "device_warnings": dc["warnings"],
            }
            if why
            else _compare(dc, r, g, steps, cfg, initial) | {"graph_runs": dc["graph_runs"]}
        )
        res.exact = (res.exact or {}) | {"compiled": dc.get("exact")}
    except CheckUsageError:
        raise
    except Exception as e:
        err = phase1._error_info(e, "torch.compile(backend='neuron'): training step")
        failure = _compile_failure(e)
        if failure:
            err["compile_stage"] = failure["stage"]
            if failure["op"]:
                err["op"] = failure["op"]
            if failure["source"]:
                err["raised_at"] = failure["source"]
        c = {
            "status": "fail",
            "error": err,
            "reason": f"compiled training raised {type(e).__name__}: {err.get('short_message') or ''}",
        }
    return TrainingResult(**c)


def _merge_compiled(res: TrainingResult, c: TrainingResult) -> None:
    """The compiled section into ``res``: its warnings beside eager's, its failure in the
    top-level status and reason."""
    res.compiled = c
    res.device_warnings = sorted(set(res.device_warnings) | set(c.device_warnings or []))
    res.warnings = (res.warnings or []) + [f"compiled: {w}" for w in c.warnings or []]
    if c.status == "fail":
        res.reason = "; ".join(
            x
            for x in (
                res.reason if res.status == "fail" else None,
                f"compiled: {c.reason}",
            )
            if x
        )
        res.status = "fail"
