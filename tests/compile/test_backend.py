"""The Dynamo backend "neuron": registration, options, modes, dynamic=True, recompiles,
graph breaks, failures that raise (stage, op, source line) or fall back to eager."""

import os
import re

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401
from conftest import run_python

import torchneuron  # noqa: F401


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_entry_point_after_plain_import_torch():
    out = run_python("""
        import torch
        f = torch.compile(lambda x: (x * 2).sin(), backend="neuron")
        x = torch.arange(6.0).to("neuron")
        print(torch.allclose(f(x).cpu(), (torch.arange(6.0) * 2).sin()))
        print("neuron" in torch._dynamo.list_backends())
    """)
    assert out.stdout.split() == ["True", "True"]


def test_matches_cpu_and_counts_graph():
    m = _mlp()
    x = torch.randn(5, 8)
    ref = m(x)
    c = torch.compile(m.to("neuron"), backend="neuron")
    assert torch.allclose(c(x.to("neuron")).cpu(), ref, atol=1e-6)
    recs = torch.neuron.get_dynamo_metrics()
    assert len(recs) == 1 and re.fullmatch(r"model_default_\d+_forward_\d+", recs[0]["graph_name"])
    for f in (
        "graph_id",
        "model_name",
        "graph_node_count",
        "timestamp",
        "fx_passes_us",
        "lower_us",
        "compile_us",
        "cache",
        "recompile_reason",
    ):
        assert f in recs[0]
    assert len(recs[0]["graph_id"]) == 64 and recs[0]["cache"] == "compiled"
    from torch._dynamo.utils import counters

    assert counters["neuron"]["graphs"] == 1


def test_dynamic_true_raises_runtime_error():
    c = torch.compile(lambda x: x + 1, backend="neuron", dynamic=True)
    with pytest.raises(RuntimeError, match="dynamic=True is not supported.*static shapes"):
        c(torch.ones(4, 3, device="neuron"))


def test_new_batch_size_recompiles_with_reason():
    c = torch.compile(_mlp().to("neuron"), backend="neuron", options={"model_name": "mlp"})
    with torch.no_grad():
        for b in (4, 6, 9):
            x = torch.randn(b, 8)
            assert c(x.to("neuron")).shape == (b, 4)
    recs = torch.neuron.get_dynamo_metrics()
    assert len(recs) == 3 and all(r["model_name"] == "mlp" for r in recs)
    assert recs[0]["recompile_reason"] is None
    assert "(4, 8) torch.float32 -> (6, 8)" in recs[1]["recompile_reason"]
    assert "(6, 8) torch.float32 -> (9, 8)" in recs[2]["recompile_reason"]
    from torch._dynamo.utils import counters

    assert counters["neuron"]["recompiles"] == 2


def test_mode_warns_and_unknown_option_raises():
    x = torch.ones(3, device="neuron")
    with pytest.warns(UserWarning, match="does not support mode='max-autotune'"):
        y = torch.compile(lambda t: t * 3, backend="neuron", mode="max-autotune")(x)
    assert y.cpu().tolist() == [3.0, 3.0, 3.0]
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"unknown option\(s\) \['bogus'\]"):
        torch.compile(lambda t: t * 3, backend="neuron", options={"bogus": 1})(x)


def test_graph_break_gives_two_graphs_fullgraph_raises():
    def f(x):
        y = x.sin()
        print("break")  # a graph break (Dynamo's)
        return y.cos()

    x = torch.randn(4)
    out = torch.compile(f, backend="neuron")(x.to("neuron"))
    assert torch.allclose(out.cpu(), x.sin().cos(), atol=1e-6)
    assert len(torch.neuron.get_dynamo_metrics()) == 2
    torch._dynamo.reset()
    with pytest.raises(Exception, match="print"):
        torch.compile(f, backend="neuron", fullgraph=True)(x.to("neuron"))


def _i1_user(x):
    return torch.igamma(x, x + 1) * 2 + 1  # igamma has no lowering in the compile path


def test_unlowerable_op_raises_with_stage_op_and_source_line():
    with pytest.raises(Exception) as ei:
        torch.compile(_i1_user, backend="neuron")(torch.full((4,), 0.5, device="neuron"))
    msg = str(ei.value)
    assert "lowering failed" in msg and "aten.igamma" in msg
    assert "test_backend.py" in msg and "_i1_user" in msg


def test_unlowerable_op_runs_with_fallback_execution():
    x = torch.full((4,), 0.5)
    ref = _i1_user(x)
    with pytest.warns(UserWarning, match="running graph .* eagerly on neuron"):
        out = torch.compile(_i1_user, backend="neuron", options={"fallback_execution": True})(
            x.to("neuron")
        )
    assert torch.allclose(out.cpu(), ref)
    assert torch.neuron.get_dynamo_metrics()[0]["fallback"].startswith("neuron backend: lowering")


@pytest.mark.slow  # a child process; the option form is tested in-process above
def test_fallback_by_environment():
    out = run_python(
        """
        import torch, warnings
        warnings.simplefilter("ignore")
        f = torch.compile(lambda x: torch.igamma(x, x + 1), backend="neuron")
        print(round(f(torch.full((2,), 0.5, device="neuron")).cpu()[0].item(), 4))
    """,
        env={"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "0"},
    )
    x = torch.tensor(0.5)
    assert out.stdout.strip() == str(round(torch.igamma(x, x + 1).item(), 4))


def test_unknown_compiler_flag_is_compiler_error(monkeypatch):
    monkeypatch.setenv("NEURON_CC_FLAGS", "--frobnicate")
    with pytest.raises(Exception, match="compiler failed.*unknown compiler flag '--frobnicate'"):
        torch.compile(lambda t: t + 1, backend="neuron")(torch.ones(2, device="neuron"))


def test_known_compiler_flags_and_opt_level_reach_the_compiler(monkeypatch, tmp_path):
    import json

    monkeypatch.setenv("NEURON_CC_FLAGS", "--target=trn1 -O1 --model-type=transformer")
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path / "dbg"))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    out = torch.compile(lambda t: t * 2 + 1, backend="neuron")(torch.ones(3, device="neuron"))
    assert out.cpu().tolist() == [3.0, 3.0, 3.0]
    (run,) = list((tmp_path / "dbg").iterdir())  # this process's run folder
    assert run.name.startswith("run_") and run.name.endswith(f"_{os.getpid()}")
    (d,) = list(run.iterdir())  # one graph: <model>_<aot id>_inference_<n>
    assert d.name.startswith("model_") and "_inference_" in d.name
    assert sorted(p.name for p in d.iterdir()) == [
        "compiler.txt",
        "fx_graph.txt",
        "graph.neff",
        "stablehlo.mlir",
        "torch_mlir_raw.mlir",
    ]
    info = json.loads((d / "compiler.txt").read_text())
    assert info["target"] == "trn1" and info["opt_level"] == 1
    assert "--model-type=transformer" in info["flags"]
    assert "stablehlo." in (d / "stablehlo.mlir").read_text()
    assert "arith.constant" not in (d / "stablehlo.mlir").read_text()
