"""`torchneuron check` with adaptive eager execution's fusing on (issue 26): the eager pass's
fused segments in the kernel trace, the engine's counters in the report, and an eager
projection that prices a fused segment as one launch of the kernels it holds. The reference
is the same check with the mode off, in this process: the kernels by op must be the ones
the fused segments hold, and the roofline time equal."""

import json
import os
import subprocess
import sys

import pytest
from check_support import FAST, cli, fixture

from torchneuron.check.phases import trace
from torchneuron.check.projection import kernels as kp
from torchneuron.check.projection.hardware import CORES

FUSE_ENV = {
    "TORCH_NEURONX_ENABLE_CONCATENATION": "1",
    "TORCHNEURON_CONCATENATION_FUSE": "1",
    "TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD": "0",
    "TORCHNEURON_CONCATENATION_MIN_OPS": "2",
}


def _unfused(tmp_path):
    j = tmp_path / "unfused.json"
    code, out, err = cli("check", fixture("blocks"), *FAST, "--json", j)
    assert code == 0, out + err
    return json.loads(j.read_text())


def _fused(tmp_path):
    j = tmp_path / "fused.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_NEURONX_CONCAT")}
    env.update(FUSE_ENV)
    p = subprocess.run(
        [sys.executable, "-m", "torchneuron", "check", fixture("blocks"), *FAST, "--json", j],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout, json.loads(j.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("fused_check")
    return _unfused(d), _fused(d)


def test_the_eager_pass_runs_as_fused_segments_holding_the_unfused_kernels(runs):
    plain, (_, fused) = runs
    pe, fe = plain["exact"]["eager"], fused["exact"]["eager"]
    assert pe["fused_segments"] == 0 and pe["concatenation"] is None
    assert pe["kernels"] == 20  # ten Linear+tanh blocks
    assert fe["fused_segments"] >= 1
    assert fe["kernels"] + fe["fused_kernels"] == pe["kernels"]
    c = fe["concatenation"]
    assert c["segments"] == fe["fused_segments"] and c["ops_fused"] == fe["fused_kernels"]
    assert c["cache_hits"] == c["segments"] and c["cache_misses"] == 0
    assert c["check"]["compiles"] >= 1 and c["check"]["compile_s"] > 0


def test_the_eager_projection_prices_a_fused_segment_as_one_launch_of_its_kernels(runs):
    plain, (_, fused) = runs
    pp, fp = plain["exact"]["eager"]["projection"], fused["exact"]["eager"]["projection"]
    for core in ("trn2", "trn3"):
        assert fp[core]["flops"] == pp[core]["flops"]
        assert fp[core]["hbm_bytes"] == pp[core]["hbm_bytes"]
        assert fp[core]["roofline_s"] == pytest.approx(pp[core]["roofline_s"], rel=1e-12)
        assert (
            fp[core]["launches"]
            == fused["exact"]["eager"]["fused_segments"] + (fused["exact"]["eager"]["kernels"])
        )
        assert fp[core]["launches"] < pp[core]["launches"]


def test_the_report_names_the_engine_and_its_counters(runs):
    _, (out, fused) = runs
    c = fused["exact"]["eager"]["concatenation"]
    assert "adaptive eager execution" in out
    assert f"{c['segments']} fused segment(s) of {c['ops_fused']} ops" in out


def test_a_fused_kernel_is_costed_as_the_eager_kernels_it_holds():
    ops = [
        trace.Kernel(
            "aten::addmm", "kernel", "aten::addmm", [[16], [8, 16], [16, 16]], ["float"] * 3
        ),
        trace.Kernel("aten::tanh", "kernel", "aten::tanh", [[8, 16]], ["float"]),
    ]
    seg = trace.Kernel("fused_addmm_tanh_0123abcd_0_inference_0", "fused", ops=list(ops))
    core = CORES["trn2"]
    alone, fused = kp.project(ops, core), kp.project([seg], core)
    assert fused["roofline_s"] == pytest.approx(alone["roofline_s"], rel=1e-12)
    assert (alone["launches"], fused["launches"]) == (2, 1)
    assert trace.summarize([seg])["fused_kernels"] == 2
