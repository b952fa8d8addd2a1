"""Warm starts that skip AOTAutograd's tracing (TORCHNEURON_AOT_CACHE=1,
compiler/aot_cache.py, issue 24).

Each case runs fresh processes on one temporary NEFF cache folder: a first one fills it,
a second one changes one thing (nothing, a parameter's shape, the input's dtype, the
model's source, the compiler's sources) and must give the CPU's result, hitting the
cache only where nothing changed. A hit is asserted through torch's counters, so the
tests fail if the feature stops working.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# fresh processes compiling cold then warm: minutes; their device work is covered elsewhere
pytestmark = pytest.mark.unprotected_only

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODEL = """
import torch


class Net(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.a = torch.nn.Linear(8, hidden)
        self.b = torch.nn.Linear(hidden, 4)

    def forward(self, x, *i):  # i: an int64 input (T_INT64), narrowed to int32
        y = self.b(torch.nn.functional.gelu(self.a(x))) {op}
        return y * (i[0] + 1).float() if i else y
"""

CHILD = r"""
import json, os, sys
import torch
import torchneuron  # noqa: F401
from torch._dynamo.utils import counters
from torchneuron.compiler import aot_cache

if os.environ.get("T_FINGERPRINT"):  # as if a decomposition or pass had changed
    aot_cache.sources_fingerprint.cache_clear()
    aot_cache.sources_fingerprint = lambda root=None: os.environ["T_FINGERPRINT"]
    aot_cache.use_torch_cache_dir()
sys.path.insert(0, os.environ["T_MODEL_DIR"])
import model_src

hidden, dtype, train = int(sys.argv[1]), getattr(torch, sys.argv[2]), sys.argv[3] == "1"
if os.environ.get("T_LOAD"):  # artifacts another cache folder's process saved
    torch.compiler.load_cache_artifacts(open(os.environ["T_LOAD"], "rb").read())
torch.manual_seed(0)
m = model_src.Net(hidden).to(dtype)
ints = (torch.arange(4),) if os.environ.get("T_INT64") else ()
md = model_src.Net(hidden).to(dtype)
md.load_state_dict(m.state_dict())
md = md.to("neuron")
c = torch.compile(md, backend="neuron")
err = gerr = 0.0
for n in [int(b) for b in os.environ.get("T_BATCHES", "3").split(",")]:
    x = torch.randn(n, 8, dtype=dtype)
    ref = m(x, *ints)
    xd, idev = x.to("neuron"), [t.to("neuron") for t in ints]
    if train:
        ref.sum().backward()
        out = c(xd, *idev)
        out.sum().backward()
        gerr = max(gerr, (md.a.weight.grad.cpu() - m.a.weight.grad).abs().max().item())
        m.zero_grad(set_to_none=True)
        md.zero_grad(set_to_none=True)
    else:
        with torch.no_grad():
            out = c(xd, *idev)
    torch.neuron.synchronize()
    err = max(err, (out.detach().cpu().float() - ref.detach().float()).abs().max().item())
if os.environ.get("T_SAVE"):
    open(os.environ["T_SAVE"], "wb").write(torch.compiler.save_cache_artifacts()[0])
print("RESULT", json.dumps({
    "err": err, "gerr": gerr,
    "aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
    "aot_miss": counters["aot_autograd"]["autograd_cache_miss"],
    "aot_bypass": counters["aot_autograd"]["autograd_cache_bypass"],
    "traced": counters["aot_autograd"]["total"],
    **{k: v for k, v in aot_cache.counts().items()},
}))
"""


def _env(tmp_path, mode: str, extra=None) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "TORCHINDUCTOR_CACHE_DIR",
            "TORCHNEURON_AOT_CACHE",
            "TORCH_NEURONX_DISABLE_NEFF_CACHE",
            "TORCH_NEURONX_NEFF_DISABLE_CACHE",
        )
    }
    env.update(
        {
            "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cache"),
            "T_MODEL_DIR": str(tmp_path / "src"),
            "PYTHONPATH": REPO + os.pathsep + env.get("PYTHONPATH", ""),
            mode: "1",
        }
    )
    env.update(extra or {})
    return env


def _write_model(tmp_path, op: str = "* 1.0") -> None:
    d = tmp_path / "src"
    d.mkdir(exist_ok=True)
    (d / "model_src.py").write_text(MODEL.format(op=op))
    for pyc in (d / "__pycache__").glob("*") if (d / "__pycache__").exists() else ():
        pyc.unlink()


def _child(tmp_path, mode, hidden=16, dtype="float32", train=False, extra=None) -> dict:
    (tmp_path / "child.py").write_text(textwrap.dedent(CHILD))
    p = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(hidden), dtype, str(int(train))],
        env=_env(tmp_path, mode, extra),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return {**json.loads(line[len("RESULT ") :]), "stderr": p.stderr}


MODES = ["TORCHNEURON_AOT_CACHE"]


def _hit(r: dict, mode: str) -> bool:
    return r["aot_hit"] >= 1 and r["aot_miss"] == 0 and r["loaded"] >= 1


def _miss(r: dict) -> bool:
    return r["loaded"] == 0 and r["traced"] >= 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_hit_gives_cpu_result(tmp_path, mode, train):
    _write_model(tmp_path)
    cold = _child(tmp_path, mode, train=train)
    assert _miss(cold) and cold["stored"] >= 1, cold
    warm = _child(tmp_path, mode, train=train)
    assert _hit(warm, mode), warm
    assert warm["rebuilt"] == 0, warm  # from the index, not recompiled
    for r in (cold, warm):
        assert r["err"] < 1e-5 and r["gerr"] < 1e-5, r
        # the backward's OutputCode was called unboxed (its _boxed_call was a class attribute)
        assert "boxed arguments" not in r["stderr"], r["stderr"][-2000:]


@pytest.mark.parametrize("mode", MODES)
def test_changed_parameter_shape_misses(tmp_path, mode):
    _write_model(tmp_path)
    _child(tmp_path, mode, hidden=16)
    r = _child(tmp_path, mode, hidden=12)
    assert _miss(r), r
    assert r["err"] < 1e-5, r


@pytest.mark.parametrize("mode", MODES)
def test_changed_input_dtype_misses(tmp_path, mode):
    _write_model(tmp_path)
    _child(tmp_path, mode, dtype="float32")
    r = _child(tmp_path, mode, dtype="bfloat16")
    assert _miss(r), r
    assert r["err"] < 0.1, r  # bfloat16 rounding vs the CPU's bfloat16


@pytest.mark.parametrize("mode", MODES)
def test_changed_model_source_misses(tmp_path, mode):
    _write_model(tmp_path, "* 1.0")
    _child(tmp_path, mode)
    _write_model(tmp_path, "* 3.0")  # same function, same lines, other body
    r = _child(tmp_path, mode)
    assert not _hit(r, mode), r
    assert r["err"] < 1e-5, r


@pytest.mark.parametrize("mode", MODES)
def test_changed_compiler_sources_miss(tmp_path, mode):
    _write_model(tmp_path)
    _child(tmp_path, mode, extra={"T_FINGERPRINT": "a" * 64})
    same = _child(tmp_path, mode, extra={"T_FINGERPRINT": "a" * 64})
    assert _hit(same, mode), same
    r = _child(tmp_path, mode, extra={"T_FINGERPRINT": "b" * 64})
    assert _miss(r), r
    assert r["err"] < 1e-5, r


@pytest.mark.parametrize("int64", [False, True], ids=["cast", "int64_input"])
def test_lost_executables_are_rebuilt(tmp_path, int64):
    """The AOT entry is there, the NEFF cache's index and executables are not (cleared):
    the stored graph is rebuilt, checked, compiled, and gives the CPU's result. The model
    casts (an exact float64 round trip): its AOT graph holds prims.convert_element_type,
    which GraphPickler's default options refuse (MiniLM was never stored for it). With an
    int64 input, narrowing converts it to int32 in the rebuilt graph's own fake mode (it
    used Dynamo's: "Mixing fake modes NYI", and AOTAutograd traced again)."""
    import shutil

    mode = "TORCHNEURON_AOT_CACHE"
    extra = {"T_INT64": "1"} if int64 else {}
    _write_model(tmp_path, ".double().float()")
    cold = _child(tmp_path, mode, train=True, extra=extra)
    assert cold["stored"] >= 1, cold
    for d in (tmp_path / "cache").iterdir():
        if d.name != "torch":
            shutil.rmtree(d)
    r = _child(tmp_path, mode, train=True, extra=extra)
    assert _hit(r, mode) and r["rebuilt"] >= 1, r
    assert r["err"] < 1e-5 and r["gerr"] < 1e-5, r


def test_graphs_recompiled_for_new_shapes_are_kept(tmp_path):
    """A second input shape makes Dynamo's graph dynamic; the backend compiles a static
    graph per shape outside Dynamo, which AOTAutogradCache bypassed ("No shape env")."""
    mode, extra = "TORCHNEURON_AOT_CACHE", {"T_BATCHES": "3,5"}
    _write_model(tmp_path)
    cold = _child(tmp_path, mode, extra=extra)
    assert cold["aot_bypass"] == 0 and cold["stored"] == 2, cold
    warm = _child(tmp_path, mode, extra=extra)
    assert warm["aot_hit"] == 2 and warm["aot_miss"] == 0 and warm["aot_bypass"] == 0, warm
    for r in (cold, warm):
        assert r["err"] < 1e-5, r


def test_unwritable_folder_warns_once_and_compiles(tmp_path):
    """The NEFF cache folder cannot be written (a file in the way, so as root too): one
    warning names it, the graphs compile and run uncached (PyTorch only logged "unable
    to serialize compiled graph" per graph)."""
    (tmp_path / "file").write_text("")
    root = str(tmp_path / "file" / "cache")
    _write_model(tmp_path)
    r = _child(
        tmp_path, "TORCHNEURON_AOT_CACHE", train=True, extra={"TORCH_NEURONX_NEFF_CACHE_DIR": root}
    )
    assert r["err"] < 1e-5 and r["gerr"] < 1e-5, r
    lines = [ln for ln in r["stderr"].splitlines() if "compile cache" in ln]
    assert len(lines) == 1 and root in lines[0] and "cannot be written" in lines[0], lines
    assert "unable to serialize" not in r["stderr"], r["stderr"][-2000:]


def test_cache_artifacts_carry_the_aot_entries(tmp_path):
    """save_cache_artifacts() holds PyTorch's AOTAutograd entries beside our executables;
    load_cache_artifacts() in a process with another (empty) cache folder writes them
    where our compiles look (they went to PyTorch's default folder), so it hits."""
    mode, blob = "TORCHNEURON_AOT_CACHE", str(tmp_path / "artifacts.bin")
    _write_model(tmp_path)
    _child(tmp_path, mode, train=True, extra={"T_SAVE": blob})
    other = {"T_LOAD": blob, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "other")}
    r = _child(tmp_path, mode, train=True, extra=other)
    assert _hit(r, mode) and r["rebuilt"] == 0, r
    assert r["err"] < 1e-5 and r["gerr"] < 1e-5, r


def test_sources_fingerprint_follows_a_changed_file(tmp_path):
    import shutil

    from torchneuron.compiler import aot_cache

    root = tmp_path / "compiler"
    shutil.copytree(
        os.path.dirname(aot_cache.__file__), root, ignore=shutil.ignore_patterns("__pycache__")
    )
    before = aot_cache.sources_fingerprint(str(root))
    f = root / "decompositions_nn.py"
    f.write_text(f.read_text() + "\n# changed\n")
    aot_cache.sources_fingerprint.cache_clear()
    assert aot_cache.sources_fingerprint(str(root)) != before
    p = root / "passes" / "__init__.py"
    p.write_text(p.read_text() + "\n# changed\n")
    aot_cache.sources_fingerprint.cache_clear()
    assert len({before, aot_cache.sources_fingerprint(str(root))}) == 2


def test_graph_with_prims_ops_pickles():
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx._graph_pickler import GraphPickler
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchneuron.compiler import aot_cache

    gm = make_fx(lambda x: torch.ops.prims.convert_element_type(x, torch.float64) * 2)(
        torch.ones(2)
    )
    blob = GraphPickler.dumps((gm, [torch.ones(2)]), aot_cache._pickle_options())
    back, _ = GraphPickler.loads(blob, FakeTensorMode())
    targets = {n.target for n in back.graph.nodes if n.op == "call_function"}
    assert torch.ops.prims.convert_element_type.default in targets


def test_key_skips_inductor_backend_registration_only_inside():
    from torch._inductor import codecache

    from torchneuron.compiler import aot_cache

    before = codecache.init_backend_registration
    opts = {"model_name": "m", "fallback_execution": False}
    with aot_cache.aot_context(opts):
        with aot_cache.aot_context(opts):  # nested (compiles in two threads)
            assert codecache.init_backend_registration is aot_cache._skip_registration
        assert codecache.init_backend_registration is aot_cache._skip_registration
    assert codecache.init_backend_registration is before


def test_lazy_decompositions_build_on_first_read():
    from torchneuron.compiler import aot_cache
    from torchneuron.compiler.decompositions import decomposition_table

    lazy = aot_cache.LazyDecompositions()
    assert lazy._table is None
    assert dict(lazy) == decomposition_table()
