"""The Trainium projection: StableHLO parsing (FLOPs, engines, bytes), the roofline on
NeuronCore figures, the torch-mlir lowering and `torchneuron check --projection`."""
import json

import pytest
import torch

from check_support import cli
from torchneuron.check import hardware, projection

CONV = ("    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], "
        "window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
        "(tensor<1x8x8x3xf32>, tensor<3x3x3x16xf32>) -> tensor<1x6x6x16xf32>")
MODULE = f"""module {{
  func.func @main(%arg0: tensor<4x64xbf16>, %arg1: tensor<64x32xbf16>) -> tensor<4x32xbf16> {{
    %cst = stablehlo.constant dense<1.0> : tensor<4x32xbf16>
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<4x64xbf16>, tensor<64x32xbf16>) -> tensor<4x32xbf16>
    %1 = stablehlo.add %0, %cst : tensor<4x32xbf16>
    %2 = stablehlo.exponential %1 : tensor<4x32xbf16>
    %3 = stablehlo.transpose %2, dims = [1, 0] : (tensor<4x32xbf16>) -> tensor<32x4xbf16>
{CONV}
    return %2 : tensor<4x32xbf16>
  }}
}}"""


def test_parse_counts_flops_and_engines():
    ops = {o.name: o for o in projection.parse(MODULE)}
    assert ops["dot_general"].flops == 2 * 4 * 32 * 64 and ops["dot_general"].engine == "tensor"
    assert ops["convolution"].flops == 2 * (6 * 6 * 16) * (3 * 3 * 3) and ops["convolution"].engine == "tensor"
    assert ops["add"].engine == "vector" and ops["add"].flops == 4 * 32
    assert ops["exponential"].engine == "scalar"
    assert ops["transpose"].engine == "move" and ops["transpose"].flops == 0
    assert ops["add"].out_bytes == 4 * 32 * 2 and ops["dot_general"].in_bytes == (4 * 64 + 64 * 32) * 2
    assert "constant" not in ops and "return" not in ops


def test_roofline_compute_and_memory_bound():
    core = hardware.NEURONCORE_V3
    r = projection.project(MODULE, core, batch=4)
    dot = next(x for x in r["top_ops"] if x["op"] == "dot_general")
    assert dot["bound"] == "compute" and dot["time_s"] == pytest.approx(2 * 4 * 32 * 64 / core.tensor_bf16)
    # a transpose of a tensor bigger than half the SBUF is materialized in HBM: memory-bound;
    # an elementwise op on it is fused with its producer: no HBM traffic of its own
    n = core.sbuf_bytes // 4 // 2                  # 2 x n f32 elements: the whole SBUF
    body = (f"    %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x{n}xf32>) -> tensor<{n}x2xf32>\n"
            f"    %1 = stablehlo.add %0, %0 : tensor<{n}x2xf32>")
    r2 = projection.project(f"module {{\n  func.func @main(%arg0: tensor<2x{n}xf32>) -> tensor<{n}x2xf32> {{\n"
                            f"{body}\n  }}\n}}", core, batch=1)
    ops2 = {x["op"]: x for x in r2["top_ops"]}
    op = ops2["transpose"]
    assert op["bound"] == "memory" and op["hbm_bytes"] == 2 * 2 * n * 4
    assert op["time_s"] == pytest.approx(2 * 2 * n * 4 / (core.hbm_bytes_per_s_chip / core.cores_per_chip))
    assert ops2["add"]["hbm_bytes"] == 0 and ops2["add"]["bound"] == "compute"
    assert r2["latency_s_per_core"] == pytest.approx(op["time_s"] + ops2["add"]["time_s"]
                                                     + 2 * n * 4 / core.hbm_bytes_per_s_core)
    assert "not a measurement" in r2["estimate"]


def test_every_figure_has_a_source():
    for core in (hardware.NEURONCORE_V2, hardware.NEURONCORE_V3, hardware.NEURONCORE_V4):
        assert core.sources and all(u.startswith("https://awsdocs-neuron") for u in core.sources.values())
    assert hardware.NEURONCORE_V4.tensor_fp8 > hardware.NEURONCORE_V3.tensor_fp8
    assert hardware.NEURONCORE_V4.hbm_bytes_per_s_core > hardware.NEURONCORE_V3.hbm_bytes_per_s_core


def test_lowering_a_model_counts_its_matmuls():
    pytest.importorskip("torch_mlir")
    from torchneuron.check import stablehlo

    m = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    text, how = stablehlo.lower(m, (torch.randn(16, 64),))
    assert "stablehlo.dot_general" in text
    tensor = sum(o.flops for o in projection.parse(text) if o.engine == "tensor")
    assert tensor == 2 * 16 * 64 * 32 + 2 * 16 * 32 * 8


def test_lowering_a_model_whose_output_holds_a_kv_cache():
    # a dataclass with a transformers DynamicCache, nested containers and a string:
    # torch.export refused the Cache output ("register a pytree"); its tensors are lowered
    pytest.importorskip("torch_mlir")
    import importlib.util
    import os

    from torchneuron.check import stablehlo

    spec = importlib.util.spec_from_file_location(
        "check_models", os.path.join(os.path.dirname(__file__), "fixtures", "check_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, inputs = mod.structured()
    text, how = stablehlo.lower(model.eval(), inputs)
    assert "stablehlo.dot_general" in text and "export_and_import" in how
    # the function returns the hidden state, the cache's key and value, and the nested tensors
    assert text.count("tensor<4x2x16x4xf32>") >= 2


def test_check_projection_section(tmp_path):
    pytest.importorskip("torch_mlir")
    j = tmp_path / "r.json"
    code, out, err = cli("check", "mlp", "--iterations", "5", "--max-warmup", "5", "--projection", "--json", j)
    assert code == 0, out + err
    p = json.loads(j.read_text())["projection"]
    assert p["status"] == "pass" and set(p) >= {"trn2", "trn3"}
    assert p["trn2"]["core"] == "NeuronCore-v3" and p["trn3"]["core"] == "NeuronCore-v4"
    assert p["trn3"]["latency_s_per_core"] < p["trn2"]["latency_s_per_core"]
    assert p["trn2"]["cores_per_instance"] == 128
    assert "ESTIMATE" in out and "not a measurement" in out


def test_projection_prices_with_the_users_price(tmp_path):
    # no verified on-demand price for trn2.48xlarge in the table: the user's --price-per-hour
    # for that instance prices the projection; USD per 1M = price / 3600 * 1e6 / throughput
    pytest.importorskip("torch_mlir")
    j = tmp_path / "r.json"
    code, out, err = cli("check", "mlp", "--mode", "eager", "--iterations", "5", "--max-warmup", "5", "--projection",
                         "--instance", "trn2.48xlarge", "--price-per-hour", "40", "--json", j)
    assert code == 0, out + err
    p = json.loads(j.read_text())["projection"]
    a, b = p["trn2"], p["trn3"]
    assert a["price_per_hour"] == 40 and a["price_source"] == "--price-per-hour"
    assert a["usd_per_million"] == pytest.approx(40 / 3600 * 1e6 / a["throughput_per_instance"])
    assert b["usd_per_million"] is None and b["instance_assumed"]     # not the instance priced
    assert "(your price)" in out and "assumed" in out and "$0.0000" not in out   # significant figures
    from torchneuron.check import formatting
    assert formatting.usd(4.58e-06) == "$4.58e-06" and formatting.usd(0.5) == "$0.5000"
    assert "fixed costs per execution" in p["note"]
