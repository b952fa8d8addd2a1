"""Cost per million samples from measured throughput and on-demand instance prices.

The price table (``torchneuron/data/prices.csv``) ships with the project; every row
names its source page and the date its figure is known for. Prices change: check the
source before a purchase decision, or pass ``--price-per-hour``.

Formula (USD per million samples)::

    cost = price_per_hour / 3600 * (1e6 / throughput + overhead_s * 1e6 / amortize_samples)

``throughput`` is the measured steady-state samples/s; ``overhead_s`` is the one-time
cost spread over ``amortize_samples`` samples: the compile time when a graph compiler
ran, otherwise (eager mode, no compile step) the measured cold-start overhead = first
iteration minus steady-state p50 (clamped at 0). Under ``--mode both`` the eager figures
use the cold-start overhead and a ``compiled`` entry gives the compiled model's cost with
``overhead_s`` = the cold compile time (phase 1's first compiled call, empty NEFF cache).
"""

from __future__ import annotations

import csv
import io
from importlib import resources

from ..errors import CheckUsageError
from ..result import Phase1Result
from ..result_cost import CostResult
from ..result_phases import Phase3Result

DEFAULT_DEVICE_INSTANCE = "trn1.2xlarge"
DEFAULT_REFERENCE_INSTANCE = {"cpu": "c7i.8xlarge", "cuda": "g5.xlarge"}


def load_prices() -> dict[str, dict]:
    """The shipped price table: ``{instance: row}`` with ``usd_per_hour`` a float or None."""
    text = resources.files("torchneuron").joinpath("data/prices.csv").read_text()
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    rows = {}
    for r in csv.DictReader(io.StringIO("\n".join(lines))):
        r = {k: (v.strip() if isinstance(v, str) else v) for k, v in r.items()}
        r["usd_per_hour"] = float(r["usd_per_hour"]) if r.get("usd_per_hour") else None
        rows[r["instance"]] = r
    return rows


def price_for(
    instance: str | None,
    override: float | None,
    default: str,
    prices: dict[str, dict],
    option: str = "--price-per-hour",
) -> dict:
    """The price to use: ``override`` (--price-per-hour) wins, else the table's row for
    ``instance`` (or ``default``). Raises CheckUsageError for an unknown instance or one
    without a price in the table and no override."""
    name = instance or default
    if override is not None:
        if override <= 0:
            raise CheckUsageError(f"{option} must be > 0, got {override}")
        row = prices.get(name, {})
        return {
            "instance": name,
            "usd_per_hour": float(override),
            "source": "given on the command line",
            "as_of": None,
            "table_price": row.get("usd_per_hour"),
        }
    if name not in prices:
        raise CheckUsageError(
            f"unknown instance {name!r}: known instances are "
            f"{', '.join(sorted(prices))}; or give {option}"
        )
    row = prices[name]
    if row["usd_per_hour"] is None:
        raise CheckUsageError(
            f"instance {name!r} has no verified price in the table "
            f"({row.get('note') or 'no figure'}): give {option}"
        )
    return {
        "instance": name,
        "usd_per_hour": row["usd_per_hour"],
        "source": row["source"],
        "as_of": row["as_of"],
        "note": row.get("note") or None,
    }


def cost_per_million(
    usd_per_hour: float,
    throughput: float,
    overhead_s: float = 0.0,
    amortize_samples: int = 1_000_000,
) -> float:
    """USD per million samples (formula in the module docstring)."""
    if not throughput or throughput <= 0:
        return float("inf")
    seconds = 1e6 / throughput + max(overhead_s, 0.0) * 1e6 / amortize_samples
    return usd_per_hour / 3600.0 * seconds


def compute(
    phase1: Phase1Result,
    phase3: Phase3Result | None,
    cfg,
    device_price: dict,
    reference_price: dict,
    reference_cold_s: float | None,
    host_cpu: str,
    emulated: bool,
) -> CostResult:
    """The cost section of the result (None figures when phase 3 did not run)."""
    res = CostResult(
        device={**device_price},
        reference={**reference_price},
        amortize_samples=cfg.amortize_samples,
        formula="price_per_hour / 3600 * (1e6 / throughput + overhead_s * 1e6 / amortize_samples)",
        budget_usd_per_million=cfg.max_cost_per_million,
        notes=_notes(emulated, host_cpu, reference_price),
    )
    d = phase3.device if phase3 else None
    if not d:
        res.notes.append("no cost: phase 3 did not run")
        return res
    comp = phase1.compile
    if comp.checked and comp.ok and comp.phases_2_3 == "compiled":
        overhead, label = comp.compile_s, "compile time (torch.compile first call)"
    else:
        overhead = max((d.get("cold_s") or 0.0) - d["p50_s"], 0.0)
        label = (
            "cold-start overhead (first iteration minus steady p50); eager mode has no compile step"
        )
    res.device.update(_priced(device_price, d, overhead, label, cfg.amortize_samples))
    r = phase3.reference
    if r:
        roverhead = max((reference_cold_s or 0.0) - r["p50_s"], 0.0)
        res.reference.update(
            _priced(
                reference_price,
                r,
                roverhead,
                "cold-start overhead (first iteration minus steady p50)",
                cfg.amortize_samples,
            )
        )
    c = phase3.compiled
    if c and c.get("throughput_samples_per_s"):
        res.compiled = _priced(
            device_price,
            c,
            comp.compile_s or 0.0,
            "cold compile time (torch.compile first call, empty NEFF cache)",
            cfg.amortize_samples,
        )
    if cfg.max_cost_per_million is not None:
        res.over_budget = res.device["usd_per_million"] > cfg.max_cost_per_million
    return res


def _notes(emulated: bool, host_cpu: str, reference_price: dict) -> list[str]:
    """What the cost figures are not: Trainium's (on the emulator), the priced reference
    instance's, one core's share of the instance."""
    notes = []
    if emulated:
        notes.append(
            "The device is the NeuronCore emulator: its throughput is not Trainium "
            "throughput, so the device cost here is not a Trainium cost."
        )
    notes.append(
        f"The reference was measured on this host's CPU ({host_cpu}), not on the "
        f"priced {reference_price['instance']}."
    )
    notes.append(
        "The price is the whole instance's; the model ran on one NeuronCore. "
        "Serving replicas on every core would divide the cost if throughput scales."
    )
    return notes


def _priced(price: dict, figures: dict, overhead: float, label: str, amortize: int) -> dict:
    """One side's throughput, one-time overhead and cost per million samples (with the overhead
    amortized, and steady)."""
    return {
        "throughput_samples_per_s": figures["throughput_samples_per_s"],
        "overhead_s": overhead,
        "overhead_label": label,
        "usd_per_million": cost_per_million(
            price["usd_per_hour"], figures["throughput_samples_per_s"], overhead, amortize
        ),
        "usd_per_million_steady": cost_per_million(
            price["usd_per_hour"], figures["throughput_samples_per_s"]
        ),
    }
