"""The Trainium projection: StableHLO parsing (FLOPs, engines, bytes), the roofline on
NeuronCore figures, the torch-mlir lowering and `torchneuron check --projection`."""

import json
import sys

import pytest
import torch
from check_support import FIXTURES, cli

from torchneuron.check.projection import hardware, overheads
from torchneuron.check.projection import roofline as projection

CONV = (
    "    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], "
    "window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
    "(tensor<1x8x8x3xf32>, tensor<3x3x3x16xf32>) -> tensor<1x6x6x16xf32>"
)
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
    assert (
        ops["convolution"].flops == 2 * (6 * 6 * 16) * (3 * 3 * 3)
        and ops["convolution"].engine == "tensor"
    )
    assert ops["add"].engine == "vector" and ops["add"].flops == 4 * 32
    assert ops["exponential"].engine == "scalar"
    assert ops["transpose"].engine == "move" and ops["transpose"].flops == 0
    assert (
        ops["add"].out_bytes == 4 * 32 * 2 and ops["dot_general"].in_bytes == (4 * 64 + 64 * 32) * 2
    )
    assert "constant" not in ops and "return" not in ops


def test_roofline_compute_and_memory_bound():
    core = hardware.NEURONCORE_V3
    r = projection.project(MODULE, core, batch=4, overheads=overheads.NONE)
    dot = next(x for x in r["top_ops"] if x["op"] == "dot_general")
    # a 4x64 @ 64x32 matmul uses a sliver of the 128x128 TensorEngine: one instruction of
    # max(min(64, 32), 4) = 32 cycles for 64 x 4 x 32 MACs, i.e. 0.5 of the array's
    # 128 x 128 MACs a cycle: 1/64 of the peak (pe_utilization; was the peak before)
    util = (64 * 4 * 32 / (128 * 128)) / 32
    assert dot["pe_utilization"] == pytest.approx(util) == pytest.approx(1 / 64)
    assert dot["bound"] == "compute" and dot["time_s"] == pytest.approx(
        2 * 4 * 32 * 64 / core.tensor_bf16 / util
    )
    # a transpose of a tensor bigger than half the SBUF is materialized in HBM: memory-bound;
    # an elementwise op on it is fused with its producer: no HBM traffic of its own
    n = core.sbuf_bytes // 4 // 2  # 2 x n f32 elements: the whole SBUF
    body = (
        f"    %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x{n}xf32>) -> tensor<{n}x2xf32>\n"
        f"    %1 = stablehlo.add %0, %0 : tensor<{n}x2xf32>"
    )
    r2 = projection.project(
        f"module {{\n  func.func @main(%arg0: tensor<2x{n}xf32>) -> tensor<{n}x2xf32> {{\n"
        f"{body}\n  }}\n}}",
        core,
        batch=1,
        overheads=overheads.NONE,
    )
    ops2 = {x["op"]: x for x in r2["top_ops"]}
    op = ops2["transpose"]
    assert op["bound"] == "memory" and op["hbm_bytes"] == 2 * 2 * n * 4
    assert op["time_s"] == pytest.approx(
        2 * 2 * n * 4 / (core.hbm_bytes_per_s_chip / core.cores_per_chip)
    )
    assert ops2["add"]["hbm_bytes"] == 0 and ops2["add"]["bound"] == "compute"
    # + the serial row: the argument read once and the result written once
    serial = ops2[projection.WEIGHTS_ROW]
    assert serial["hbm_bytes"] == 2 * n * 4 + n * 2 * 4 and serial["engine"] == "dma"
    assert r2["latency_s_per_core"] == pytest.approx(
        op["time_s"] + ops2["add"]["time_s"] + (2 * n * 4 + n * 2 * 4) / core.hbm_bytes_per_s_core
    )
    assert "not a measurement" in r2["estimate"]


def test_every_figure_has_a_source():
    for core in (hardware.NEURONCORE_V2, hardware.NEURONCORE_V3, hardware.NEURONCORE_V4):
        assert core.sources and all(
            u.startswith("https://awsdocs-neuron") for u in core.sources.values()
        )
    assert hardware.NEURONCORE_V4.tensor_fp8 > hardware.NEURONCORE_V3.tensor_fp8
    assert hardware.NEURONCORE_V4.hbm_bytes_per_s_core > hardware.NEURONCORE_V3.hbm_bytes_per_s_core


def test_lowering_a_model_counts_its_matmuls():
    pytest.importorskip("torch_mlir")
    from torchneuron.check.projection import stablehlo

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

    from torchneuron.check.projection import stablehlo

    spec = importlib.util.spec_from_file_location(
        "check_outputs",
        os.path.join(FIXTURES, "check_outputs.py"),
    )
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
    code, out, err = cli(
        "check",
        "mlp",
        "--iterations",
        "5",
        "--max-warmup",
        "5",
        "--projection",
        "--details",
        "--json",
        j,
    )
    assert code == 0, out + err
    p = json.loads(j.read_text())["projection"]
    assert p["status"] == "pass" and set(p) >= {"trn2", "trn3"}
    assert p["trn2"]["core"] == "NeuronCore-v3" and p["trn3"]["core"] == "NeuronCore-v4"
    assert p["trn3"]["latency_s_per_core"] < p["trn2"]["latency_s_per_core"]
    assert p["trn2"]["cores_per_instance"] == 128
    assert "ESTIMATE" in out and "not a measurement" in out
    # the serial HBM row and the rest of the ops are on the terminal: the table adds up to the pass
    a = p["trn2"]
    assert projection.WEIGHTS_ROW in out and "of the pass" in out
    from torchneuron.check import formatting

    shown = formatting.projected_top(a, 8)
    label, rest = formatting.projected_rest(a, shown)
    assert label in out and float(rest.split()[0]) * 1e-6 + sum(
        r["time_s"] for r in shown
    ) == pytest.approx(a["latency_s_per_core"], rel=1e-2)


def test_projection_prices_with_the_users_price(tmp_path):
    # no verified on-demand price for trn2.48xlarge in the table: the user's --price-per-hour
    # for that instance prices the projection; USD per 1M = price / 3600 * 1e6 / throughput
    pytest.importorskip("torch_mlir")
    j = tmp_path / "r.json"
    code, out, err = cli(
        "check",
        "mlp",
        "--mode",
        "eager",
        "--iterations",
        "5",
        "--max-warmup",
        "5",
        "--projection",
        "--instance",
        "trn2.48xlarge",
        "--price-per-hour",
        "40",
        "--details",
        "--json",
        j,
    )
    assert code == 0, out + err
    p = json.loads(j.read_text())["projection"]
    a, b = p["trn2"], p["trn3"]
    assert a["price_per_hour"] == 40 and a["price_source"] == "--price-per-hour"
    assert a["usd_per_million"] == pytest.approx(40 / 3600 * 1e6 / a["throughput_per_instance"])
    assert b["usd_per_million"] is None and b["instance_assumed"]  # not the instance priced
    assert (
        "(your price)" in out and "assumed" in out and "$0.0000" not in out
    )  # significant figures
    from torchneuron.check import formatting

    assert formatting.usd(4.58e-06) == "$4.58e-06" and formatting.usd(0.5) == "$0.5000"
    assert "fixed costs per execution" in p["note"]


GATHER = """module {
  func.func @main(%arg0: tensor<4x8xi64>, %arg1: tensor<4x8x64xf32>) -> tensor<4x8x64xf32> {
    %cst_0 = stablehlo.constant dense_resource<__elided__> : tensor<1000x64xf32>
    %cst_1 = stablehlo.constant dense_resource<__elided__> : tensor<64x64xf32>
    %0 = "stablehlo.gather"(%cst_0, %arg0) <{dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 64>}> : (tensor<1000x64xf32>, tensor<4x8xi64>) -> tensor<4x8x64xf32>
    %1 = "stablehlo.gather"(%cst_1, %arg0) <{dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 64>}> : (tensor<64x64xf32>, tensor<4x8xi64>) -> tensor<4x8x64xf32>
    %2 = stablehlo.dot_general %1, %cst_1, contracting_dims = [2] x [0] : (tensor<4x8x64xf32>, tensor<64x64xf32>) -> tensor<4x8x64xf32>
    %3 = stablehlo.add %0, %2 : tensor<4x8x64xf32>
    return %3 : tensor<4x8x64xf32>
  }
}"""


def test_a_gathered_table_counts_the_rows_read():
    core = hardware.NEURONCORE_V3
    r = projection.project(GATHER, core, batch=4, top=100, overheads=overheads.NONE)
    gathers = [x for x in r["top_ops"] if x["op"] == "gather"]
    # the 1000 x 64 table is only gathered from: 4 x 8 rows of 64 float32 read, not the table
    rows_read = 4 * 8 * 64 * 4
    assert gathers[0]["hbm_bytes"] == rows_read and gathers[0]["bound"] == "memory"
    assert gathers[0]["time_s"] == pytest.approx(rows_read / core.hbm_bytes_per_s_core)
    # the 64 x 64 table also feeds a matmul: read whole, in the serial row, its gather adds nothing
    assert gathers[1]["hbm_bytes"] == 0
    # serial: the indices (4 x 8 int64), the unused %arg1 not at all, the 64 x 64 weight (cast
    # to BF16 at compile time: 2 bytes an element, --auto-cast matmult), the output
    serial = 4 * 8 * 8 + 64 * 64 * 2 + 4 * 8 * 64 * 4
    row = next(x for x in r["top_ops"] if x["op"] == projection.WEIGHTS_ROW)
    assert row["hbm_bytes"] == serial and r["gathered_bytes"] == rows_read
    assert (
        r["weights_and_inputs_bytes"] == 4 * 8 * 8 + 64 * 64 * 2
        and r["outputs_bytes"] == 4 * 8 * 64 * 4
    )
    fp32 = projection.project(GATHER, core, batch=4, matmul_dtype="fp32", top=100)
    assert fp32["weights_and_inputs_bytes"] == 4 * 8 * 8 + 64 * 64 * 4
    assert r["latency_s_per_core"] == pytest.approx(sum(x["time_s"] for x in r["top_ops"]))
    assert r["weights_and_inputs_share"] == pytest.approx(row["time_s"] / r["latency_s_per_core"])


def test_the_serial_hbm_row_and_the_fixed_cost_are_always_listed():
    r = projection.project(GATHER, hardware.NEURONCORE_V3, batch=4, top=1)
    assert {projection.WEIGHTS_ROW, projection.FIXED_ROW} <= {x["op"] for x in r["top_ops"]}


ONE_MATMUL = """module {
  func.func @main(%arg0: tensor<128x512xbf16>) -> tensor<128x256xbf16> {
    %cst = stablehlo.constant dense_resource<__elided__> : tensor<512x256xf32>
    %cst_0 = stablehlo.constant dense_resource<__elided__> : tensor<256xf32>
    %0 = stablehlo.convert %cst : (tensor<512x256xf32>) -> tensor<512x256xbf16>
    %1 = stablehlo.dot_general %arg0, %0, contracting_dims = [1] x [0] : (tensor<128x512xbf16>, tensor<512x256xbf16>) -> tensor<128x256xbf16>
    %2 = stablehlo.convert %cst_0 : (tensor<256xf32>) -> tensor<256xbf16>
    return %1 : tensor<128x256xbf16>
  }
}"""


def test_fixed_costs_by_hand():
    # one 128x512 @ 512x256 matmul on NeuronCore-v2: 2 x 128 x 256 x 512 FLOPs at 95 TFLOP/s,
    # x the roofline factor; serially the input (128x512 bf16), the weight (512x256 f32 read
    # as bf16), the 1-D bias as f32 (not a matmul's), and the output (128x256 bf16) at
    # 410 GiB/s per core; plus the fixed cost of one execution
    core = hardware.NEURONCORE_V2
    ovh = overheads.Overheads(execution_us=50.0, roofline_factor=2.0)
    r = projection.project(ONE_MATMUL, core, batch=128, overheads=ovh, top=100)
    matmul_s = 2 * 128 * 256 * 512 / 95e12
    serial_b = 128 * 512 * 2 + 512 * 256 * 2 + 256 * 4 + 128 * 256 * 2
    serial_s = serial_b / (820 * 2**30 / 2)
    assert r["weights_and_inputs_bytes"] + r["outputs_bytes"] == serial_b
    assert r["latency_s_per_core"] == pytest.approx(50e-6 + 2.0 * matmul_s + serial_s)
    assert r["fixed_s"] == pytest.approx(50e-6) and r["overheads"] == ovh.as_dict()
    fixed = next(x for x in r["top_ops"] if x["op"] == projection.FIXED_ROW)
    assert fixed["engine"] == "runtime" and fixed["time_s"] == pytest.approx(50e-6)
    bare = projection.project(ONE_MATMUL, core, batch=128, overheads=overheads.NONE)
    assert bare["latency_s_per_core"] == pytest.approx(matmul_s + serial_s)
    assert r["throughput_per_core"] == pytest.approx(128 / r["latency_s_per_core"])


def test_check_projects_with_the_fitted_fixed_costs():
    # what `torchneuron check --projection` and the projected_time gate read (project_all):
    # the fitted fixed cost and factor, not the bare roofline; dropping either fails here
    assert overheads.EXECUTION_US > 0 and overheads.ROOFLINE_FACTOR > 1
    core = hardware.NEURONCORE_V3
    p = projection.project_all(ONE_MATMUL, 128)["trn2"]
    bare = projection.project(ONE_MATMUL, core, 128, overheads=overheads.NONE)
    assert p["overheads"] == overheads.FITTED.as_dict()
    ops_s = bare["latency_s_per_core"] - bare["weights_and_inputs_s"]
    assert p["latency_s_per_core"] == pytest.approx(
        overheads.EXECUTION_US * 1e-6
        + overheads.ROOFLINE_FACTOR * ops_s
        + bare["weights_and_inputs_s"]
    )


def test_torch_mlirs_erf_polynomial_is_one_scalar_op():
    # nn.GELU() is 0.5 x (1 + erf(x / sqrt 2)); torch-mlir emits erf as ~25 elementwise ops
    pytest.importorskip("torch_mlir")
    from torchneuron.check.projection import stablehlo

    m = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.GELU()).eval()
    text, _ = stablehlo.lower(m, (torch.randn(16, 64),))
    assert (
        "stablehlo.erf" not in text
        and "chlo.erf" not in text
        and text.count("stablehlo.clamp") == 2
    )
    ops = projection.parse(text)
    erf = [o for o in ops if o.name == "erf"]
    assert len(erf) == 1 and erf[0].engine == "scalar" and erf[0].flops == 16 * 32
    assert not [o for o in ops if o.name == "clamp"]
    vector = sum(o.flops for o in ops if o.engine == "vector")
    # left on the VectorE: addmm's scales and bias add, x / sqrt 2, 0.5 x, 1 + erf, x * (..): six
    # ops of 16 x 32 and one of 32, not the polynomial's ~25 of 16 x 32
    assert vector == 6 * 16 * 32 + 32


def test_ops_on_constants_only_are_folded():
    text = """module {
  func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %cst = stablehlo.constant dense<2.0> : tensor<8x8xf32>
    %0 = stablehlo.rsqrt %cst : tensor<8x8xf32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}"""
    ops = {o.name: o for o in projection.parse(text)}
    assert ops["rsqrt"].flops == 0 and ops["multiply"].flops == 64


def test_a_shared_weight_is_read_by_every_matmul_that_uses_it():
    # ALBERT's layers share one set of weights: the transpose is computed once and feeds each
    # layer's matmul; each matmul streams the weight from HBM again (SBUF keeps no weight
    # across layers), so the 64 x 64 weight (bf16: 2 bytes) counts twice, the input once
    text = """module {
  func.func @main(%arg0: tensor<8x64xbf16>) -> tensor<8x64xbf16> {
    %cst = stablehlo.constant dense_resource<__elided__> : tensor<64x64xf32>
    %0 = stablehlo.transpose %cst, dims = [1, 0] : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %1 = stablehlo.convert %0 : (tensor<64x64xf32>) -> tensor<64x64xbf16>
    %2 = stablehlo.dot_general %arg0, %1, contracting_dims = [1] x [0] : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xbf16>
    %3 = stablehlo.dot_general %2, %1, contracting_dims = [1] x [0] : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xbf16>
    return %3 : tensor<8x64xbf16>
  }
}"""
    r = projection.project(text, hardware.NEURONCORE_V2, batch=8, overheads=overheads.NONE)
    assert r["weights_and_inputs_bytes"] == 2 * 64 * 64 * 2 + 8 * 64 * 2


def _conv_module(c_in: int, c_out: int, hw: int, k: int = 3) -> str:
    out = hw - k + 1
    return f"""module {{
  func.func @main(%arg0: tensor<1x{c_in}x{hw}x{hw}xbf16>, %arg1: tensor<{c_out}x{c_in}x{k}x{k}xbf16>) -> tensor<1x{c_out}x{out}x{out}xbf16> {{
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {{stride = [1, 1]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<1x{c_in}x{hw}x{hw}xbf16>, tensor<{c_out}x{c_in}x{k}x{k}xbf16>) -> tensor<1x{c_out}x{out}x{out}xbf16>
    return %0 : tensor<1x{c_out}x{out}x{out}xbf16>
  }}
}}"""


def test_pe_utilization_follows_the_nc_matmul_cost():
    # nki.isa.nc_matmul: contraction <= 128 partitions, stationary free <= 128, moving free
    # <= 512; max(min(64, stationary), moving) cycles an instruction
    core = hardware.NEURONCORE_V2
    u = projection.pe_utilization
    assert u(128, 128, 512, core) == 1.0 and u(768, 3072, 4096, core) == 1.0
    assert u(64, 128, 512, core) == pytest.approx(0.5)  # attention's head dim: half the rows
    assert u(192, 128, 512, core) == pytest.approx(0.75)  # 2 contraction tiles, 1.5 filled
    # a 7x7 stem over 3 channels into 64, 112x112 pixels moving (kernel stationary)
    assert u(3, 64, 112 * 112, core, either=False) == pytest.approx(3 / 128 * 64 / 128)
    # pixels stationary would be better for the stem alone, but the result would land with
    # pixels on the partitions: a dot_general may take either, a convolution keeps its kernel
    assert u(3, 64, 112 * 112, core) == pytest.approx(3 / 128)
    # a moving tile under 64 columns pays for 64 (ResNet's last stage: 7x7 pixels)
    assert u(512, 512, 49, core, either=False) == pytest.approx(49 / 64)


def test_a_convolution_over_few_channels_projects_slower_per_flop():
    core = hardware.NEURONCORE_V2

    def per_flop(c_in, c_out):
        r = projection.project(_conv_module(c_in, c_out, 58), core, 1, overheads=overheads.NONE)
        conv = next(x for x in r["top_ops"] if x["op"] == "convolution")
        return conv, conv["time_s"] / conv["flops"]

    full, t_full = per_flop(128, 128)
    stem, t_stem = per_flop(3, 64)
    mid, t_mid = per_flop(64, 64)
    assert full["pe_utilization"] == 1.0 and t_full == pytest.approx(1 / core.tensor_bf16)
    # 3 of 128 PE rows and 64 of 128 columns busy: 1/0.0117 = 85x the time per FLOP
    assert t_stem / t_full == pytest.approx(1 / (3 / 128 * 64 / 128))
    assert t_mid / t_full == pytest.approx(4.0)  # 64 rows x 64 columns: a quarter


def test_inf2_takes_its_fitted_factor_and_trn1_none():
    core = hardware.NEURONCORE_V2
    trn1 = projection.project(ONE_MATMUL, core, 128, instance="trn1.2xlarge")
    inf2 = projection.project(ONE_MATMUL, core, 128, instance="inf2.xlarge")
    f = overheads.INSTANCE_FACTORS["inf2"]
    assert 1.1 < f < 1.25 and trn1["instance_factor"] == 1.0 and inf2["instance_factor"] == f
    assert inf2["latency_s_per_core"] == pytest.approx(f * trn1["latency_s_per_core"])
    row = next(x for x in inf2["top_ops"] if x["op"].startswith("inf2.xlarge: "))
    assert row["engine"] == "runtime" and row["time_s"] == pytest.approx(inf2["instance_s"])
    bare = projection.project(
        ONE_MATMUL, core, 128, instance="inf2.xlarge", overheads=overheads.NONE
    )
    assert bare["instance_factor"] == 1.0  # the bare roofline has no fitted cost
    # Trn2/Trn3 (what `check --projection` prints) take no instance factor
    assert all(
        p["instance_factor"] == 1.0 for p in projection.project_all(ONE_MATMUL, 128).values()
    )


def test_the_inf2_factor_is_the_published_ratio_of_the_fit_models(monkeypatch):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[3] / "bench" / "projection_vs_published.py"
    spec = importlib.util.spec_from_file_location("projection_vs_published", path)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # its dataclasses look it up
    spec.loader.exec_module(bench)
    pairs = bench.inf2_pairs()
    assert {(i.model, i.batch) for i, _ in pairs} == {
        ("distilbert-base-uncased", 16),
        ("bert-large-uncased", 4),
    }
    assert bench.fit_instance_factor(pairs) == pytest.approx(
        overheads.INSTANCE_FACTORS["inf2"], abs=0.005
    )
    assert (
        bench.role(
            next(
                r
                for r in bench.PUBLISHED
                if r.model.startswith("electra") and r.instance.startswith("inf2")
            )
        )
        == "held out"
    )


def test_a_patch_embedding_contracts_over_its_window():
    # ViT's stride-16 16x16 convolution over 3 channels: non-overlapping windows, one matmul
    # contracting over 3 x 16 x 16 = 768; with padding it is one matmul per tap (k = 3)
    line = (
        "    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->"
        "[b, f, 0, 1], window = {{stride = [16, 16], pad = [[{p}, {p}], [{p}, {p}]], "
        "rhs_dilate = [1, 1]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : "
        "(tensor<1x3x224x224xf32>, tensor<768x3x16x16xf32>) -> tensor<1x768x{o}x{o}xf32>"
    )
    (patch,) = projection.parse(line.format(p=0, o=14))
    (padded,) = projection.parse(line.format(p=8, o=15))
    assert patch.pe_dims == (768, 768, 196) and padded.pe_dims == (3, 768, 225)
