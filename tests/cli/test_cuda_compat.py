"""A CUDA script runs unchanged on neuron (issue 7, section 3): `torchneuron run` and
`import torchneuron.cuda_compat`. Every check runs in a fresh process, since the remapping
changes torch for the whole process."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
from conftest import run_python

FIXTURE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "cuda_train_script.py"
)


def _cli(*args, cwd=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "torchneuron", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env=e,
    )


def test_cuda_training_script_runs_unchanged_and_matches_cpu(tmp_path):
    ref = subprocess.run(
        [sys.executable, FIXTURE, str(tmp_path / "cpu.pt")],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "DEVICE": "cpu"},
    )
    assert ref.returncode == 0, ref.stderr
    dev_dir = tmp_path / "dev"
    dev_dir.mkdir()
    got = _cli("run", FIXTURE, str(dev_dir / "dev.pt"), env={"TORCHNEURON_FALLBACK": "error"})
    assert got.returncode == 0, got.stderr
    assert got.stderr.count("torchneuron.cuda_compat: CUDA code runs on neuron") == 1  # said once
    # at the script's line, in one readable line (it listed 45 functions: 1,143 characters)
    said = next(ln for ln in got.stderr.splitlines() if "CUDA code runs on neuron" in ln)
    assert said.startswith(f"{FIXTURE}:1: UserWarning: ") and len(said) < 400, said
    assert "allocated on Trainium" in got.stdout  # torch.cuda.get_device_name is neuron's
    a, b = torch.load(tmp_path / "cpu.pt"), torch.load(dev_dir / "dev.pt")
    assert len(a["losses"]) == len(b["losses"]) == 8
    # bfloat16 autocast: the CPU's and neuron's (CUDA's) autocast policies differ per op.
    torch.testing.assert_close(
        torch.tensor(b["losses"]), torch.tensor(a["losses"]), rtol=1e-2, atol=1e-2
    )
    for p, q in zip(a["params"], b["params"]):
        torch.testing.assert_close(q, p, rtol=1e-2, atol=5e-3)


def test_remapped_apis():
    run_python("""
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import torch, torchneuron.cuda_compat as cc
        assert sum("Remapped" in str(x.message) for x in w) == 1
        assert "torch.cuda.get_device_name" in cc.remapped()  # the whole list, on request
        import torch.nn as nn
        assert cc.is_active()
        assert torch.zeros(2, device="cuda").device.type == "neuron"
        assert torch.ones(2, device=torch.device("cuda", 1)).device == torch.device("neuron", 1)
        t = torch.randn(3).cuda()
        assert t.device.type == "neuron" and t.is_cuda and not torch.randn(1).is_cuda
        assert torch.randn(2).cuda(2).device.index == 2
        assert torch.randn(2).to("cuda:1", non_blocking=True).device == torch.device("neuron", 1)
        m = nn.Linear(3, 2).cuda()
        assert m.weight.device.type == "neuron"
        m2 = nn.Linear(3, 2).to(torch.device("cuda"))
        assert m2.weight.device.type == "neuron"
        assert torch.cuda.is_available() and torch.cuda.device_count() == torch.neuron.device_count()
        assert torch.cuda.Stream is torch.neuron.Stream and torch.cuda.Event is torch.neuron.Event
        assert torch.cuda.get_device_capability() == (8, 0)
        torch.cuda.set_device(1)
        assert torch.cuda.current_device() == 1 == torch.neuron.current_device()
        assert torch.zeros(1, device="cuda").device.index == 1
        torch.cuda.set_device(0)
        torch.cuda.manual_seed(7); a = torch.randn(4, device="cuda")
        torch.neuron.manual_seed(7); b = torch.randn(4, device="neuron")
        assert torch.equal(a.cpu(), b.cpu())
        assert torch.equal(torch.cuda.get_rng_state(), torch.neuron.get_rng_state())
        x = torch.empty(1000, device="cuda")
        assert torch.cuda.memory_allocated() == torch.neuron.memory_allocated() >= 4000
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert torch.is_autocast_enabled("neuron") and torch.is_autocast_enabled()
            y = m(torch.randn(2, 3, device="cuda"))
        assert y.dtype == torch.bfloat16
        with torch.cuda.amp.autocast():
            assert torch.get_autocast_dtype("neuron") == torch.float16
        with torch.amp.autocast(device_type="cuda"):
            assert torch.is_autocast_enabled("neuron")
        assert torch.amp.GradScaler()._device == "neuron"
        assert torch.amp.GradScaler("cuda")._device == "neuron"
        assert torch.cuda.amp.GradScaler()._device == "neuron"
        class F(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
            def forward(ctx, x):
                return x * 2
            @staticmethod
            @torch.amp.custom_bwd(device_type="cuda")
            def backward(ctx, g):
                return g * 2
        with torch.autocast("cuda"):
            assert F.apply(torch.ones(2, device="cuda", dtype=torch.half)).dtype == torch.float32
        import io
        buf = io.BytesIO()
        torch.save({"w": m.weight}, buf)
        buf.seek(0)
        w = torch.load(buf, map_location="cuda:1")["w"]
        assert w.device == torch.device("neuron", 1)
        buf.seek(0)
        w = torch.load(buf, map_location={"neuron:0": "cuda:2"})["w"]
        assert w.device == torch.device("neuron", 2)
        q = torch.randn(1, 2, 4, 8, device="cuda")
        flash = torch._fused_sdp_choice(q, q, q)
        torch.backends.cuda.enable_flash_sdp(False)  # the SDPA switches act on neuron
        assert torch._fused_sdp_choice(q, q, q) != flash
        torch.backends.cuda.enable_flash_sdp(True)
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.cuda.synchronize()
        assert cc.map_backend("nccl") == "neuron"
        assert cc.map_backend("cpu:gloo,cuda:nccl") == "cpu:gloo,neuron:neuron"
        assert cc.map_backend("gloo") == "gloo"
        import torch.distributed as dist
        assert dist.is_nccl_available() == ("neuron" in dist.Backend.backend_list)
    """)


def test_nccl_process_group_maps_to_neuron():
    proc = run_python("""
        import torch, torchneuron.cuda_compat
        import torch.distributed as dist
        store = dist.HashStore()
        try:
            dist.init_process_group("nccl", store=store, rank=0, world_size=1)
        except Exception as e:  # the neuron c10d backend is not in this build
            assert "neuron" not in dist.Backend.backend_list, e
            assert "neuron" in str(e), e
            print("unregistered")
        else:
            assert dist.get_backend() == "neuron"
            t = torch.ones(3, device="cuda")
            dist.all_reduce(t)
            assert t.device.type == "neuron" and t.sum().item() == 3
            dist.destroy_process_group()
            print("registered")
    """)
    assert proc.stdout.strip() in ("registered", "unregistered")


def test_run_cli_argv_exit_code_and_module(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import sys, torch\n"
        "assert torch.randn(1, device='cuda').device.type == 'neuron'\n"
        "print(sys.argv, __name__)\n"
        "sys.exit(int(sys.argv[-1]))\n"
    )
    r = _cli("run", str(script), "--help", "3")
    assert r.returncode == 3 and f"['{script}', '--help', '3'] __main__" in r.stdout, r.stderr
    (tmp_path / "progmod.py").write_text(script.read_text())
    r = _cli("run", "-m", "progmod", "0", cwd=tmp_path)
    assert r.returncode == 0 and "['progmod', '0'] __main__" in r.stdout.replace(
        str(tmp_path / "progmod.py"), "progmod"
    ), r.stderr
    r = _cli("run", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "no such script" in r.stderr
    r = _cli("run")
    assert r.returncode == 2 and "usage: torchneuron run" in r.stderr


def test_remapped_memory_and_stream_gaps():
    """The torch.cuda names CUDA scripts call beyond the basics act on neuron."""
    run_python(
        """
        import torch, torchneuron.cuda_compat
        assert torch.cuda.StreamContext is torch.neuron.StreamContext
        s = torch.cuda.Stream()
        with torch.cuda.StreamContext(s):
            assert torch.cuda.current_stream() == s
        with torch.cuda.device_of(torch.ones(1, device="cuda:1")):
            assert torch.cuda.current_device() == 1
        assert torch.cuda.get_arch_list() == ["trn2"]
        assert 0 <= torch.cuda.utilization() <= 100
        torch.cuda.ipc_collect()
        torch.cuda.reset_max_memory_allocated()
        cap = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(0.5, 0)
        try:
            torch.empty(cap // 4 * 3, dtype=torch.uint8, device="cuda:0")
            raise SystemExit("no OOM past the fraction")
        except torch.cuda.OutOfMemoryError:
            pass
        try:
            torch.cuda.set_per_process_memory_fraction(1.5)
            raise SystemExit("no ValueError")
        except ValueError:
            pass
        """,
        env={"TORCHNEURON_HBM_GIB": "1"},
    )


def test_activation_warning_points_at_the_users_import():
    """The one activation warning is attributed to the user's import line, not to
    torchneuron/cuda_compat.py (-W default shows each location once)."""
    code = "import torch\nx = 1\nimport torchneuron.cuda_compat\n"
    err = run_python(code, env={"PYTHONWARNINGS": "default"}).stderr
    assert "<string>:3: UserWarning: torchneuron.cuda_compat: CUDA code runs on neuron" in err, err
    assert "cuda_compat.py" not in err, err
