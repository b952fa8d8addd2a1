"""The c10d backend `neuron`: every collective against CPU Gloo, stream
ordering, faults, DDP, FSDP2 (+ DCP), DTensor/TP, with 2 and 4 processes.

Each test starts one process per rank with torchrun's environment and runs a
job of tests/distributed/dist_jobs.py (many checks per job: a process start costs seconds).
The torchrun example of docs/distributed.md is run by torchrun itself.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _DEVICE_ENV

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]  # the repository (tests/distributed/ -> tests/ -> root)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DEVICE_ENV}
    env.update(extra)
    return env


def run_world(
    job: str, nprocs: int, env: dict[str, str] | None = None, timeout: float = 240
) -> list[subprocess.CompletedProcess]:
    """Run ``dist_jobs.py job`` in ``nprocs`` ranks (torchrun's variables)."""
    port = str(_free_port())
    procs = []
    for rank in range(nprocs):
        e = _env(
            {
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(nprocs),
                "LOCAL_WORLD_SIZE": str(nprocs),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                "OMP_NUM_THREADS": "1",
                **(env or {}),
            }
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(HERE / "dist_jobs.py"), job],
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return out


def assert_all_ok(results, ranks=None) -> str:
    ranks = range(len(results)) if ranks is None else ranks
    for r in ranks:
        res = results[r]
        if res.returncode != 0 or not res.stdout.rstrip().endswith("ALL OK"):
            pytest.fail(
                f"rank {r} failed (rc={res.returncode}):\n--- stdout\n{res.stdout}\n"
                f"--- stderr\n{res.stderr[-6000:]}"
            )
    return results[0].stdout


def test_collectives_2_ranks_every_core_visible():
    """2 ranks seeing all 4 cores, torch.neuron.set_device(local_rank), backend string
    "cpu:gloo,neuron:neuron"; includes the error checks (wrong core needs >1 core)."""
    res = run_world(
        "all",
        2,
        {
            "NEURON_RT_VISIBLE_CORES": "0-3",
            "DIST_BACKEND": "cpu:gloo,neuron:neuron",
            "DIST_CHECKS": "collectives,gather_forms,functional,streams,errors,dtensor",
        },
    )
    out = assert_all_ok(res)
    for check in (
        "all_reduce every ReduceOp",
        "concatenated, stacked and flat outputs",
        "concatenated, stacked and flat inputs",
        "wrong numel or dtype is NCCL's error",
        "unequal splits",
        "batch_isend_irecv",
        "coalesced",
        "barrier on every group",
        "functional collectives",
        "stream ordering",
        "wrong core is an error",
        "shape mismatch",
        "dtype mismatch",
        "tensor parallel",
        "send/recv mismatch",
        "monitored_barrier",
        "views at an offset",
        "channels_last all_reduce",
        "memory layouts that differ",
    ):
        assert check in out, check


def test_collectives_and_ddp_4_ranks_default_backend():
    """4 ranks, no backend named (neuron is the default for the neuron accelerator);
    the group binds each rank to neuron:LOCAL_RANK, so set_device(local_rank) after it and
    DDP(device_ids=[local_rank]) work on every rank (checked in the job)."""
    res = run_world(
        "all",
        4,
        {"DIST_BACKEND": "default", "DIST_CHECKS": "collectives,functional,streams,ddp,dtensor"},
    )
    out = assert_all_ok(res)
    assert (
        "DDP on digits" in out and "tensor parallel" in out and "bound to neuron:LOCAL_RANK" in out
    )
    assert "monitored_barrier on the default group (undefined)" in out


def test_ddp_fsdp2_dcp_2_ranks(tmp_path):
    """init_process_group(device_id=neuron:LOCAL_RANK): rank 1 on neuron:1 (checked in the job)."""
    res = run_world(
        "all",
        2,
        {"DIST_CHECKS": "ddp,fsdp", "DIST_CKPT_DIR": str(tmp_path / "ckpt"), "DIST_DEVICE_ID": "1"},
    )
    out = assert_all_ok(res)
    assert "FSDP2 Llama" in out and "DCP" in out


@pytest.mark.parametrize("nprocs", [2, 4])
def test_bad_argument_on_one_rank_is_an_error_on_every_rank(nprocs):
    """A bad argument on one rank (a wrong-length scatter_list or gather_list, reduce_scatter
    inputs of the wrong shape, a wrong output size,
    a negative split, a dtype Gloo lacks, AVG on integers, inside a coalescing block,
    the wrong core): it raises at its call; the others raise naming it, well within
    the group's 60 s timeout; the next all_reduce is right on every rank. The same for
    a send or recv (not contiguous, the wrong core) and its peer; the pair's next
    send/recv is right."""
    env = {"DIST_CHECKS": "one_rank_fails", "DIST_TIMEOUT": "60"}
    if nprocs == 2:
        env["NEURON_RT_VISIBLE_CORES"] = "0-3"  # the wrong-core case needs a second core
    out = assert_all_ok(run_world("all", nprocs, env))
    assert "bad argument (in_a_coalescing_block)" in out
    assert "bad send is an error on its peer" in out and "bad recv is an error on its peer" in out
    if nprocs == 2:
        assert "bad argument (wrong_core)" in out


def test_cuda_recipe_through_cuda_compat():
    """set_device(local_rank) after init_process_group("nccl") (failed on rank 1 when the
    group narrowed NEURON_RT_VISIBLE_CORES to LOCAL_RANK)."""
    assert "cuda_compat nccl" in assert_all_ok(run_world("cuda_compat", 2))


@pytest.mark.parametrize("kind", ["dead", "hung"])
def test_dead_or_hung_rank_is_an_error_within_timeout(kind):
    res = run_world(f"fault-{kind}", 2, {"DIST_TIMEOUT": "4"}, timeout=120)
    out = assert_all_ok(res, ranks=[0])
    if kind == "hung":
        assert "ok monitored_barrier names the missing rank" in out, out
    took = float(re.search(r"error after ([0-9.]+)s", out).group(1))
    assert took < 13, out


@pytest.mark.parametrize("nprocs", [2, 4])
def test_guide_torchrun_example(tmp_path, nprocs):
    """docs/distributed.md's example, run by torchrun as written there (and with 4
    processes, where its batches wrap around the 1797 digits: the loss stays finite)."""
    guide = (REPO / "docs" / "distributed.md").read_text()
    m = re.search(r"<!-- distributed-example -->\s*```python\n(.*?)```", guide, re.S)
    assert m, "docs/distributed.md has no distributed example"
    script = tmp_path / "train_ddp.py"
    script.write_text(m.group(1))
    cmd = re.search(r"<!-- distributed-command -->\s*```sh\n(.*?)\n```", guide, re.S).group(1)
    argv = cmd.split()
    assert argv[:2] == ["torchrun", "--nproc_per_node=2"], argv
    argv = [
        str(Path(sys.executable).parent / "torchrun"),
        f"--nproc_per_node={nprocs}",
        *argv[2:-1],
        f"--master_port={_free_port()}",
        str(script),
    ]
    proc = subprocess.run(
        argv,
        env=_env({"OMP_NUM_THREADS": "1"}),
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]
    for rank in range(nprocs):
        assert f"rank {rank}: neuron:{rank} of 4 visible core(s)" in proc.stdout, proc.stdout
        loss = float(re.search(rf"rank {rank}: final loss ([0-9.]+|nan|inf)", proc.stdout).group(1))
        assert 0 < loss < 2.2, proc.stdout  # finite, and learning (ln 10 = 2.30 untrained)


def test_tensors_on_neuron0_before_the_group_warn_once(monkeypatch):
    """Under torchrun, a rank that holds tensors on neuron:0 before its first group stays
    there (moving the current device would split its model from later tensors): one warning
    says it shares local rank 0's core and how to fix it; a rank that chose its core first
    gets none."""
    import warnings

    import torch

    import torchneuron.distributed as tnd

    if torch.neuron.device_count() < 2:
        pytest.skip("needs 2 visible cores")
    monkeypatch.delenv("NEURON_RT_VISIBLE_CORES", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    before = torch.neuron.current_device()
    try:
        torch.neuron.set_device(0)
        held = torch.ones(1, device="neuron:0")
        monkeypatch.setattr(tnd, "_bound", False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tnd._bind_local_rank()
            tnd._bind_local_rank()  # a second group
        texts = [str(w.message) for w in caught]
        assert (
            len(texts) == 1
            and "stays on neuron:0 (local rank 0's core as well) instead of its own, neuron:1"
            in texts[0]
        ), texts
        assert torch.neuron.current_device() == 0
        del held
        torch.neuron.set_device(1)
        monkeypatch.setattr(tnd, "_bound", False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tnd._bind_local_rank()
        assert torch.neuron.current_device() == 1
    finally:
        torch.neuron.set_device(before)
    assert "NEURON_RT_VISIBLE_CORES" not in os.environ
