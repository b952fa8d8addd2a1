"""The compiled model's own figures in `torchneuron check` (never the eager model's under the
compile label): its peak device memory (a warm call's rise + its graphs' temporaries), the
baseline memory figure under --mode compile, and phase 3's cold row (the first compiled call)."""

import json
import os

import pytest
import torch
from check_support import FAST, cli, fixture, sweep_cli
from compile_support import fresh_compile_state  # noqa: F401  (autouse fixture)

from torchneuron.check import sweep
from torchneuron.check.model import tensors as T
from torchneuron.check.phases import memory
from torchneuron.check.phases.phase1 import DeviceSession

pytestmark = pytest.mark.skipif(
    not sweep.compile_available(), reason="no compile path in this build"
)


def test_compiled_peak_is_the_compiled_calls_own():
    torch.manual_seed(0)
    dev = torch.device("neuron")
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 16)
    ).to(dev)
    x = torch.randn(8, 64, device=dev)
    session = DeviceSession(device=str(dev), sync=T.synchronizer(dev))
    session.model, session.inputs = model, (x,)
    compiled = torch.compile(model, backend="neuron")
    with torch.no_grad():
        compiled(x)  # builds the executable; compiled_peak measures a warm call
        torch.neuron.synchronize()
        m = memory.compiled_peak(session, compiled, torch.float32, resident_bytes=1000)
    # the device allocator's rise is the output alone: 8 x 16 float32, computed from the shapes
    assert m["rise_bytes"] == 8 * 16 * 4
    # the hidden activation (8 x 1024 float32) feeds a matmul: XLA keeps it in a temporary
    assert m["temp_bytes"] >= 8 * 1024 * 4
    assert m["peak_allocated_bytes"] == 1000 + m["rise_bytes"] + m["temp_bytes"]


def test_compile_mode_figures_are_the_compiled_models(tmp_path):
    base, j = tmp_path / "b", tmp_path / "save.json"
    code, out, err = cli(
        "check",
        fixture("compiled_only"),
        *FAST,
        "--mode",
        "compile",
        "--max-rounds",
        "1",
        "--save-baseline",
        base,
        "--details",
        "--json",
        j,
    )
    assert code == 0, out + err
    r = json.loads(j.read_text())
    p1, p3 = r["phase1"], r["phase3"]
    comp, mem = p1["compile"], p1["memory"]
    # phase 3's cold row is the compiled model's first call (compile included), not eager's first pass
    assert p3["device"]["cold_s"] == comp["compile_s"] != p1["cold_latency_s"]
    assert "cold (first call, compile included)" in out
    # the baseline saves the compiled model's peak, measured on its own call
    saved = json.load(open(os.path.join(base, "baseline.json")))["metrics"]
    assert saved["peak_allocated_basis"] == "compiled"
    assert (
        saved["peak_allocated_bytes"]
        == mem["compiled_peak_allocated_bytes"]
        == (
            mem["weights_bytes"]
            + mem["compiled_peak_detail"]["rise_bytes"]
            + mem["compiled_peak_detail"]["temp_bytes"]
        )
    )
    assert saved["peak_allocated_bytes"] != mem["peak_allocated_in_order_bytes"]
    # an eager re-check does not compare its eager peak with the compiled one
    j2 = tmp_path / "eager.json"
    code, out, err = cli(
        "check",
        fixture("compiled_only"),
        *FAST,
        "--mode",
        "eager",
        "--baseline",
        base,
        "--max-latency-regression",
        "3",
        "--json",
        j2,
        "--html",
        tmp_path / "r.html",
    )
    m = json.loads(j2.read_text())["baseline"]["memory"]
    assert m["regressed"] is False and m["note"].startswith("not compared"), m
    assert "compiled model's" in m["note"] and "eager model's" in m["note"]
    html = (tmp_path / "r.html").read_text()
    assert (
        "the baseline&#x27;s peak is the compiled model&#x27;s" in html
        or "the baseline's peak is the compiled model's" in html
    )


def test_sweep_compile_points_report_the_compiled_peak(tmp_path):
    j = tmp_path / "s.json"
    code, out, err = sweep_cli(
        "mlp", ["batch=8", "mode=eager,compile"], "--sweep-plot", tmp_path / "s.svg", "--json", j
    )
    assert code == 0, out + err
    pts = {p["mode"]: p for p in json.loads(j.read_text())["points"]}
    assert pts["eager"]["peak_allocated_basis"] == "in order"
    assert pts["compile"]["peak_allocated_basis"] == "compiled"
    assert pts["compile"]["peak_allocated_bytes"] != pts["eager"]["peak_allocated_bytes"]
