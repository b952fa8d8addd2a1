"""The ``torchneuron`` command line (also ``python -m torchneuron``).

``torchneuron check MODEL`` runs the three-phase migration evaluation; see docs/check.md.
Exit codes: 0 pass, 1 a phase failed or a regression was found (or the cost budget was
exceeded), 2 bad usage or input.
``torchneuron run [-m module | script.py] [args...]`` runs a CUDA program unchanged on neuron
(torchneuron/run.py); its exit code is the program's.
"""

from __future__ import annotations

import argparse
import os
import sys

EPILOG = """\
MODEL is a built-in name (see --list) or path/to/file.py:factory, where factory()
returns (model, example_inputs): a torch.nn.Module on the CPU and a tuple of tensors
(positional) or a dict of tensors (keywords). A factory may take batch_size and seed.

exit codes: 0 pass; 1 a phase failed, a regression against --baseline was found or
--max-cost-per-million was exceeded; 2 bad usage or input; 3 (--gate-host-latency only) the
host was too noisy to decide latency.
"""


def _int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``torchneuron`` and its ``check`` command."""
    import torchneuron

    p = argparse.ArgumentParser(
        prog="torchneuron",
        description="TorchNeuron tools: a PyTorch 'neuron' "
        "device on an emulated NeuronCore, and the migration evaluator.",
    )
    p.add_argument("--version", action="version", version=f"torchneuron {torchneuron.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "run",
        help="run a CUDA program unchanged on neuron: torchneuron run "
        "[-m module | script.py] [args...]",
        add_help=False,
    )
    c = sub.add_parser(
        "check",
        help="evaluate a model for migration: runs? accurate? performance? cost?",
        description="Three-phase migration evaluation of MODEL on the neuron device: "
        "(1) does it run, (2) is it accurate against a reference device and a float64 "
        "golden run, (3) stable performance after warm-up; with cost, a version "
        "manifest, and baselines for CI.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument(
        "model", nargs="?", metavar="MODEL", help="built-in name or path/to/file.py:factory"
    )
    c.add_argument("--list", action="store_true", help="list the built-in models and exit")
    _add_model_arguments(c)
    _add_accuracy_arguments(c)
    _add_performance_arguments(c)
    _add_baseline_arguments(c)
    _add_cost_arguments(c)
    _add_output_arguments(c)
    return p


def _add_model_arguments(c: argparse.ArgumentParser) -> None:
    """The ``check`` command's model group: batch size, dtype, seed, device, fallback, mode."""
    g = c.add_argument_group("model")
    g.add_argument(
        "--batch-size", type=_int, help="batch size passed to the factory (default: the factory's)"
    )
    g.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        default="float32",
        help="float32, or bfloat16/float16 under autocast on both devices (default float32)",
    )
    g.add_argument(
        "--seed", type=int, default=0, help="seed of the RNGs and of the factory (default 0)"
    )
    g.add_argument(
        "--device",
        default="neuron",
        help="neuron device to check on (default neuron, i.e. the current core)",
    )
    g.add_argument(
        "--fallback",
        choices=["warn", "error"],
        help="CPU fallback of ops without a native kernel: warn (run them on the CPU) or error "
        "(fail phase 1); default: the process setting (TORCHNEURON_FALLBACK, else warn)",
    )
    g.add_argument(
        "--mode",
        choices=["eager", "compile", "both"],
        default="both",
        help="eager: no torch.compile; compile: phase 1 checks both, phases 2 and 3 "
        "measure the compiled model; both (default): phase 1 checks both, phases "
        "2 and 3 measure eager",
    )


def _add_accuracy_arguments(c: argparse.ArgumentParser) -> None:
    """The ``check`` command's accuracy (phase 2) group: reference device, tolerance."""
    g = c.add_argument_group("accuracy (phase 2)")
    g.add_argument(
        "--reference", choices=["cpu", "cuda"], default="cpu", help="reference device (default cpu)"
    )
    g.add_argument(
        "--tol",
        type=float,
        help="tolerance of the accuracy rule (default by dtype: "
        "float32 1e-4, float16 1e-3, bfloat16 1e-2)",
    )


def _add_performance_arguments(c: argparse.ArgumentParser) -> None:
    """The ``check`` command's performance (phase 3) group: iterations, warm-up, timing threads."""
    g = c.add_argument_group("performance (phase 3)")
    m = g.add_mutually_exclusive_group()
    m.add_argument(
        "--iterations", type=_int, default=None, help="measured iterations (default 100)"
    )
    m.add_argument("--seconds", type=float, help="measure for this many seconds instead")
    g.add_argument(
        "--max-warmup",
        type=_int,
        default=100,
        help="at most this many warm-up iterations (default 100)",
    )
    g.add_argument(
        "--cv-threshold",
        type=float,
        default=0.05,
        help="warm-up ends when the rolling coefficient of variation is <= this (default 0.05)",
    )
    g.add_argument(
        "--cv-window",
        type=_int,
        default=None,
        help="iterations in the rolling window, at most --max-warmup (default 10, or --max-warmup if less)",
    )
    g.add_argument(
        "--timing-threads",
        type=int,
        default=1,
        metavar="N",
        help="PyTorch intra-op threads while timing (default 1: OpenMP workers spin-wait, and on a "
        "loaded host their spinning sets a multi-threaded forward's time); 0: PyTorch's default",
    )
    g.add_argument(
        "--skip-reference-perf", action="store_true", help="do not time the reference device"
    )


def _add_baseline_arguments(c: argparse.ArgumentParser) -> None:
    """The ``check`` command's baseline and regressions group: save, compare, the gates' thresholds."""
    g = c.add_argument_group("baseline and regressions")
    g.add_argument(
        "--save-baseline",
        metavar="DIR",
        help="save this run as the baseline in DIR (only if it passes)",
    )
    g.add_argument(
        "--baseline", metavar="DIR", help="compare outputs and metrics with the baseline in DIR"
    )
    g.add_argument(
        "--max-latency-regression",
        type=float,
        metavar="FRACTION",
        help="fail when p50 latency exceeds the baseline's by more than this (default 0.10)",
    )
    g.add_argument(
        "--max-rounds",
        type=_int,
        default=3,
        metavar="N",
        help="with --gate-host-latency only: measurement rounds before a latency comparison "
        "too noisy to decide is "
        "reported inconclusive (exit code 3), and the rounds a --save-baseline run "
        "measures (default 3)",
    )
    g.add_argument(
        "--baseline-runs",
        type=_int,
        default=3,
        metavar="N",
        help="with --gate-host-latency only. With --save-baseline: measure phase 3 in N processes (this one and N-1 fresh ones) "
        "and keep each one's figures: re-checks are read against their median and a "
        "regression must exceed their spread; with --baseline: a latency regression read "
        "in this process is measured again in up to N-1 fresh processes and decided on "
        "the median over the processes (default 3)",
    )
    g.add_argument(
        "--max-memory-regression",
        type=float,
        metavar="FRACTION",
        help="fail when peak device memory exceeds the baseline's by more than this (default 0.10)",
    )
    g.add_argument(
        "--gate-host-latency",
        action="store_true",
        help="let the emulator's host latency decide against the baseline (statistics over "
        "rounds and processes; exit code 3 when too noisy to decide). Without it the exact "
        "quantities decide (kernels, fallbacks, projected time, graph breaks, recompiles, memory)",
    )
    for flag, what, default in (
        ("--max-projected-time-regression", "the eager pass's projected Trainium2 time", "0.10"),
        ("--max-kernel-regression", "device launches per pass", "0.10"),
    ):
        g.add_argument(
            flag,
            type=float,
            metavar="FRACTION",
            help=f"fail when {what} exceeds the baseline's by more than this (default {default})",
        )
    for flag, what in (
        ("--max-fallback-increase", "CPU fallback calls per pass"),
        ("--max-graph-break-increase", "graph breaks"),
        ("--max-recompile-increase", "recompiles"),
        ("--max-new-signature-increase", "new kernel signatures after warm-up"),
    ):
        g.add_argument(
            flag,
            type=_int,
            metavar="N",
            help=f"fail when {what} exceed the baseline's by more than N (default 0)",
        )


def _add_cost_arguments(c: argparse.ArgumentParser) -> None:
    """The ``check`` command's cost group: prices, budget, training steps, projection, sweep."""
    g = c.add_argument_group("cost")
    g.add_argument(
        "--instance", help="instance the device cost is priced as (default trn1.2xlarge)"
    )
    g.add_argument(
        "--price-per-hour", type=float, metavar="USD", help="override the device instance's price"
    )
    g.add_argument(
        "--reference-instance",
        help="instance the reference is priced as "
        "(default c7i.8xlarge for cpu, g5.xlarge for cuda)",
    )
    g.add_argument(
        "--reference-price-per-hour", type=float, metavar="USD", help="override the reference price"
    )
    g.add_argument(
        "--amortize-samples",
        type=_int,
        default=1_000_000,
        metavar="N",
        help="spread the one-time overhead over N samples (default 1,000,000)",
    )
    g.add_argument(
        "--max-cost-per-million",
        type=float,
        metavar="USD",
        help="fail when the device cost per million samples exceeds this (budget alert)",
    )
    g.add_argument(
        "--train-steps",
        type=_int,
        default=5,
        metavar="N",
        help="optimizer steps of the training check, for factories returning (model, inputs, loss_fn) "
        "(default 5)",
    )
    g.add_argument(
        "--projection",
        action="store_true",
        help="project Trainium2/Trainium3 latency, throughput and cost from the model's StableHLO "
        "(a roofline estimate, not a measurement)",
    )
    g.add_argument(
        "--launch-overhead-us",
        type=float,
        metavar="US",
        help="fixed cost per kernel launch in the eager Trainium projection (default: the "
        "compiled projection's cost per execution, fitted to AWS's published latencies; "
        "torchneuron/check/projection/overheads.py)",
    )
    g.add_argument(
        "--sweep",
        nargs="+",
        metavar="AXIS=V1,V2",
        help="run the check over a grid: batch=1,8,32 dtype=float32,bfloat16 mode=eager,compile; "
        "prints a table and writes plots (--sweep-plot)",
    )
    g.add_argument(
        "--sweep-plot",
        metavar="FILE",
        default="sweep.svg",
        help="where the sweep's plots go (.svg or .png; default sweep.svg)",
    )


def _add_output_arguments(c: argparse.ArgumentParser) -> None:
    """The ``check`` command's output group: JSON, JUnit, HTML, details, progress, profile."""
    g = c.add_argument_group("output")
    g.add_argument("--json", metavar="FILE", help="write the whole result as JSON")
    g.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    g.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    g.add_argument(
        "--details",
        action="store_true",
        help="after the first screen (verdict, phases, findings), print the full tables: "
        "phases 1-3, cost, projection, the per-pass kernel trace, the baseline comparison",
    )
    g.add_argument("--quiet", action="store_true", help="print only the verdict line")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")
    g.add_argument(
        "--profile",
        action="store_true",
        help="profile one steady-state iteration (torch.profiler): timeline and top ops by "
        "device time in the HTML and JSON",
    )


def _config(a: argparse.Namespace, argv: list[str]):
    from .check import CheckConfig

    iterations = (
        a.iterations if a.iterations is not None else (None if a.seconds is not None else 100)
    )
    return CheckConfig(
        model=a.model,
        batch_size=a.batch_size,
        dtype=a.dtype,
        seed=a.seed,
        device=a.device,
        reference=a.reference,
        tol=a.tol,
        fallback=a.fallback,
        mode=a.mode,
        iterations=iterations,
        seconds=a.seconds,
        max_warmup=a.max_warmup,
        cv_window=a.cv_window,
        cv_threshold=a.cv_threshold,
        skip_reference_perf=a.skip_reference_perf,
        timing_threads=a.timing_threads,
        max_rounds=a.max_rounds,
        baseline_runs=a.baseline_runs,
        baseline=a.baseline,
        save_baseline=a.save_baseline,
        max_latency_regression=a.max_latency_regression,
        max_memory_regression=a.max_memory_regression,
        max_projected_time_regression=a.max_projected_time_regression,
        max_kernel_regression=a.max_kernel_regression,
        max_fallback_increase=a.max_fallback_increase,
        max_graph_break_increase=a.max_graph_break_increase,
        max_recompile_increase=a.max_recompile_increase,
        max_new_signature_increase=a.max_new_signature_increase,
        gate_host_latency=a.gate_host_latency,
        launch_overhead_us=a.launch_overhead_us,
        instance=a.instance,
        price_per_hour=a.price_per_hour,
        reference_instance=a.reference_instance,
        reference_price_per_hour=a.reference_price_per_hour,
        amortize_samples=a.amortize_samples,
        max_cost_per_million=a.max_cost_per_million,
        projection=a.projection,
        train_steps=a.train_steps,
        json_path=a.json,
        junit_path=a.junit,
        html_path=a.html,
        progress=not (a.no_progress or a.quiet),
        argv=["torchneuron"] + argv,
        profile=a.profile,
    )


def _console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # a pipe or a log file has no width: COLUMNS where the user set it, else 140
    sized = stream.isatty() or os.environ.get("COLUMNS", "").isdigit()
    return Console(stderr=stderr, width=None if sized else 140, highlight=False)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 pass, 1 fail or regression, 2 bad usage)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":  # the program's own arguments are not ours to parse
        from .run import main as run_main

        return run_main(argv[1:])
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help/--version (0) or a usage error (2)
        return int(e.code or 0) if isinstance(e.code, int) else 2
    if a.command is None:
        parser.print_help()
        return 2
    # The report's Warnings section lists each operator's narrowing/fallback warning
    # (read by the device at its first warning; a user's setting wins).
    os.environ.setdefault("TORCHNEURON_WARN_PER_OP", "1")
    from .check import EXIT_USAGE, CheckUsageError, run, write_outputs
    from .check.report import terminal as report_terminal

    if a.list:
        report_terminal.list_models(_console())
        return 0
    if a.sweep and not a.model and "=" not in a.sweep[-1]:
        a.model = a.sweep.pop()  # `--sweep batch=1,8 MODEL`: nargs="+" took the model name
    if not a.model:
        print("torchneuron check: error: MODEL is required (or --list)", file=sys.stderr)
        return EXIT_USAGE
    err = _console(stderr=True)
    if a.sweep:
        return _sweep(a, argv)
    try:
        cfg = _config(a, argv)
        ui = report_terminal.TerminalUI(err, progress=cfg.progress) if not a.quiet else None
        result = run(cfg, ui)
        write_outputs(result, cfg)
    except CheckUsageError as e:
        print(f"torchneuron check: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if a.quiet:
        print(
            f"torchneuron check {result.model['name']}: {result.verdict.upper()}"
            + "".join(f"\n  {f}" for f in result.failures)
        )
    else:
        report_terminal.render(result, _console(), details=a.details)
        for opt, path in (
            ("JSON", cfg.json_path),
            ("JUnit XML", cfg.junit_path),
            ("HTML report", cfg.html_path),
        ):
            if path:
                print(f"{opt} written to {path}")
    return int(result.exit_code)


def _sweep(a, argv) -> int:
    """``--sweep``: one check per grid point, a table, plots, the JSON of every point."""
    import json

    from .check import EXIT_USAGE, CheckUsageError, sweep

    try:
        cfg = _config(a, argv)
        grid = sweep.parse(a.sweep)
        given = {
            "batch": a.batch_size is not None,
            "dtype": any(x == "--dtype" or x.startswith("--dtype=") for x in argv),
        }
        for axis, opt in (("batch", "--batch-size"), ("dtype", "--dtype")):
            if given[axis] and any(i.startswith(axis + "=") for i in a.sweep):
                raise CheckUsageError(
                    f"{opt} cannot be used with the sweep axis {axis}=: the axis sets it "
                    "at each point (drop one of them)"
                )
        res = sweep.run(cfg, grid, plot_path=a.sweep_plot)
    except CheckUsageError as e:
        print(f"torchneuron check: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    from rich.table import Table

    t = Table(
        title=f"Sweep of {a.model} (emulated device on this host: not Trainium figures)",
        title_justify="left",
    )
    t.caption = "samples/s = batch / p50 (the median iteration) and USD / 1M samples from it; mean-based: --json"
    t.caption_justify = "left"
    for col in (
        "batch",
        "dtype",
        "mode",
        "result",
        "p50 ms",
        "samples/s",
        "peak MiB",
        "USD / 1M samples",
    ):
        t.add_column(col, justify="right")
    for p in res["points"]:
        if p.get("p50_s") is None:
            t.add_row(
                str(p["batch"] or "default"),
                p["dtype"],
                p["mode"],
                p.get("reason") or p["status"],
                "",
                "",
                "",
                "",
            )
            continue
        t.add_row(
            str(p["batch"]),
            p["dtype"],
            p["mode"],
            p["status"],
            f"{p['p50_s'] * 1e3:.3f}",
            f"{p['throughput_samples_per_s']:,.0f}",
            (
                f"{p['peak_allocated_bytes'] / 2**20:.2f}"
                if p.get("peak_allocated_bytes") is not None
                else "not measured"
            ),
            f"{p['usd_per_million']:.4g}" if p.get("usd_per_million") else "",
        )
    _console().print(t)
    path = sweep.plot(res, a.sweep_plot)
    if path:
        print(f"plots written to {path}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2, default=str)
        print(f"JSON written to {a.json}")
    return int(res["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
