"""Reliability of `torchneuron check --baseline` latency verdicts on a loaded host.

Saves a baseline of the `blocks` test fixture with one CPU-burning process per core
running (as tests/check/test_noisy_host.py does), then re-checks it: the unchanged build
(`0`), the device alone 30 % slower (`d`, CHECK_FIXTURE_DEVICE_EXTRA=0.3) and the forward
3x heavier on both sides (`m`, CHECK_FIXTURE_WORK=3), in the order given. Prints each
check's exit code (0 pass, 1 regression, 3 inconclusive), rounds and intervals, then the
counts per kind. A count, not a timing: nothing here asserts.

By default every check runs in this process (as the tests do); ``--processes`` runs each
one as its own ``python -m torchneuron check`` (as a CI job does: the baseline saved by one
process, every re-check a fresh one).

    .venv/bin/python bench/bench_check_verdicts.py [--plan 0,0,d,0,0,d,0,0] [--threshold 0.10] [--processes]
        [--quiet-baseline] [--mode both|eager|compile]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "tests", "fixtures", "check_inference.py") + ":blocks"
RUN = [
    "--iterations",
    "80",
    "--max-warmup",
    "20",
    "--max-rounds",
    "3",
    "--max-memory-regression",
    "0.5",
]
ENV = {"0": {}, "d": {"CHECK_FIXTURE_DEVICE_EXTRA": "0.3"}, "m": {"CHECK_FIXTURE_WORK": "3"}}


def check(argv: list[str], env: dict, processes: bool = False) -> int:
    if processes:
        e = {
            k: v
            for k, v in os.environ.items()
            if k not in ("CHECK_FIXTURE_DEVICE_EXTRA", "CHECK_FIXTURE_WORK")
        }
        return subprocess.run(
            [sys.executable, "-m", "torchneuron", *argv],
            env=e | env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ).returncode
    import contextlib
    import io

    from torchneuron.cli import main

    for k in ("CHECK_FIXTURE_DEVICE_EXTRA", "CHECK_FIXTURE_WORK"):
        os.environ.pop(k, None)
    os.environ.update(env)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(argv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="0,0,d,0,0,d,0,0", help="comma-separated kinds: 0, d, m")
    ap.add_argument("--threshold", type=float, default=0.10, help="--max-latency-regression")
    ap.add_argument(
        "--processes", action="store_true", help="each check in its own process (as in CI)"
    )
    ap.add_argument(
        "--quiet-baseline",
        action="store_true",
        help="save the baseline before the burners start (a baseline from a quiet host)",
    )
    ap.add_argument(
        "--mode", choices=("both", "eager", "compile"), default="both", help="check --mode"
    )
    a = ap.parse_args()
    run = RUN + ["--mode", a.mode]
    plan = a.plan.split(",")
    if any(p not in ENV for p in plan):
        raise SystemExit(f"--plan: kinds are 0, d, m; got {a.plan!r}")
    burn = "import time\nend = time.time() + 900\nwhile time.time() < end:\n    pass\n"
    d = os.path.join(tempfile.mkdtemp(), "baseline")

    def save():
        print(
            "load average",
            os.getloadavg(),
            "; saving the baseline:",
            check(["check", MODEL, *run, "--save-baseline", d], {}, a.processes),
            flush=True,
        )

    if a.quiet_baseline:
        save()
    procs = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(os.cpu_count() or 1)]
    counts: Counter = Counter()
    try:
        if not a.quiet_baseline:
            save()
        for i, kind in enumerate(plan):
            j = f"{d}-{i}.json"
            code = check(
                [
                    "check",
                    MODEL,
                    *run,
                    "--baseline",
                    d,
                    "--json",
                    j,
                    "--max-latency-regression",
                    str(a.threshold),
                ],
                ENV[kind],
                a.processes,
            )
            r = json.load(open(j))
            st = dict(r["baseline"]["latency"]["statistics"])
            # the compiled model's comparison (--mode both / compile)
            st |= ((r["baseline"].get("compiled") or {}).get("latency") or {}).get(
                "statistics"
            ) or {}
            print(
                kind,
                "exit",
                code,
                "rounds",
                r["phase3"]["rounds"],
                "load %.1f" % os.getloadavg()[0],
                " ".join(
                    f"{n}={s['decision']}(x{s['ci']['ratio']:.2f} [{s['ci']['low']:.2f}, {s['ci']['high']:.2f}])"
                    for n, s in st.items()
                    if s.get("ci")
                ),
                flush=True,
            )
            if code == 1:  # what regressed (latency or not)
                print(
                    "   regressions:", "; ".join(r["baseline"].get("regressions") or []), flush=True
                )
            counts[
                (kind, {0: "pass", 1: "regression", 3: "inconclusive"}.get(code, f"exit {code}"))
            ] += 1
    finally:
        for p in procs:
            p.kill()
    print("load average", os.getloadavg())
    for (kind, what), n in sorted(counts.items()):
        print(f"{ {'0': 'unchanged', 'd': 'device +30%', 'm': 'model x3'}[kind]:12} {what:13} {n}")


if __name__ == "__main__":
    main()
