"""``--sweep batch=1,8,32 dtype=float32,bfloat16 mode=eager,compile``: one check per grid
point, a table and plots of latency, throughput, memory and cost per million samples
against batch size (one line per dtype and mode). A point's throughput is batch / p50 and
its cost is computed from that (``THROUGHPUT_BASIS``); the check's own mean-based figures
are kept beside them.

A ``mode=compile`` point is the check with ``--mode compile`` (phases 2 and 3 time the
compiled model); without the compile path (``torch.compile(backend="neuron")``) those
points are reported "compile path not available" and not run.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

from .config import DTYPES, CheckConfig
from .errors import CheckUsageError
from .phases import memory
from .projection import cost as cost_mod

AXES = ("batch", "dtype", "mode")
#: What a point's throughput (and its cost) is computed from.
THROUGHPUT_BASIS = (
    "batch / p50 (median iteration); the check's mean-based figure in throughput_mean_samples_per_s"
)
MODES = ("eager", "compile")


def parse(items: list[str]) -> dict[str, list]:
    """``["batch=1,8", "dtype=float32"]`` -> ``{"batch": [1, 8], "dtype": ["float32"], "mode": ["eager"]}``.
    Raises CheckUsageError naming a bad axis or value."""
    grid: dict[str, list] = {}
    for item in items:
        key, sep, vals = item.partition("=")
        if not sep or key not in AXES or not vals:
            raise CheckUsageError(
                f"--sweep {item!r}: expected AXIS=v1,v2 with AXIS one of {', '.join(AXES)}"
            )
        if key in grid:  # a second batch=... would silently replace the first
            raise CheckUsageError(
                f"--sweep {key}= given twice: give all its values once, comma-separated "
                f"({key}=v1,v2)"
            )
        values = [v.strip() for v in vals.split(",") if v.strip()]
        if key == "batch":
            try:
                values = [int(v) for v in values]
            except ValueError:
                raise CheckUsageError(f"--sweep {item!r}: batch sizes must be integers") from None
            if any(v < 1 for v in values):
                raise CheckUsageError(f"--sweep {item!r}: batch sizes must be >= 1")
        elif key == "dtype" and set(values) - set(DTYPES):
            raise CheckUsageError(f"--sweep {item!r}: dtype must be among {', '.join(DTYPES)}")
        elif key == "mode" and set(values) - set(MODES):
            raise CheckUsageError(f"--sweep {item!r}: mode must be eager or compile")
        grid[key] = values
    grid.setdefault("batch", [None])
    grid.setdefault("dtype", [None])
    grid.setdefault("mode", ["eager"])
    return grid


#: options a sweep cannot honour (each point is a whole check; only the table, the plots and
#: the --json of the points are written): given with --sweep they are a usage error.
UNSUPPORTED = (
    ("--save-baseline", "save_baseline"),
    ("--baseline", "baseline"),
    ("--html", "html_path"),
    ("--junit", "junit_path"),
    ("--projection", "projection"),
    ("--profile", "profile"),
)


def validate(cfg: CheckConfig, plot_path: str | None = None) -> None:
    """Before any point runs: reject options a sweep ignores, bad option values, and output
    paths (``--json``, ``plot_path``) that could not be written. Raises CheckUsageError."""
    from .runner import validate as validate_check

    given = [opt for opt, field in UNSUPPORTED if getattr(cfg, field)]
    if cfg.mode != "both":  # each point's mode is the grid's (mode=..., default eager)
        raise CheckUsageError(
            f"--mode {cfg.mode} cannot be used with --sweep: give the mode on the grid "
            f"(mode={cfg.mode}, or mode=eager,compile)"
        )
    if given:
        raise CheckUsageError(
            f"{', '.join(given)} cannot be used with --sweep (a sweep writes its table, "
            "--sweep-plot and --json only); run a single check for "
            + ("them" if len(given) > 1 else "it")
        )
    validate_check(cfg)  # option values and the --json path
    if plot_path:
        from matplotlib.backend_bases import FigureCanvasBase

        ext = os.path.splitext(plot_path)[1].lower().lstrip(".")
        kinds = FigureCanvasBase.get_supported_filetypes()
        if ext not in kinds:
            raise CheckUsageError(
                f"--sweep-plot {plot_path!r}: give a file name ending in .svg or .png "
                f"(or another format matplotlib writes: {', '.join(sorted(kinds))})"
            )
        if os.path.isdir(plot_path):
            raise CheckUsageError(f"--sweep-plot {plot_path!r} is a folder; give a file name")
        folder = os.path.dirname(os.path.abspath(plot_path))
        if not os.path.isdir(folder):
            raise CheckUsageError(
                f"--sweep-plot {plot_path!r}: the folder {folder!r} does not exist"
            )


def compile_available() -> bool:
    """Whether ``torch.compile(backend="neuron")`` is registered."""
    try:
        from torch._dynamo import list_backends

        return "neuron" in list_backends(exclude_tags=())
    except Exception:
        return False


def run(cfg: CheckConfig, grid: dict[str, list], ui=None, plot_path: str | None = None) -> dict:
    """Run the grid; returns ``{"grid", "points": [...], "exit_code"}`` (JSON-ready).
    Each point holds its settings, status and the figures plotted. CheckUsageError (see
    ``validate``) before any point runs."""
    from .runner import run as run_check

    validate(cfg, plot_path)

    points = []
    for batch, dtype, mode in itertools.product(grid["batch"], grid["dtype"], grid["mode"]):
        pt = {"batch": batch, "dtype": dtype or cfg.dtype, "mode": mode}
        if mode == "compile" and not compile_available():
            points.append(pt | {"status": "not run", "reason": "compile path not available"})
            continue
        # mode=compile: phases 2 and 3 measure the compiled model (--mode compile)
        c = dataclasses.replace(
            cfg,
            batch_size=batch if batch is not None else cfg.batch_size,
            dtype=dtype or cfg.dtype,
            mode=mode,
            json_path=None,
            junit_path=None,
            html_path=None,
            save_baseline=None,
            baseline=None,
            progress=False,
        )
        r = run_check(c, ui)
        d = (r.phase3.device if r.phase3 else None) or {}
        comp = r.phase1.compile
        measured = "compiled" if comp.phases_2_3 == "compiled" else "eager"
        if mode == "compile" and measured != "compiled":  # never eager figures labelled compiled
            err = comp.error or {}
            points.append(
                pt
                | {
                    "status": "fail",
                    "measured": None,
                    "failures": r.failures,
                    "reason": "torch.compile(backend='neuron') failed: "
                    + (
                        err.get("short_message")
                        or (err.get("message") or "")[:240]
                        or "see the check's phase 1"
                    ),
                }
            )
            continue
        dc = r.cost.device or {}
        thr = r.model["batch_size"] / d["p50_s"] if d.get("p50_s") else None
        pt |= {
            "status": r.verdict,
            "batch": r.model["batch_size"],
            "measured": measured,
            "compiled_graphs": comp.compiled_graphs,
            "graphs_ran_compiled": comp.graphs_ran_compiled,
            "p50_s": d.get("p50_s"),
            # batch / p50: points run minutes apart on a shared host, and the mean of a
            # point's iterations is dominated by its preemption spikes (docs/design/check-measurement.md, Sweep)
            "throughput_samples_per_s": thr,
            "throughput_basis": THROUGHPUT_BASIS,
            "throughput_mean_samples_per_s": d.get("throughput_samples_per_s"),
            "usd_per_million_mean": dc.get("usd_per_million"),
            "overhead_s": dc.get("overhead_s"),
            # mode=compile: the compiled model's own peak (None: not measured), never eager's
            "peak_allocated_bytes": memory.measured_peak(r.phase1)[0],
            "peak_allocated_basis": memory.measured_peak(r.phase1)[1],
            "usd_per_million": (
                cost_mod.cost_per_million(
                    dc["usd_per_hour"], thr, dc.get("overhead_s") or 0.0, cfg.amortize_samples
                )
                if thr and dc.get("usd_per_hour")
                else None
            ),
            "failures": r.failures,
        }
        points.append(pt)
    failed = any(p["status"] == "fail" for p in points)
    return {"grid": grid, "points": points, "exit_code": 1 if failed else 0}


def plot(sweep: dict, path: str) -> str | None:
    """Four panels (latency, throughput, memory, cost per 1M samples vs batch size), one
    line per (dtype, mode); written to ``path`` (.svg or .png). None when nothing ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran = [p for p in sweep["points"] if p.get("p50_s") is not None]
    if not ran:
        return None
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    panels = [
        ("p50_s", "p50 latency (ms)", 1e3),
        ("throughput_samples_per_s", "throughput, batch / p50 (samples/s)", 1),
        ("peak_allocated_bytes", "peak device memory (MiB)", 1 / 2**20),
        ("usd_per_million", "USD per 1M samples (at batch / p50)", 1),
    ]
    for (key, label, scale), ax in zip(panels, axes):
        for (dt, mode), group in itertools.groupby(
            sorted(ran, key=lambda p: (p["dtype"], p["mode"], p["batch"])),
            key=lambda p: (p["dtype"], p["mode"]),
        ):
            g = [p for p in group if p.get(key) is not None]
            ax.plot(
                [p["batch"] for p in g],
                [p[key] * scale for p in g],
                marker="o",
                label=f"{dt}, {mode}",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("emulated device on this host: not Trainium figures", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
