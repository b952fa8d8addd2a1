"""The host-latency comparison of a run's phase 3 with a baseline's (``perfstats``): the eager and
the compiled model's statistics, their time basis and decision, and how a comparison that does not
decide (without ``--gate-host-latency``) is labelled.
"""

from __future__ import annotations

from typing import Any

from ..result_phases import Phase3Result
from ..stats import perfstats
from . import runs as baseline_runs

#: How a latency comparison is labelled when it does not decide.
HOST_TIME_NOTE = (
    "the emulator's host time: shown, not decided (it moves with the host's load and is not "
    "Trainium's time; --gate-host-latency decides on it)"
)


def shown_only(lat: dict) -> None:
    """Mark a latency comparison as shown, not deciding: its would-be regressions kept
    apart (``host_time_regressions``), its statistics deciding nothing."""
    lat["gated"] = False
    lat["host_time_note"] = HOST_TIME_NOTE
    lat["host_time_regressions"] = lat.get("regressions", [])
    lat["regressions"] = []
    lat["regressed"] = False
    for st in (lat.get("statistics") or {}).values():
        st["decides"] = False


def as_metrics(p3: Phase3Result | None) -> dict:
    """A run's phase 3 as ``latency`` and ``compiled_view`` read it: its JSON form
    (``Phase3Result.to_dict``), the form a baseline's metrics have on disk, so that one code
    reads both sides; {} when phase 3 has no result."""
    return p3.to_dict() if p3 is not None else {}


def compiled_view(src: dict, fig: dict | None, key: str) -> dict | None:
    """A baseline's metrics (``key`` "p50_s") or a run's phase 3 (``key`` "device") with the
    compiled model's figures and samples in the device's place, as ``latency`` reads them."""
    smp = src.get("samples") or {}
    if not fig or not fig.get("p50_s") or not smp.get("compiled"):
        return None
    view = {
        "samples": smp | {"device": smp["compiled"]},
        "rounds": src.get("rounds"),
        "cpu_clock": src.get("cpu_clock"),
        "work_time_basis": None,
    }
    cpu = src.get("cpu_samples") or {}
    if src.get("compiled_work_time_basis") and cpu.get("compiled"):
        # on the process's CPU time (workclock.COMPILED_SIDES): a host-like side, its waiting added
        view |= {
            "cpu_samples": cpu | {"device": cpu["compiled"]},
            "cpu_clock": f"{src.get('cpu_clock')}; {src.get('compiled_cpu_clock')}",
            "work_time_basis": src["compiled_work_time_basis"],
            "busy_time_sides": ("device_calibration",),
        }
    return view | (
        {"device": fig}
        if key == "device"
        else {
            "p50_s": fig["p50_s"],
            "throughput_samples_per_s": fig.get("throughput_samples_per_s"),
        }
    )


def latency(
    bmx: dict,
    p3: dict,
    threshold: float,
    seed: int = 0,
    side: str = "device",
    skip: tuple = (),
    wall_reason: str | None = None,
    confirm: dict | None = None,
) -> dict:
    """The latency comparison of a run's phase 3 with a baseline's metrics (``perfstats``).

    With per-iteration samples on both sides: ``device_alone`` and ``model_or_inputs``
    decide; ``device_over_device_calibration`` is reported only (it decides when the
    reference was not timed, ``--skip-reference-perf``); ``decision`` is
    ``regressed`` when any statistic's interval lies entirely above ``1 + threshold`` (times
    its margin; against a baseline measured in several processes, ``baseline_runs.adjust``:
    read against their median, the margin at least their spread; with ``confirm``, a
    regression of this process is decided on the median of its figure and fresh processes',
    ``baseline_runs.confirmed``),
    ``undecided`` when one straddles it, else ``pass``. A baseline saved without samples
    (an older version) is compared by the raw p50, and says so. Raw p50s are kept.

    Time basis: the work time (``perfstats.work_times``: each iteration's CPU seconds of the
    working threads (the device's: its busy time) plus the host sides' least waiting; a run's figure is the median of
    the per-iteration ratios) when this run and the baseline both measured it
    (``work_time_basis``: one intra-op thread, a CPU reference, eager mode); otherwise
    the minimum wall seconds of each side, as baselines saved before the work time existed
    were compared (the calibration then is the small-op workload alone).

    ``side`` names the timed model in labels and messages (``compiled``: ``bmx`` and ``p3`` are
    ``compiled_view``s); ``skip`` names statistics left out; ``wall_reason`` says why the
    wall-time basis decides when the caller knows it (the compiled model's)."""
    dev = p3.get("device")
    if not dev or not bmx.get("p50_s"):
        return {
            "regressed": False,
            "decision": "pass",
            "regressions": [],
            "note": "not compared: phase 3 did not run here or in the baseline",
        }
    what = "latency" if side == "device" else f"latency ({side})"
    out: dict[str, Any] = {
        "side": side,
        "baseline_p50_s": bmx["p50_s"],
        "current_p50_s": dev["p50_s"],
        "change": dev["p50_s"] / bmx["p50_s"] - 1,
        "threshold": threshold,
        "baseline_throughput_samples_per_s": bmx.get("throughput_samples_per_s"),
        "current_throughput_samples_per_s": dev.get("throughput_samples_per_s"),
        "rounds": p3.get("rounds"),
        "statistics": {},
        "regressions": [],
    }
    base = bmx.get("samples") or {}
    if not base.get("device") or not base.get("calibration"):
        return _raw_p50(out, bmx, dev, threshold, what)
    work, cur, base = _time_basis(out, bmx, p3, wall_reason)
    names, deciding = _statistic_names(cur, base, work, skip)
    labels = _labels(side)
    for name in names:
        c = _statistic(name, side, work, cur, base, bmx, threshold, seed, confirm)
        if c is None:
            continue
        c["decides"] = name in deciding
        key = name
        if (
            side != "device" and name != "model_or_inputs"
        ):  # compiled_alone: min compiled / min reference
            key, c["statistic"] = (
                name.replace("device", side, 1),
                c["statistic"].replace("device", side, 1),
            )
        out["statistics"][key] = c
        if c["decides"] and c["decision"] == "regressed":
            out["regressions"].append(_regression_text(what, labels[name], c, threshold, dev, bmx))
    out["decision"] = _decision(out["statistics"])
    out["regressed"] = out["decision"] == "regressed"
    return out


def _labels(side: str) -> dict[str, str]:
    """Each statistic's name in regression messages, for the timed model ``side``."""
    return {
        "device_alone": f"{side} alone ({side}/reference)",
        "device_over_device_calibration": f"{side}/device calibration",
        "model_or_inputs": "model or inputs (reference/host calibration)",
    }


def _decision(statistics: dict) -> str:
    """``regressed`` when a deciding statistic regressed, ``undecided`` when one straddles the
    threshold (or none decides), else ``pass``."""
    decisions = [c["decision"] for c in statistics.values() if c["decides"]] or ["undecided"]
    return (
        "regressed"
        if "regressed" in decisions
        else "undecided"
        if "undecided" in decisions
        else "pass"
    )


def _raw_p50(out: dict, bmx: dict, dev: dict, threshold: float, what: str) -> dict:
    """A baseline saved without per-iteration samples (an older version): the raw p50s
    against the threshold."""
    limit = bmx["p50_s"] * (1 + threshold)
    out |= {
        "method": "raw p50 (the baseline has no per-iteration samples: save it again)",
        "limit_s": limit,
        "regressed": dev["p50_s"] > limit,
        "decision": "regressed" if dev["p50_s"] > limit else "pass",
    }
    if out["regressed"]:
        out["regressions"].append(
            f"{what}: p50 {dev['p50_s'] * 1e3:.3f} ms is {out['change']:+.1%} vs the "
            f"baseline's {bmx['p50_s'] * 1e3:.3f} ms (threshold +{threshold:.0%})"
        )
    return out


def _time_basis(out: dict, bmx: dict, p3: dict, wall_reason: str | None) -> tuple:
    """The time basis (``out["time_basis"]``, ``out["method"]``): work time when both runs
    measured it on the same clock, else wall seconds with why. Returns whether it is work time
    and the current and baseline samples as the statistics read them."""
    cur, base = p3.get("samples") or {}, bmx.get("samples") or {}
    same_clock = p3.get("cpu_clock") == bmx.get("cpu_clock")
    busy = tuple(p3.get("busy_time_sides", perfstats.BUSY_TIME_SIDES))
    # a busy-time device side adds its least launch time: both runs need those samples
    launched = "device" not in busy or (
        (p3.get("launch_samples") or {}).get("device")
        and (bmx.get("launch_samples") or {}).get("device")
    )
    work = bool(
        p3.get("work_time_basis")
        and bmx.get("work_time_basis")
        and same_clock
        and (p3.get("cpu_samples") or {}).get("calibration_matmul")
        and (bmx.get("cpu_samples") or {}).get("calibration_matmul")
        and launched
    )
    boot = f"95% moving-block bootstrap interval ({perfstats.BOOTSTRAP_RESAMPLES} resamples)"
    if work:
        out["time_basis"] = "work time: " + p3["work_time_basis"]
        out["method"] = (
            "normalized work time (per iteration: the device's busy time; the host sides' thread CPU "
            "seconds + their least waiting of any iteration; median of the per-iteration ratios), "
            f"current over baseline, {boot}"
        )
        cur = {
            "cpu": p3["cpu_samples"],
            "wall": p3["samples"],
            "launch": p3.get("launch_samples"),
            "busy": busy,
        }
        base = {
            "cpu": bmx["cpu_samples"],
            "wall": bmx["samples"],
            "launch": bmx.get("launch_samples"),
            "busy": busy,
        }
    else:
        why = (
            wall_reason
            if wall_reason
            else "the baseline was saved without work-time samples (save it again)"
            if not bmx.get("work_time_basis")
            else "the baseline's CPU samples are of another clock, or it has no launch samples (save it again)"
            if not same_clock or not (bmx.get("launch_samples") or {}).get("device")
            else "this run cannot measure work time (--timing-threads other than 1, a non-CPU reference, "
            "or --mode compile)"
            if not p3.get("work_time_basis")
            else "a side lacks the matmul calibration's samples"
        )
        out["time_basis"] = f"wall seconds per step ({why})"
        out["method"] = (
            "normalized time (minimum of each side over the interleaved iterations), current over "
            f"baseline, {boot}"
        )
    return work, cur, base


def _statistic_names(cur: dict, base: dict, work: bool, skip: tuple) -> tuple[list[str], set[str]]:
    """The statistics compared (those in ``skip`` left out) and those that decide."""
    has_ref = (cur["wall"] if work else cur).get("reference") and (
        base["wall"] if work else base
    ).get("reference")
    names = [
        n
        for n in (["device_alone", "model_or_inputs"] if has_ref else [])
        + ["device_over_device_calibration"]
        if n not in skip
    ]
    # without a timed reference, the device against its fixed workload is all there is
    deciding = (
        {"device_alone", "model_or_inputs"}
        if "device_alone" in names
        else {"device_over_device_calibration"}
    )
    return names, deciding


def _statistic(
    name: str,
    side: str,
    work: bool,
    cur: dict,
    base: dict,
    bmx: dict,
    threshold: float,
    seed: int,
    confirm: dict | None,
) -> dict | None:
    """One statistic of the change (``perfstats``); on the work-time basis of the eager model,
    read against the baseline's processes and confirmed on this run's."""
    # compiled_alone carries the compiled model's load offset (perfstats.COMPILED_MARGIN)
    compiled_alone = side != "device" and name == "device_alone"
    if work:
        c = perfstats.compare_work(
            name,
            cur,
            base,
            threshold,
            seed,
            perfstats.COMPILED_MARGIN if compiled_alone else None,
        )
        if c is not None and side == "device":  # read against the baseline's processes' median
            c = baseline_runs.adjust(c, name, bmx.get("processes"), threshold)
            c = baseline_runs.confirmed(c, name, confirm, threshold)  # and on this run's processes'
        return c
    return perfstats.compare(
        name,
        cur,
        base,
        threshold,
        seed,
        perfstats.COMPILED_MARGIN if compiled_alone else 1.0,
    )


def _regression_text(what: str, label: str, c: dict, threshold: float, dev: dict, bmx: dict) -> str:
    """The regression line of a deciding statistic: its interval, margin, processes, raw p50s."""
    ci = c["ci"]
    return (
        f"{what}, {label}: x{ci['ratio']:.2f} the baseline's (95% CI x{ci['low']:.2f}-"
        f"x{ci['high']:.2f}, entirely above the threshold +{threshold:.0%}"
        + (
            f" and the between-run margin (x{c['regression_above']:.2f})"
            if c.get("regression_above", 1 + threshold) > 1 + threshold
            else ""
        )
        + ")"
        + (
            f"; the median of {len(c['confirmation']['values'])} processes (each x"
            + ", x".join(f"{x:.2f}" for x in c["confirmation"]["ratios"])
            + ")"
            if c.get("confirmation")
            else ""
        )
        + "; raw p50 "
        f"{dev['p50_s'] * 1e3:.3f} ms vs {bmx['p50_s'] * 1e3:.3f} ms"
    )
