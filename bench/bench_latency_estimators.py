"""Which normalized latency figure is steady between runs on a loaded host.

Runs the `blocks` check fixture in fresh processes with one CPU-burning process per core
(as bench_check_verdicts.py and tests/check/test_noisy_host.py do), each run interleaving
device, reference and calibration steps as `torchneuron check` phase 3 does (80 iterations
after 20 warm-up iterations, one intra-op thread), and records per step the wall seconds and
the work CPU seconds (``check/workclock.py``: the device's busy time, the host thread's). Then, per
estimator, the log standard deviation of the run's figure between runs of the unchanged
build, and the planted changes relative to the unchanged runs' mean: device alone +30 %
(`d`) and the forward 3x on both sides (`m`). docs/design/check-measurement.md ("Limits, measured") quotes it.
Prints figures only; nothing asserts.

    .venv/bin/python bench/bench_latency_estimators.py [--plan 0,0,d,0,0,m,0,0,d,0,0,m] [--iterations 80]
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = {"0": {}, "d": {"CHECK_FIXTURE_DEVICE_EXTRA": "0.3"}, "m": {"CHECK_FIXTURE_WORK": "3"}}

ONE_RUN = r"""
import copy, json, os, sys, time
import torch
import torchneuron
sys.path.insert(0, sys.argv[1])
import check_inference
from torchneuron.check.phases import calibration
from torchneuron.check.phases import phase3
from torchneuron.check.phases import workclock

n = int(sys.argv[2])
model, inputs = check_inference.blocks()
model.eval()
dev_model = copy.deepcopy(model).to("neuron")
x, xd = inputs["x"], inputs["x"].to("neuron")
torch.set_num_threads(1)                   # as --timing-threads 1 (the device's kernels follow)
clocks = workclock.clocks("neuron", ["device", "reference", "calibration", "calibration_matmul",
                                     "device_calibration"])

def forward(m, t, device):
    def step():
        if device:
            torch.neuron.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            m(t)
        if device:
            torch.neuron.synchronize()
        return time.perf_counter() - t0
    return step

steps = {"device": forward(dev_model, xd, True), "reference": forward(model, x, False),
         "calibration": calibration.make_step("cpu"), "calibration_matmul": calibration.make_matmul_step("cpu"),
         "device_calibration": calibration.make_step("neuron")}
with workclock.counting():
    phase3.measure_interleaved(steps, 20, None, cpu_clock=clocks)           # warm-up, not kept
    wall, cpu = phase3.measure_interleaved(steps, n, None, cpu_clock=clocks)
print(json.dumps({"wall": wall, "cpu": cpu, "load": os.getloadavg()[0]}))
"""


def _figures(run: dict) -> dict:
    w = {k: np.asarray(v) for k, v in run["wall"].items()}
    c = {k: np.asarray(v) for k, v in run["cpu"].items()}
    cal1, cal2 = c["calibration"], c["calibration"] + c["calibration_matmul"]
    wcal1 = w["calibration"]
    return {
        "wall, minimum per side (earlier statistic)": (
            w["device"].min() / w["reference"].min(),
            w["reference"].min() / wcal1.min(),
        ),
        "work CPU, minimum per side": (
            c["device"].min() / c["reference"].min(),
            c["reference"].min() / cal1.min(),
        ),
        "work CPU, median per side, small-op calibration": (
            np.median(c["device"]) / np.median(c["reference"]),
            np.median(c["reference"]) / np.median(cal1),
        ),
        "work CPU, median per side, two-part calibration": (
            np.median(c["device"]) / np.median(c["reference"]),
            np.median(c["reference"]) / np.median(cal2),
        ),
        "work CPU, 25th percentile per side, two-part": (
            np.quantile(c["device"], 0.25) / np.quantile(c["reference"], 0.25),
            np.quantile(c["reference"], 0.25) / np.quantile(cal2, 0.25),
        ),
        "work CPU, median of paired ratios, two-part (adopted)": (
            np.median(c["device"] / c["reference"]),
            np.median(c["reference"] / cal2),
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--plan", default="0,0,d,0,0,m,0,0,d,0,0,m", help="comma-separated kinds: 0, d, m"
    )
    ap.add_argument("--iterations", type=int, default=80)
    a = ap.parse_args()
    plan = a.plan.split(",")
    if any(p not in ENV for p in plan) or plan.count("0") < 3:
        raise SystemExit(f"--plan: kinds are 0, d, m, with at least three 0; got {a.plan!r}")
    burn = "import time\nend = time.time() + 900\nwhile time.time() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(os.cpu_count() or 1)]
    runs = []
    try:
        env0 = {
            k: v
            for k, v in os.environ.items()
            if k not in ("CHECK_FIXTURE_DEVICE_EXTRA", "CHECK_FIXTURE_WORK")
        }
        for kind in plan:
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    ONE_RUN,
                    os.path.join(HERE, "..", "tests", "fixtures"),
                    str(a.iterations),
                ],
                env=env0 | ENV[kind],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            runs.append((kind, _figures(r)))
            print(f"run {len(runs)}: {kind}, load average {r['load']:.1f}", flush=True)
    finally:
        for p in procs:
            p.kill()
    print(
        f"\nlog sd between {plan.count('0')} unchanged runs; planted changes as x the unchanged mean"
    )
    print(f"{'figure':56} {'dev/ref sd':>10} {'ref/cal sd':>10}  d: dev/ref        m: ref/cal")
    for name in runs[0][1]:
        base = np.log([f[name] for k, f in runs if k == "0"])
        mean, sd = base.mean(axis=0), base.std(axis=0, ddof=1)
        d = ",".join(f"{np.exp(np.log(f[name][0]) - mean[0]):.2f}" for k, f in runs if k == "d")
        m = ",".join(f"{np.exp(np.log(f[name][1]) - mean[1]):.2f}" for k, f in runs if k == "m")
        print(f"{name:56} {sd[0]:10.3f} {sd[1]:10.3f}  {d:16} {m}")


if __name__ == "__main__":
    main()
