"""The kernel trace of a pass (phases/trace.py) and the eager projection from it
(projection/kernels.py), against independent references: PyTorch's FlopCounterMode, the
runtime's own fallback counter, the StableHLO projection's FLOPs."""

import copy
import warnings

import pytest
import torch

from torchneuron.check.baseline.exact import op_diff
from torchneuron.check.phases import trace
from torchneuron.check.projection import kernels as kp
from torchneuron.check.projection import overheads
from torchneuron.check.projection.hardware import CORES


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _traced(model, x):
    m, xd = copy.deepcopy(model).to("neuron").eval(), x.to("neuron")
    trace.trace_pass(m, (xd,), "neuron", torch.float32)  # warm
    return trace.trace_pass(m, (xd,), "neuron", torch.float32)


def _reference_flops(model, x) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model.eval()(x)
    return fc.get_total_flops()


def test_tensor_engine_flops_match_flop_counter():
    torch.manual_seed(0)
    model, x = ConvNet(), torch.randn(2, 3, 16, 16)
    ks = _traced(model, x)
    tensor = sum(kp.cost(k)["flops"] for k in ks if kp.cost(k)["engine"] == "tensor")
    assert tensor == _reference_flops(model, x)
    names = trace.summarize(ks)["kernels_by_op"]
    assert names["aten::addmm"] == 1 and sum(names.values()) == 3


def test_trace_is_exact_between_passes_and_counts_fallbacks_as_the_runtime_does():
    torch.manual_seed(0)
    op = "erfc"
    m = torch.nn.Linear(4, 4).to("neuron").eval()
    x = torch.randn(3, 4).to("neuron")

    def f():
        return getattr(torch, op)(m(x))

    with warnings.catch_warnings(), torch.neuron.fallback_mode("warn"):
        warnings.simplefilter("ignore")
        f()
        torch.neuron.reset_fallback_stats()
        a = trace.summarize(trace.record(f, torch.neuron.synchronize))
        calls = sum(v["calls"] for v in torch.neuron.fallback_stats().values())
        b = trace.summarize(trace.record(f, torch.neuron.synchronize))
    if not calls:
        pytest.skip(f"{op} has a native kernel now")
    assert a == b
    assert a["fallback_calls"] == calls == 1 and list(a["fallbacks_by_op"]) == ["aten::erfc.out"]
    # the fallback copies its input to the host and its result back: 3 x 4 float32 each way
    assert a["copies"]["dtoh"]["bytes"] >= 48 and a["copies"]["htod"]["bytes"] == 48


def test_eager_flops_agree_with_the_stablehlo_projection():
    pytest.importorskip("torch_mlir")
    from torchneuron.check.projection import roofline, stablehlo

    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(128, 128) for _ in range(4)))
    x = torch.randn(32, 128)
    ks = _traced(model, x)
    eager = kp.project(ks, CORES["trn2"], launch_us=0, roofline_factor=1.0)
    text, _ = stablehlo.lower(copy.deepcopy(model).eval(), (x,))
    compiled = roofline.project(text, CORES["trn2"], 32, overheads=overheads.NONE)
    # the same matmuls: StableHLO adds its bias adds as separate ops (about 0.4 % more)
    assert eager["flops"] == pytest.approx(compiled["total_flops"], rel=0.01)
    # eager reads and writes every intermediate in HBM and fuses nothing: never faster
    assert eager["latency_s"] >= compiled["latency_s_per_core"] * 0.99


def test_launch_cost_is_per_kernel():
    torch.manual_seed(0)
    ks = _traced(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), torch.randn(2, 8))
    a = kp.project(ks, CORES["trn2"], launch_us=0)
    b = kp.project(ks, CORES["trn2"], launch_us=20)
    assert b["launches"] == 2 and b["latency_s"] - a["latency_s"] == pytest.approx(40e-6)


def test_the_roofline_factor_scales_each_kernel_as_the_compiled_projection():
    torch.manual_seed(0)
    ks = _traced(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), torch.randn(2, 8))
    bare = kp.project(ks, CORES["trn2"], launch_us=0, roofline_factor=1.0)
    scaled = kp.project(ks, CORES["trn2"], launch_us=0, roofline_factor=2.5)
    assert scaled["latency_s"] == pytest.approx(2.5 * bare["latency_s"])
    # the defaults: the fitted factor of overheads.py, and its cost per execution per launch
    d = kp.project(ks, CORES["trn2"])
    assert (
        d["roofline_factor"] == overheads.ROOFLINE_FACTOR and d["launch_us"] == kp.DEFAULT_LAUNCH_US
    )
    assert d["latency_s"] == pytest.approx(
        overheads.ROOFLINE_FACTOR * bare["latency_s"] + 2 * kp.DEFAULT_LAUNCH_US * 1e-6
    )


def test_op_diff_names_the_changed_ops():
    assert op_diff({"aten::addmm": 12, "aten::relu": 4}, {"aten::addmm": 36, "aten::relu": 4}) == [
        "aten::addmm x12 -> x36"
    ]
    assert op_diff({}, {"aten::sort": 1}) == ["aten::sort x0 -> x1"]


def test_a_lookup_reads_the_rows_it_gathers_not_the_table():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10000, 64)
    ids = torch.tensor([[1, 5, 7]])
    ks = [k for k in _traced(emb, ids) if k.kind == "kernel"]
    assert [k.name for k in ks] == ["aten::index_select"]
    # 3 rows of 64 float32 read and written, the 3 int64 indices read
    assert kp.cost(ks[0])["hbm_bytes"] == 2 * 3 * 64 * 4 + 3 * 8


def test_matmuls_take_the_tensor_engine_share_the_compiled_projection_gives():
    from torchneuron.check.projection.roofline import pe_utilization

    core = CORES["trn2"]
    # ResNet's stem: 3 input channels (3 of 128 PE rows), kernel stationary, pixels moving
    stem = trace.Kernel(
        "aten::convolution",
        "kernel",
        "aten::convolution",
        [[1, 3, 224, 224], [64, 3, 7, 7], [64]],
        ["float"] * 3,
        [None, None, None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1],
    )
    c = kp.cost(stem)
    u = pe_utilization(3, 64, 112 * 112, core, either=False)
    assert u < 0.03
    got = kp.project([stem], core, launch_us=0, roofline_factor=1.0)
    want = max(c["flops"] / (core.tensor_bf16 * u), c["hbm_bytes"] / core.hbm_bytes_per_s_core)
    assert got["roofline_s"] == pytest.approx(want, rel=1e-12)
    assert got["pe_utilization"] is True
    # a 128-wide matmul with 512 moving rows fills the array: priced at the peak rate
    mm = trace.Kernel(
        "aten::mm", "kernel", "aten::mm", [[512, 128], [128, 128]], ["c10::BFloat16"] * 2
    )
    assert pe_utilization(128, 512, 128, core) == 1.0
    f = kp.cost(mm)
    t = kp.project([mm], core, launch_us=0, roofline_factor=1.0)["roofline_s"]
    assert t == pytest.approx(
        max(f["flops"] / core.tensor_bf16, f["hbm_bytes"] / core.hbm_bytes_per_s_core)
    )
