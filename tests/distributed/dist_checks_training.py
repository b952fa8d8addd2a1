"""dist_jobs.py checks and jobs: DDP, DTensor and FSDP2 training against one process,
injected faults, and CUDA-script remapping."""

from __future__ import annotations

import copy
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from dist_common import LOCAL_RANK, RANK, WS, data, init, ok, same

# ---------------------------------------------------------------- training


def check_ddp(dev: torch.device) -> None:
    """DDP (several buckets, no_sync, find_unused_parameters) on a CNN over sklearn's
    digits: 20 SGD steps on WS ranks equal one process on the full batch."""
    from sklearn.datasets import load_digits
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 16, 3)
            self.fc = nn.Linear(16 * 2 * 2, 10)
            self.unused = nn.Linear(10, 10)  # never called: find_unused_parameters

        def forward(self, x):
            x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
            x = torch.relu(self.conv2(x))
            return self.fc(x.flatten(1))

    digits = load_digits()
    X = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    Y = torch.tensor(digits.target, dtype=torch.long)
    torch.manual_seed(0)
    ref = Net().to(dev)
    model = copy.deepcopy(ref)
    # find_unused_parameters: DDP's reducer stages its used-parameter map in
    # pinned host memory for a PrivateUse1 device (an internal assert otherwise).
    assert torch.empty(1, pin_memory=True).is_pinned(), "pinned host memory missing on neuron"
    find_unused = True
    # device_ids=[local_rank], CUDA's recipe (dev is neuron:LOCAL_RANK)
    ddp = DDP(
        model, device_ids=[LOCAL_RANK], bucket_cap_mb=0.001, find_unused_parameters=find_unused
    )
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    per_rank = 16
    batch = per_rank * WS
    for step in range(20):
        xb, yb = X[step * batch : (step + 1) * batch], Y[step * batch : (step + 1) * batch]
        opt_ref.zero_grad()
        nn.functional.cross_entropy(ref(xb.to(dev)), yb.to(dev)).backward()
        opt_ref.step()
        mine = slice(RANK * per_rank, (RANK + 1) * per_rank)
        xm, ym = xb[mine].to(dev), yb[mine].to(dev)
        opt.zero_grad()
        if step % 2:  # gradient accumulation: two micro-batches, the first without sync
            with ddp.no_sync():
                (nn.functional.cross_entropy(ddp(xm[:8]), ym[:8]) / 2).backward()
            (nn.functional.cross_entropy(ddp(xm[8:]), ym[8:]) / 2).backward()
        else:
            nn.functional.cross_entropy(ddp(xm), ym).backward()
        opt.step()
    assert len(ddp.reducer._get_zeros_like_grad_buckets()) > 1, "expected several gradient buckets"
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        same(p, q, f"ddp {name}", atol=1e-5)
    ok(
        "DDP on digits equals one process on the full batch"
        + (" (find_unused_parameters)" if find_unused else "")
    )


def check_dtensor(dev: torch.device) -> None:
    """DTensor Shard/Replicate, redistribute, and TP (Colwise/Rowwise) on an MLP."""
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("neuron", (WS,))
    torch.manual_seed(1)
    full = torch.randn(WS * 3, 5)
    d = distribute_tensor(full.to(dev), mesh, [Shard(0)])
    same(d.to_local(), full[RANK * 3 : (RANK + 1) * 3], "Shard(0) local")
    r = d.redistribute(mesh, [Replicate()])
    same(r.to_local(), full, "redistribute to Replicate")
    s1 = r.redistribute(mesh, [Shard(1)])
    same(s1.full_tensor(), full, "Shard(1) full_tensor")
    same((d * 2).full_tensor(), full * 2, "sharded arithmetic")
    ok("DTensor distribute_tensor, redistribute")

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(8, 16 * WS)
            self.down = nn.Linear(16 * WS, 8)

        def forward(self, x):
            return self.down(torch.relu(self.up(x)))

    torch.manual_seed(2)
    ref = MLP().to(dev)
    tp = parallelize_module(
        copy.deepcopy(ref), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()}
    )
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    opt = torch.optim.SGD(tp.parameters(), lr=0.05)
    for step in range(3):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step)).to(dev)
        out_ref = ref(x)
        out = tp(x)
        same(out, out_ref, f"TP forward step {step}", atol=1e-5)
        opt_ref.zero_grad()
        out_ref.square().mean().backward()
        opt_ref.step()
        opt.zero_grad()
        out.square().mean().backward()
        opt.step()
    for (name, p), q in zip(tp.named_parameters(), ref.parameters()):
        same(p.full_tensor(), q, f"TP {name}", atol=1e-5)
    ok("tensor parallel MLP equals one process")


def check_fsdp(dev: torch.device) -> None:
    """FSDP2 fully_shard on a 2-layer HF Llama: 10 AdamW steps equal one process;
    sharded state_dict save/load through torch.distributed.checkpoint."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    torch.manual_seed(3)
    ref = LlamaForCausalLM(cfg).to(dev)
    model = copy.deepcopy(ref)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    per_rank, seq = 2, 12
    for step in range(10):
        ids = torch.randint(
            0, 64, (per_rank * WS, seq), generator=torch.Generator().manual_seed(100 + step)
        )
        opt_ref.zero_grad()
        ref(input_ids=ids.to(dev), labels=ids.to(dev)).loss.backward()
        opt_ref.step()
        mine = ids[RANK * per_rank : (RANK + 1) * per_rank].to(dev)
        opt.zero_grad()
        model(input_ids=mine, labels=mine).loss.backward()
        opt.step()
    bad = []
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        diff = (p.full_tensor().cpu() - q.cpu()).abs().max().item()
        if diff > 1e-5:
            bad.append(f"{name}: {diff:.3g}")
    assert not bad, "FSDP2 differs from one process: " + "; ".join(bad)
    ok("FSDP2 Llama 10 AdamW steps equal one process")

    ckpt = os.environ["DIST_CKPT_DIR"]
    dcp.save({"model": model.state_dict()}, checkpoint_id=ckpt)
    saved = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    sd = {"model": model.state_dict()}
    dcp.load(sd, checkpoint_id=ckpt)
    model.load_state_dict(sd["model"])
    for k, v in model.state_dict().items():
        same(v.full_tensor(), saved[k], f"dcp {k}")
    ok("FSDP2 sharded state_dict save/load round trip (DCP)")


# ---------------------------------------------------------------- faults


def job_fault(kind: str) -> None:
    """The last rank dies (or hangs); the others raise a clear error within the timeout."""
    dev = init("neuron")
    x = torch.ones(4, device=dev)
    dist.all_reduce(x)
    torch.neuron.synchronize()
    if RANK == WS - 1:
        if kind == "dead":
            os._exit(3)
        time.sleep(float(os.environ["DIST_TIMEOUT"]) * 2 + 2)
        os._exit(4)
    if kind == "hung" and RANK == 0:  # names the rank that did not arrive
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=1))
            raise AssertionError("monitored_barrier passed without the hung rank")
        except RuntimeError as e:
            assert f"Rank {WS - 1} failed to pass monitoredBarrier" in str(e), e
        print("ok monitored_barrier names the missing rank", flush=True)
    start = time.monotonic()
    dist.all_reduce(x)
    try:
        torch.neuron.synchronize()
        raise AssertionError("a collective with a dead/hung peer completed")
    except RuntimeError as e:
        took = time.monotonic() - start
        print(f"error after {took:.1f}s: {e}", flush=True)
        assert "allreduce" in str(e) and f"rank {RANK}" in str(e), e
        assert took < float(os.environ["DIST_TIMEOUT"]) * 2 + 5, took
    # The device still computes.
    y = torch.arange(4.0, device=dev) * 2
    same(y, torch.arange(4.0) * 2, "device after fault")
    print("ALL OK", flush=True)
    os._exit(0)  # the group is broken; no collective teardown


def job_cuda_compat() -> None:
    """A CUDA script's recipe through torchneuron.cuda_compat: "nccl", then
    torch.cuda.set_device(local_rank), DDP(device_ids=[local_rank]); gradients equal
    the mean of every rank's, computed on the CPU."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torchneuron.cuda_compat  # noqa: F401

    dist.init_process_group("nccl")
    torch.cuda.set_device(LOCAL_RANK)
    dev = torch.device("cuda", LOCAL_RANK)
    torch.manual_seed(RANK)  # DDP broadcasts rank 0's parameters
    model = DDP(torch.nn.Linear(3, 2).to(dev), device_ids=[LOCAL_RANK])
    assert next(model.parameters()).device == torch.device("neuron", LOCAL_RANK)
    ref = copy.deepcopy(model.module).cpu()
    model(data(50, 4, 3).to(dev)).square().sum().backward()
    grads = []
    for r in range(WS):
        ref.zero_grad()
        ref(data(50, 4, 3, rank=r)).square().sum().backward()
        grads.append([p.grad.clone() for p in ref.parameters()])
    for p, *gs in zip(model.parameters(), *grads):
        same(p.grad, torch.stack(gs).mean(0), "DDP gradient", atol=1e-5)
    ok("cuda_compat nccl + set_device(local_rank) + DDP(device_ids=[local_rank])")
    dist.destroy_process_group()
    print("ALL OK", flush=True)
