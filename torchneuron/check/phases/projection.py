"""The projection step of a check (``--projection``): lower the model to StableHLO and
project its Trainium2/Trainium3 time and cost (``roofline.py``, with the fixed costs of
``overheads.py``). An estimate, labelled."""

from __future__ import annotations

import copy
import time

import torch

from ..projection import cost as cost_mod
from ..projection import roofline as projection
from ..projection import stablehlo
from ..projection.hardware import INSTANCES
from ..result_projection import ProjectionResult


def run(loaded, cfg, ui) -> ProjectionResult:
    """The projection: status pass, fail (lowering failed) or skipped (not asked)."""
    if not cfg.projection:
        return ProjectionResult(status="skipped", reason="not asked (--projection)")
    ui.step("Projection: lowering the model to StableHLO")
    t0 = time.perf_counter()
    try:
        model = copy.deepcopy(loaded.model).eval()
        with torch.no_grad():
            text, how = stablehlo.lower(model, loaded.inputs)
    except Exception as e:  # export/lowering limits are reported, the check goes on
        return ProjectionResult(
            status="fail",
            reason=f"lowering to StableHLO failed: {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}",
        )
    lower_s = time.perf_counter() - t0
    prices = {k: v.get("usd_per_hour") for k, v in cost_mod.load_prices().items()}
    priced_by_user = None
    if cfg.instance and cfg.price_per_hour and cfg.instance in {i for i, _ in INSTANCES.values()}:
        # the user's price for an instance the projection prices (--instance, --price-per-hour)
        prices[cfg.instance], priced_by_user = cfg.price_per_hour, cfg.instance
    res = projection.project_all(text, loaded.batch_size, prices)
    for key in ("trn2", "trn3"):
        res[key]["price_source"] = (
            "--price-per-hour"
            if res[key]["instance"] == priced_by_user
            else "price table"
            if res[key]["price_per_hour"]
            else None
        )
    ovh = res["trn2"]["overheads"]
    note = (
        "ESTIMATE from a roofline model of the StableHLO graph (figures from AWS's NeuronCore "
        "architecture pages), not a measurement on Trainium; with fixed costs per execution "
        f"(launching the NEFF, DMA descriptors, synchronization: {ovh['execution_us']:g} µs) and "
        f"the operations at 1/{ovh['roofline_factor']:g} of the roofline, both fitted to AWS's "
        "published Trn1 latencies (projection/overheads.py)"
    )
    if (
        getattr(loaded, "loss_fn", None) is not None
        or getattr(loaded, "train_step", None) is not None
    ):
        note += (
            "; the forward pass only: a training step's backward and optimizer are not projected"
        )
    return ProjectionResult(status="pass", how=how, lower_s=lower_s, note=note, **res)
