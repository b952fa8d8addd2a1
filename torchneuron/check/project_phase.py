"""The projection step of a check (``--projection``): lower the model to StableHLO and
project its Trainium2/Trainium3 time and cost (``projection.py``). An estimate, labelled."""
from __future__ import annotations

import copy
import time

import torch

from . import cost as cost_mod
from . import projection, stablehlo


def run(loaded, cfg, ui) -> dict:
    """``{"status": "pass"|"fail"|"skipped", "how", "lower_s", "trn2", "trn3", "reason"}``."""
    if not cfg.projection:
        return {"status": "skipped", "reason": "not asked (--projection)"}
    ui.step("Projection: lowering the model to StableHLO")
    t0 = time.perf_counter()
    try:
        model = copy.deepcopy(loaded.model).eval()
        with torch.no_grad():
            text, how = stablehlo.lower(model, loaded.inputs)
    except Exception as e:   # export/lowering limits are reported, the check goes on
        return {"status": "fail", "reason": f"lowering to StableHLO failed: {type(e).__name__}: "
                                            f"{str(e).splitlines()[0] if str(e) else ''}"}
    lower_s = time.perf_counter() - t0
    prices = {k: v.get("usd_per_hour") for k, v in cost_mod.load_prices().items()}
    res = projection.project_all(text, loaded.batch_size, prices)
    return {"status": "pass", "how": how, "lower_s": lower_s, "reason": None,
            "note": "ESTIMATE from a roofline model of the StableHLO graph (figures from AWS's NeuronCore "
                    "architecture pages), not a measurement on Trainium",
            **res}
