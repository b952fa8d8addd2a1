"""Multi-process jobs of tests/distributed/test_distributed.py (not collected by pytest).

Run as ``python tests/distributed/dist_jobs.py JOB`` in every rank, with torchrun's
environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Each
job groups many checks (a spawned process costs seconds); every check
compares neuron against an independent reference (the same collective on
CPU tensors over Gloo, or the same training in one process) and prints
``ok <name>``; the last line of a passing rank is ``ALL OK``.
"""

from __future__ import annotations

import copy
import os
import sys
import time
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning)

RANK = int(os.environ["RANK"])
WS = int(os.environ["WORLD_SIZE"])
LOCAL_RANK = int(os.environ["LOCAL_RANK"])


def ok(name: str) -> None:
    print(f"ok {name}", flush=True)


def same(a: torch.Tensor, b: torch.Tensor, name: str, atol: float = 0.0) -> None:
    a, b = a.cpu(), b.cpu()
    assert a.dtype == b.dtype and a.shape == b.shape, (
        f"{name}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    )
    if atol:
        diff = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
        assert diff <= atol, f"{name}: max |neuron - reference| = {diff:.3g} > {atol}"
    else:
        assert torch.equal(a, b), f"{name}: neuron {a} != cpu {b}"


def init(backend: str | None) -> torch.device:
    """The process group and this rank's device, by CUDA's recipe: set_device(local_rank)
    after init_process_group (with DIST_DEVICE_ID, init_process_group(device_id=...) too).
    The group has bound the rank to neuron:LOCAL_RANK already (checked)."""
    kw = (
        {"device_id": torch.device("neuron", LOCAL_RANK)}
        if os.environ.get("DIST_DEVICE_ID")
        else {}
    )
    dist.init_process_group(
        backend, timeout=timedelta(seconds=float(os.environ.get("DIST_TIMEOUT", "60"))), **kw
    )
    assert torch.neuron.current_device() == LOCAL_RANK, (torch.neuron.current_device(), LOCAL_RANK)
    torch.neuron.set_device(LOCAL_RANK)
    return torch.device("neuron", torch.neuron.current_device())


def data(seed: int, *shape, dtype=torch.float32, rank: int | None = None) -> torch.Tensor:
    """Rank ``rank``'s (default: this rank's) deterministic input."""
    g = torch.Generator().manual_seed(seed * 1000 + (RANK if rank is None else rank))
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


# ---------------------------------------------------------------- collectives


def check_collectives(dev: torch.device, cpu) -> None:
    """Every collective on neuron tensors equals the same one on CPU tensors (Gloo)."""
    R = dist.ReduceOp
    for op, dtype in [
        (R.SUM, torch.float32),
        (R.PRODUCT, torch.float32),
        (R.MIN, torch.float32),
        (R.MAX, torch.float32),
        (R.AVG, torch.float32),
        (R.SUM, torch.int64),
        (R.BAND, torch.int32),
        (R.BOR, torch.int32),
        (R.BXOR, torch.int32),
        (R.MAX, torch.bfloat16),
    ]:
        x = data(1, 5, 3, dtype=dtype)
        n, c = x.to(dev), x.clone()
        dist.all_reduce(n, op=op)
        dist.all_reduce(c, op=op, group=cpu)
        same(n, c, f"all_reduce {op} {dtype}")
    ok("all_reduce every ReduceOp")

    x = data(2, 7)
    n = x.to(dev)
    w = dist.all_reduce(n, async_op=True)
    w.wait()
    n2 = n * 2  # a later kernel reads the result
    c = x.clone()
    dist.all_reduce(c, group=cpu)
    same(n2, c * 2, "all_reduce async_op")
    ok("all_reduce async_op + wait")

    # channels_last (dense, not contiguous) where each rank's tensor is its own input
    # and output: as CPU Gloo, and as every rank's input (regenerated here) combined.
    cl = torch.channels_last
    x = data(40, 2, 3, 4, 5)
    n, c = x.to(dev).contiguous(memory_format=cl), x.contiguous(memory_format=cl)
    dist.all_reduce(n)
    dist.all_reduce(c, group=cpu)
    assert n.is_contiguous(memory_format=cl) and not n.is_contiguous()
    same(n, c, "all_reduce channels_last")
    same(
        n,
        sum(data(40, 2, 3, 4, 5, rank=r) for r in range(WS)),
        "all_reduce channels_last",
        atol=1e-5,
    )
    n = data(41, 2, 3, 4, 5).to(dev).contiguous(memory_format=cl)
    dist.broadcast(n, WS - 1)
    same(n, data(41, 2, 3, 4, 5, rank=WS - 1), "broadcast channels_last")
    n = data(42, 2, 3, 4, 5).to(dev).contiguous(memory_format=cl)
    dist.reduce(n, 0)
    if RANK == 0:
        same(
            n,
            sum(data(42, 2, 3, 4, 5, rank=r) for r in range(WS)),
            "reduce channels_last",
            atol=1e-5,
        )
    pair = [data(43, 2, 3, 4, 5).to(dev).contiguous(memory_format=cl), data(44, 6).to(dev)]
    dist.all_reduce_coalesced(pair)
    same(
        pair[0],
        sum(data(43, 2, 3, 4, 5, rank=r) for r in range(WS)),
        "all_reduce_coalesced channels_last",
        atol=1e-5,
    )
    same(pair[1], sum(data(44, 6, rank=r) for r in range(WS)), "all_reduce_coalesced", atol=1e-5)
    ok("channels_last all_reduce, broadcast, reduce, all_reduce_coalesced")

    src = WS - 1
    n, c = data(3, 4).to(dev), data(3, 4)
    dist.broadcast(n, src)
    dist.broadcast(c, src, group=cpu)
    same(n, c, "broadcast")
    ok("broadcast")

    dst = 1 % WS
    n, c = data(4, 6).to(dev), data(4, 6)
    dist.reduce(n, dst)
    dist.reduce(c, dst, group=cpu)
    if RANK == dst:
        same(n, c, "reduce")
    ok("reduce")

    x = data(5, 3, 2)
    nl = [torch.empty(3, 2, device=dev) for _ in range(WS)]
    cl = [torch.empty(3, 2) for _ in range(WS)]
    dist.all_gather(nl, x.to(dev))
    dist.all_gather(cl, x, group=cpu)
    for a, b in zip(nl, cl):
        same(a, b, "all_gather")
    no, co = torch.empty(WS * 3, 2, device=dev), torch.empty(WS * 3, 2)
    dist.all_gather_into_tensor(no, x.to(dev))
    dist.all_gather_into_tensor(co, x, group=cpu)
    same(no, co, "all_gather_into_tensor")
    ok("all_gather, all_gather_into_tensor")

    xs = [data(6 + i, 4) for i in range(WS)]
    n, c = torch.empty(4, device=dev), torch.empty(4)
    dist.reduce_scatter(n, [t.to(dev) for t in xs])
    dist.reduce_scatter(c, xs, group=cpu)
    same(n, c, "reduce_scatter")
    x = data(9, WS * 4, 2)
    n, c = torch.empty(4, 2, device=dev), torch.empty(4, 2)
    dist.reduce_scatter_tensor(n, x.to(dev))
    dist.reduce_scatter_tensor(c, x, group=cpu)
    same(n, c, "reduce_scatter_tensor")
    ok("reduce_scatter, reduce_scatter_tensor")

    # Unequal splits: rank r sends (r + j + 1) rows to rank j.
    in_splits = [RANK + j + 1 for j in range(WS)]
    out_splits = [j + RANK + 1 for j in range(WS)]
    x = data(10, sum(in_splits), 3)
    n, c = torch.empty(sum(out_splits), 3, device=dev), torch.empty(sum(out_splits), 3)
    dist.all_to_all_single(n, x.to(dev), out_splits, in_splits)
    dist.all_to_all_single(c, x, out_splits, in_splits, group=cpu)
    same(n, c, "all_to_all_single unequal")
    # CPU Gloo's list all_to_all wants equal sizes: the reference is built from
    # every rank's input (regenerated here).
    ins = list(x.split(in_splits))
    nl = [torch.empty(s, 3, device=dev) for s in out_splits]
    dist.all_to_all(nl, [t.to(dev) for t in ins])
    for j, a in enumerate(nl):
        theirs = data(10, sum(j + k + 1 for k in range(WS)), 3, rank=j)
        start = sum(j + k + 1 for k in range(RANK))
        same(a, theirs[start : start + RANK + j + 1], f"all_to_all unequal from rank {j}")
    ok("all_to_all, all_to_all_single (unequal splits)")

    # In place: the output list is the input list, or the parts are chunks of
    # one tensor, or all_to_all_single's output is its input. A receive must not
    # overwrite a part before it is sent (CPU Gloo stages the list form's inputs;
    # its in-place all_to_all_single gives wrong parts, so the reference is built
    # from every rank's input).
    for it in range(4):
        want = torch.cat([data(80 + it, WS, 3, rank=j)[RANK] for j in range(WS)])
        parts = [data(80 + it, WS, 3)[j].to(dev) for j in range(WS)]
        dist.all_to_all(parts, parts)
        same(torch.cat(parts), want, f"all_to_all(l, l) {it}")
        whole = data(80 + it, WS, 3).reshape(-1).to(dev)
        dist.all_to_all(list(whole.chunk(WS)), list(whole.chunk(WS)))
        same(whole, want, f"all_to_all on chunks of one tensor, in place {it}")
        single = data(80 + it, WS, 3).to(dev)
        dist.all_to_all_single(single, single)
        same(single.reshape(-1), want, f"all_to_all_single(x, x) {it}")
    ok("all_to_all in place")

    x = data(11, 5)
    nl = [torch.empty(5, device=dev) for _ in range(WS)] if RANK == 0 else None
    cl = [torch.empty(5) for _ in range(WS)] if RANK == 0 else None
    dist.gather(x.to(dev), nl, dst=0)
    dist.gather(x, cl, dst=0, group=cpu)
    if RANK == 0:
        for a, b in zip(nl, cl):
            same(a, b, "gather")
    parts = [data(12 + i, 4) for i in range(WS)]
    n, c = torch.empty(4, device=dev), torch.empty(4)
    dist.scatter(n, [p.to(dev) for p in parts] if RANK == 0 else None, src=0)
    dist.scatter(c, parts if RANK == 0 else None, src=0, group=cpu)
    same(n, c, "scatter")
    ok("gather, scatter")

    # Ring exchange with isend before irecv on every rank (completes on CPU Gloo).
    nxt, prv = (RANK + 1) % WS, (RANK - 1) % WS
    x = data(13, 6)
    r = torch.empty(6, device=dev)
    ws_ = [dist.isend(x.to(dev), nxt), dist.irecv(r, prv)]
    for w in ws_:
        w.wait()
    cr = torch.empty(6)
    cws = [dist.isend(x, nxt, group=cpu), dist.irecv(cr, prv, group=cpu)]
    for w in cws:
        w.wait()
    same(r, cr, "isend/irecv ring")
    if RANK in (0, 1) and WS >= 2:
        t = x.to(dev) if RANK == 0 else torch.empty(6, device=dev)
        if RANK == 0:
            dist.send(t, 1)
        else:
            dist.recv(t, 0)
            same(t, data(13, 6, rank=0), "send/recv")
    r2 = torch.empty(6, device=dev)
    reqs = dist.batch_isend_irecv(
        [dist.P2POp(dist.isend, x.to(dev) * 3, nxt), dist.P2POp(dist.irecv, r2, prv)]
    )
    for q in reqs:
        q.wait()
    same(r2, cr * 3, "batch_isend_irecv")
    ok("send/recv, isend/irecv, batch_isend_irecv")

    # Coalesced forms (integer-valued floats: exact in any summation order, as
    # Gloo's coalesced algorithms order sums differently from single ones).
    xs = [data(20 + i, 3 + i, dtype=torch.int32).float() for i in range(3)]
    ns = [t.to(dev) for t in xs]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ns:
            dist.all_reduce(t)
    cm.wait()
    for t, c in zip(ns, xs):
        dist.all_reduce(c, group=cpu)
        same(t, c, "coalesced all_reduce")
    outs = [torch.empty(WS * t.numel(), device=dev) for t in xs]
    with dist._coalescing_manager():
        for o, t in zip(outs, xs):
            dist.all_gather_into_tensor(o, t.to(dev))
    for o, t in zip(outs, xs):
        co = torch.empty(WS * t.numel())
        dist.all_gather_into_tensor(co, t, group=cpu)
        same(o, co, "coalesced all_gather_into_tensor")
    big = [data(30 + i, WS * 2, dtype=torch.int32).float() for i in range(2)]
    outs = [torch.empty(2, device=dev) for _ in big]
    with dist._coalescing_manager():
        for o, t in zip(outs, big):
            dist.reduce_scatter_tensor(o, t.to(dev))
    for o, t in zip(outs, big):
        co = torch.empty(2)
        dist.reduce_scatter_tensor(co, t, group=cpu)
        same(o, co, "coalesced reduce_scatter_tensor")
    ns = [t.to(dev) for t in xs]
    dist.all_reduce_coalesced(ns)
    cs = [t.clone() for t in xs]
    dist.all_reduce_coalesced(cs, group=cpu)
    for a, b in zip(ns, cs):
        same(a, b, "all_reduce_coalesced")
    ok(
        "coalesced: _coalescing_manager (all_reduce, all_gather_into_tensor, reduce_scatter_tensor), all_reduce_coalesced"
    )

    # Subgroups and barrier on a subgroup.
    sub_ranks = [0, 1]
    sub = dist.new_group(sub_ranks)
    sub_cpu = dist.new_group(sub_ranks, backend="gloo")
    subs, _ = dist.new_subgroups(group_size=2)
    if RANK in sub_ranks:
        n, c = data(40, 4).to(dev), data(40, 4)
        dist.all_reduce(n, group=sub)
        dist.all_reduce(c, group=sub_cpu)
        same(n, c, "new_group all_reduce")
        dist.barrier(group=sub)
    n = data(41, 3).to(dev)
    dist.all_reduce(n, group=subs)
    c = data(41, 3)
    parts = [torch.empty(3) for _ in range(WS)]
    dist.all_gather(parts, c, group=cpu)
    base = (RANK // 2) * 2
    same(n, parts[base] + parts[base + 1], "new_subgroups all_reduce")
    dist.barrier(group=subs)
    dist.barrier()
    ok("new_group, new_subgroups, barrier on every group")

    # Outputs that are views at an offset into a larger tensor; more dtypes; empty tensors.
    big, cbig = torch.zeros(10, device=dev), torch.zeros(10)
    for b in (big, cbig):
        b[2:6] = RANK + 1.0
    dist.all_reduce(big[2:6])
    dist.all_reduce(cbig[2:6], group=cpu)
    same(big, cbig, "all_reduce on a slice")
    big, cbig = torch.zeros(WS * 3, device=dev), torch.zeros(WS * 3)
    dist.all_gather(list(big.chunk(WS)), data(42, 3).to(dev))
    dist.all_gather(list(cbig.chunk(WS)), data(42, 3), group=cpu)
    same(big, cbig, "all_gather into chunks")
    big, cbig = torch.zeros(3, WS * 2, device=dev), torch.zeros(3, WS * 2)
    dist.all_gather_into_tensor(big[1], data(43, 2).to(dev))
    dist.all_gather_into_tensor(cbig[1], data(43, 2), group=cpu)
    same(big, cbig, "all_gather_into_tensor into a row")
    for dtype in (torch.float16, torch.int8, torch.uint8, torch.bool, torch.float64):
        x = data(44, 6, dtype=torch.int64).abs().remainder(3).to(dtype)
        n, c = x.to(dev), x.clone()
        op = dist.ReduceOp.MAX if dtype == torch.bool else dist.ReduceOp.SUM
        dist.all_reduce(n, op=op)
        dist.all_reduce(c, op=op, group=cpu)
        same(n, c, f"all_reduce {dtype}")
    e = torch.empty(0, device=dev)
    dist.all_reduce(e)
    dist.broadcast(e, 0)
    same(e, torch.empty(0), "empty tensors")
    ok("views at an offset as outputs, more dtypes, empty tensors")


def check_functional(dev: torch.device, cpu) -> None:
    """torch.distributed._functional_collectives on neuron tensors."""
    import torch.distributed._functional_collectives as fc

    world = dist.group.WORLD
    x = data(50, 4, 3)
    same(fc.all_reduce(x.to(dev), "sum", world), fc.all_reduce(x, "sum", cpu), "funcol all_reduce")
    same(
        fc.all_gather_tensor(x.to(dev), 0, world),
        fc.all_gather_tensor(x, 0, cpu),
        "funcol all_gather_tensor",
    )
    y = data(51, WS * 2, 3)
    same(
        fc.reduce_scatter_tensor(y.to(dev), "sum", 0, world),
        fc.reduce_scatter_tensor(y, "sum", 0, cpu),
        "funcol reduce_scatter_tensor",
    )
    splits = [2] * WS
    same(
        fc.all_to_all_single(y.to(dev), splits, splits, world),
        fc.all_to_all_single(y, splits, splits, cpu),
        "funcol all_to_all_single",
    )
    n = fc.all_reduce(x.to(dev), "max", world)
    out = fc.wait_tensor(n) + 1
    same(out, fc.all_reduce(x, "max", cpu) + 1, "funcol wait_tensor")
    ok("functional collectives")


def check_streams(dev: torch.device, cpu) -> None:
    """A collective waits for the kernels queued before it; later kernels wait for it."""
    a = data(60, 256, 256)
    n = a.to(dev)
    for _ in range(8):  # queued kernels the collective must wait for
        n = torch.tanh(n @ n / 16)
    s = n.sum(dim=0)
    dist.all_reduce(s)
    t = s * 2 + 1
    c = a.clone()
    for _ in range(8):
        c = torch.tanh(c @ c / 16)
    cs = c.sum(dim=0)
    dist.all_reduce(cs, group=cpu)
    same(t, cs * 2 + 1, "stream order", atol=1e-4)
    # async on a side stream; wait() orders the current stream after it.
    side = torch.neuron.Stream()
    x = data(61, 1000)
    n = x.to(dev)
    side.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(side):
        w = dist.all_reduce(n, async_op=True)
    w.wait()
    y = n + 1
    c = x.clone()
    dist.all_reduce(c, group=cpu)
    same(y, c + 1, "async on a side stream")
    # Back to back on an idle stream, no sync between: the first is posted by
    # its own kernel, the next ones by the poster while it runs.
    xs = [data(62 + i, 100).to(dev) for i in range(6)]
    torch.neuron.synchronize()
    works = [dist.all_reduce(v, async_op=(i % 2 == 1)) for i, v in enumerate(xs)]
    for w in works:
        if w is not None:
            w.wait()
    for i, v in enumerate(xs):
        same(
            v,
            sum(data(62 + i, 100, rank=r) for r in range(WS)),
            f"back-to-back all_reduce {i}",
            atol=1e-5,
        )
    # A series on one tensor with nothing queued between: each all_reduce is
    # ready when the previous one is done (not when its kernel wakes); one
    # that started early would read a partly reduced buffer. Then the same
    # with another group's collective or slow kernels between, which the next
    # all_reduce must wait for too.
    other = dist.new_group(backend="neuron")
    slow = torch.randn(384, 384, device=dev) / 20
    for between in (None, "group", "kernel"):
        xn, xc = data(70, 2**18).to(dev), data(70, 2**18)
        for i in range(6):
            op = dist.ReduceOp.SUM if i % 3 else dist.ReduceOp.MAX
            dist.all_reduce(xn, op=op)
            dist.all_reduce(xc, op=op, group=cpu)
            if between == "group":
                dist.all_reduce(xn, group=other)
                dist.all_reduce(xc, group=cpu)
            elif between == "kernel":
                for _ in range(4):
                    slow = torch.tanh(slow @ slow)
                xn.mul_(0.5)
                xc.mul_(0.5)
        same(
            xn, xc, f"back-to-back all_reduce series on one tensor ({between or 'nothing'} between)"
        )
    # CPU tensors on a neuron group, issued while a neuron collective still
    # waits for kernels on rank 0 only: Gloo must see them in program order on
    # every rank (else each pairs with the other's: a silent wrong result).
    ng = dist.new_group(backend="neuron")
    for it in range(3):
        busy = torch.ones(256, 256, device=dev)
        for _ in range(8 if RANK == 0 else 0):
            busy = torch.tanh(busy @ busy / 256)
        xn = torch.full((4,), 1.0 + RANK, device=dev) + busy[0, :4] * 0
        dist.all_reduce(xn, group=ng)
        if RANK != 0:
            time.sleep(0.01)  # rank 0's neuron collective is still queued, others' posted
        yc = torch.full((4,), 100.0 * (1 + RANK))
        dist.all_reduce(yc, group=ng)
        same(
            yc, torch.full((4,), 100.0 * sum(range(1, WS + 1))), f"cpu collective after neuron {it}"
        )
        same(
            xn, torch.full((4,), float(sum(range(1, WS + 1)))), f"neuron collective before cpu {it}"
        )
    # A neuron send and then a CPU send to one peer on one tag: the neuron
    # data is posted only after the pair's check, so the CPU data reaches Gloo
    # first on the sender, while the receiver posts the neuron receive first
    # (it calls the CPU one late). Each must still get its own message.
    for it in range(3):
        if RANK == 0:
            sn = torch.full((8,), 10.0 + it, device=dev)
            wn = dist.isend(sn, 1, group=ng, tag=7)
            wc = dist.isend(torch.full((8,), -1.0 - it), 1, group=ng, tag=7)
            wn.wait()
            wc.wait()
        elif RANK == 1:
            time.sleep(0.05)  # rank 0 has issued both sends
            rn = torch.zeros(8, device=dev)
            wn = dist.irecv(rn, 0, group=ng, tag=7)
            time.sleep(0.05)  # the neuron receive's data stage is posted
            rc = torch.zeros(8)
            dist.recv(rc, 0, group=ng, tag=7)
            wn.wait()
            same(rn, torch.full((8,), 10.0 + it), f"neuron recv beside a cpu recv on one tag {it}")
            same(rc, torch.full((8,), -1.0 - it), f"cpu recv beside a neuron recv on one tag {it}")
    fut = dist.all_reduce(x.to(dev), async_op=True).get_future()
    v = fut.then(lambda f: f.value()[0] * 3).wait()
    same(v, c * 3, "get_future().then")
    ok("stream ordering, async_op on a side stream, futures")


def check_errors(dev: torch.device, cpu) -> None:
    """Bad input: a clear error naming the problem; the group keeps working."""
    if torch.neuron.device_count() > 1:
        other = torch.ones(2, device=f"neuron:{(dev.index + 1) % torch.neuron.device_count()}")
        try:
            dist.all_reduce(other)
            raise AssertionError("all_reduce on another core did not raise")
        except RuntimeError as e:
            assert "uses neuron:" in str(e), e
        ok("wrong core is an error")
    for bad, what in [
        (torch.ones(RANK + 2, device=dev), "shape"),
        (torch.ones(3, device=dev, dtype=torch.float32 if RANK == 0 else torch.int32), "dtype"),
    ]:
        dist.all_reduce(bad)
        try:
            torch.neuron.synchronize()
            raise AssertionError(f"{what} mismatch across ranks did not raise")
        except RuntimeError as e:
            assert "differ" in str(e) and "rank" in str(e), e
        same(bad, torch.ones(bad.shape, dtype=bad.dtype), f"input intact after {what} mismatch")
        ok(f"{what} mismatch across ranks is an error")
    # The same mismatch after identical collectives (a repeated fingerprint)
    # and behind queued kernels (checked while they run).
    same_shape = torch.ones(5, device=dev)
    for _ in range(3):
        dist.all_reduce(same_shape)
    bad = torch.ones(5 + RANK, device=dev)
    busy = torch.ones(128, 128, device=dev)
    for _ in range(4):
        busy = busy @ busy / 128
    dist.all_reduce(bad)
    try:
        torch.neuron.synchronize()
        raise AssertionError("shape mismatch after repeated collectives did not raise")
    except RuntimeError as e:
        assert "differ" in str(e), e
    same(bad, torch.ones(5 + RANK), "input intact after a mismatch behind kernels")
    # all_to_all whose counts disagree between two ranks (rank 0 sends 3 to
    # rank 1, which expects 2): Gloo would abort the receiving process; checked
    # pairwise before any data moves, an error on both.
    if WS >= 2:
        ins = [2] * WS
        if RANK == 0:
            ins[1] = 3
        outs = [2] * WS
        for form in ("single", "list"):
            o = torch.full((2 * WS,), -1.0, device=dev)
            src = torch.arange(float(sum(ins)), device=dev)
            if form == "single":
                dist.all_to_all_single(o, src, outs, ins)
            else:
                dist.all_to_all(list(o.split(outs)), list(src.split(ins)))
            try:
                torch.neuron.synchronize()  # every rank gets every rank's counts: all raise
                raise AssertionError(f"all_to_all ({form}) split mismatch did not raise")
            except RuntimeError as e:
                assert (
                    "split sizes differ (rank 0 sends 3 elements to rank 1, which expects 2)"
                    in str(e)
                ), e
            same(
                o,
                torch.full((2 * WS,), -1.0),
                f"output untouched after an all_to_all ({form}) mismatch",
            )
        try:
            dist.all_to_all_single(
                torch.empty(4, device=dev),
                torch.ones(4, device=dev),
                [1] * WS,
                [4] + [0] * (WS - 1),
            )
            raise AssertionError("split sizes not summing to dim 0 did not raise")
        except RuntimeError as e:
            assert "split sizes sum to" in str(e), e
        ok("all_to_all split mismatch across ranks is an error")
    t = torch.ones(4, device=dev)
    if RANK == 0:
        dist.all_reduce(t)
    else:
        dist.broadcast(t, 0)
    try:
        torch.neuron.synchronize()
        raise AssertionError("different collectives on the ranks did not raise")
    except RuntimeError as e:
        assert (
            "the ranks called different collectives" in str(e)
            and "ALLREDUCE of Float[4]" in str(e)
            and "BROADCAST of Float[4]" in str(e)
        ), e
    ok("different collectives on the ranks are named")
    same(same_shape, torch.full((5,), float(WS**3)), "repeated collectives before a mismatch")
    # Tags at and above 2**28 carry the backend's own messages (a neuron
    # send/recv's data, the checks): refused on neuron and CPU tensors alike.
    ng = dist.new_group(backend="neuron")  # its CPU tensors too ("cpu:gloo" would take them)
    for t in (torch.ones(2, device=dev), torch.ones(2)):
        try:
            dist.send(t, (RANK + 1) % WS, group=ng, tag=2**28)
            raise AssertionError("a tag of 2**28 did not raise")
        except RuntimeError as e:
            assert "tag 268435456 out of range" in str(e), e
    ok("send/recv tag out of range is an error")
    # Not dense: ValueError, as NCCL; dense but not contiguous where the ranks' memory
    # orders would mix (all_gather), the same.
    for t in (
        torch.ones(4, 4, device=dev).t()[0],
        torch.ones(2, 3, 4, 5, device=dev).contiguous(memory_format=torch.channels_last),
    ):
        try:
            if t.dim() == 1:
                dist.all_reduce(t)
            else:
                dist.all_gather_into_tensor(torch.empty(WS * 2, 3, 4, 5, device=dev), t)
            raise AssertionError("non-contiguous did not raise")
        except ValueError as e:
            assert "contiguous" in str(e), e
    # Memory orders that differ across ranks (NCCL and CPU Gloo add the elements of
    # different positions): an error on every rank, the input intact.
    x = torch.arange(120.0).reshape(2, 3, 4, 5)
    t = x.to(dev).contiguous(
        memory_format=torch.channels_last if RANK == 0 else torch.contiguous_format
    )
    dist.all_reduce(t)
    try:
        torch.neuron.synchronize()
        raise AssertionError("a memory layout mismatch across ranks did not raise")
    except RuntimeError as e:
        assert "differ" in str(e) and "Float[2, 3, 4, 5] channels_last" in str(e), e
    same(t, x, "input intact after a layout mismatch")
    ok("memory layouts that differ across ranks are an error")
    try:
        dist.all_reduce(torch.ones(4, device=dev), op=dist.ReduceOp.BAND)
        raise AssertionError("BAND on float did not raise")
    except RuntimeError as e:
        assert "bitwise" in str(e), e
    try:  # Gloo has no int16 reductions: at the call, as on a CPU group
        dist.all_reduce(torch.ones(3, dtype=torch.int16, device=dev))
        raise AssertionError("int16 all_reduce did not raise")
    except RuntimeError as e:
        assert "Short" in str(e) and "Gloo" in str(e), e
    n = torch.full((3,), float(RANK), device=dev)
    dist.all_reduce(n)
    same(n, torch.full((3,), float(sum(range(WS)))), "group works after errors")
    ok("bad input errors; the group keeps working")

    # send/recv whose two ends disagree: an error on both ranks, no data moved.
    if RANK in (0, 1):
        peer = 1 - RANK
        for what, t in [
            ("dtype", torch.ones(4, device=dev, dtype=torch.float32 if RANK == 0 else torch.int32)),
            ("size", torch.ones(4 + RANK, device=dev)),
        ]:
            keep = t.cpu()
            try:
                dist.send(t, peer) if RANK == 0 else dist.recv(t, peer)
                torch.neuron.synchronize()
                raise AssertionError(f"send/recv {what} mismatch did not raise")
            except RuntimeError as e:
                assert "the pair's tensors differ" in str(e) and f"rank {peer}" in str(e), e
            same(t, keep, f"recv buffer intact after {what} mismatch")
        y = torch.empty(3 + RANK, device=dev)
        try:
            for q in dist.batch_isend_irecv(
                [
                    dist.P2POp(dist.isend, torch.ones(3, device=dev), peer),
                    dist.P2POp(dist.irecv, y, peer),
                ]
            ):
                q.wait()
            torch.neuron.synchronize()
            raise AssertionError("batch_isend_irecv mismatch did not raise")
        except RuntimeError as e:
            assert "the pair's tensors differ" in str(e), e
        r = torch.empty(3, device=dev)
        dist.send(torch.full((3,), 7.0, device=dev), peer) if RANK == 0 else dist.recv(r, peer)
        if RANK == 1:
            same(r, torch.full((3,), 7.0), "send/recv after mismatches")
    ok("send/recv mismatch across the pair is an error on both ranks")

    dist.monitored_barrier(timeout=timedelta(seconds=30))
    dist.monitored_barrier(timeout=timedelta(seconds=30), wait_all_ranks=True)
    ok("monitored_barrier on a neuron group")


def check_one_rank_fails(dev: torch.device, cpu) -> None:
    """A bad argument on one rank (the last): it raises its own error at the call;
    every other rank's same collective raises promptly, naming that rank and the
    collective (not the group's timeout); the next collective works on every rank."""
    bad = WS - 1
    me = RANK == bad
    other_core = None
    if torch.neuron.device_count() > 1:
        other_core = f"neuron:{(dev.index + 1) % torch.neuron.device_count()}"

    def scatter_list_length():
        out = torch.empty(2, device=dev)
        lst = [torch.ones(2, device=dev)] * (WS + 1) if me else None
        dist.scatter(out, lst, src=bad)

    def gather_list_length():
        dist.gather(
            torch.ones(2, device=dev),
            [torch.empty(2, device=dev)] * (WS + 1) if me else None,
            dst=bad,
        )

    def reduce_scatter_input_shape():
        # (Gloo aborted the process on this one, checked on the poster)
        ins = [torch.ones(2, device=dev) for _ in range(WS)]
        if me:
            ins[0] = torch.ones(3, device=dev)
        dist.reduce_scatter(torch.empty(2, device=dev), ins)

    def all_gather_output_size():
        dist.all_gather_into_tensor(
            torch.empty(2 * WS + (1 if me else 0), device=dev), torch.ones(2, device=dev)
        )

    def negative_split():
        ins = [2] * WS
        if me:
            ins[0], ins[1] = -1, 5  # sums to 2 * WS: only the sign is wrong
        dist.all_to_all_single(
            torch.empty(2 * WS, device=dev), torch.ones(2 * WS, device=dev), [2] * WS, ins
        )

    def wrong_core():
        dist.all_reduce(torch.ones(3, device=other_core if me else dev))

    def dtype_gloo_lacks():
        dist.all_reduce(torch.ones(3, device=dev, dtype=torch.int16 if me else torch.float32))

    def avg_on_integers():
        dist.all_reduce(
            torch.ones(3, device=dev, dtype=torch.int64 if me else torch.float32),
            op=dist.ReduceOp.AVG,
        )

    def in_a_coalescing_block():
        # Three calls on every rank, the second bad on one: that rank raises as
        # the block ends; the others' block fails (no data moves).
        a, b = torch.full((2,), float(RANK), device=dev), torch.full((2,), float(RANK), device=dev)
        out = torch.full((2,), -1.0, device=dev)
        with dist._coalescing_manager(device=dev, async_ops=True) as cm:
            dist.broadcast(a, 0, async_op=True)
            dist.scatter(
                out, [torch.ones(2, device=dev)] * (WS + 1) if me else None, src=bad, async_op=True
            )
            dist.broadcast(b, 0, async_op=True)
        cm.wait()

    def in_a_coalesced_all_gather():
        # torch's fast path: one allgather_into_tensor_coalesced at the block's end.
        with dist._coalescing_manager():
            for k in range(2):
                o = torch.empty(2 * WS + (1 if me and k == 1 else 0), device=dev)
                dist.all_gather_into_tensor(o, torch.ones(2, device=dev))

    # (the backend's name of the collective, the call, the faulty rank's error)
    cases = [
        (
            "scatter",
            scatter_list_length,
            RuntimeError,
            "scatter_list has %d tensors, expected %d" % (WS + 1, WS),
        ),
        (
            "gather",
            gather_list_length,
            RuntimeError,
            "gather_list has %d tensors, expected %d" % (WS + 1, WS),
        ),
        (
            "reduce_scatter",
            reduce_scatter_input_shape,
            RuntimeError,
            "input 0 is Float[3], expected Float[2]",
        ),
        (
            "_allgather_base",
            all_gather_output_size,
            ValueError,
            "output has %d elements" % (2 * WS + 1),
        ),
        ("alltoall_base", negative_split, RuntimeError, "negative input split size -1"),
        ("allreduce", dtype_gloo_lacks, RuntimeError, "dtype Short, which Gloo"),
        ("allreduce", avg_on_integers, RuntimeError, "ReduceOp.AVG on Long tensors"),
        (
            "coalesced",
            in_a_coalescing_block,
            RuntimeError,
            "scatter_list has %d tensors" % (WS + 1),
        ),
        (
            "allgather_into_tensor_coalesced",
            in_a_coalesced_all_gather,
            RuntimeError,
            "output 1 (Float[%d]) must hold world size" % (2 * WS + 1),
        ),
    ]
    if other_core:
        cases.append(
            (
                "allreduce",
                wrong_core,
                RuntimeError,
                "but rank %d of this process group uses neuron:" % bad,
            )
        )
    only = os.environ.get("DIST_CASES")  # a subset, by function name (to check one case)
    for i, (collective, call, etype, reason) in enumerate(cases):
        what = call.__name__
        if only and what not in only.split(","):
            continue
        start = time.monotonic()
        if me:
            try:
                call()
                raise AssertionError(f"{what}: the faulty rank did not raise at the call")
            except etype as e:
                assert reason in str(e), (what, e)
        else:
            call()
            try:
                torch.neuron.synchronize()
                raise AssertionError(f"{what}: rank {RANK} did not raise")
            except RuntimeError as e:
                took = time.monotonic() - start
                msg = str(e)
                # A bound on a hang (the group's timeout is 60 s), not a timing check.
                assert took < 20, (what, took, msg)
                assert f"rank {bad} failed this call" in msg and reason in msg, (what, msg)
                assert f"neuron c10d {collective} (rank {RANK} of {WS})" in msg, (what, msg)
                assert "timeout" not in msg.lower() and "timed out" not in msg.lower(), (what, msg)
        # Every rank used one fingerprint slot per call: the group works on.
        n = torch.full((3,), float(RANK + i), device=dev)
        dist.all_reduce(n)
        same(n, torch.full((3,), float(sum(range(WS)) + WS * i)), f"all_reduce after {what}")
        ok(f"one rank's bad argument ({what}) is an error on every rank")
    # send/recv: a bad argument on one end (the last rank) raises there at the call;
    # its peer (rank 0) raises at its next sync point, naming that rank and the reason,
    # not after the group's timeout; no data moves; the pair's next send/recv is right.
    partner = 0
    nc = torch.arange(6.0, device=dev).reshape(3, 2).t()  # not contiguous
    p2p_cases = [
        ("send", "recv", nc, "must be contiguous"),
        ("recv", "send", nc, "must be contiguous"),
    ]
    if other_core:
        p2p_cases.append(
            (
                "recv",
                "send",
                torch.ones(2, 3, device=other_core),
                "but rank %d of this process group uses neuron:" % bad,
            )
        )
    for bad_op, peer_op, bad_t, reason in p2p_cases:
        if RANK not in (bad, partner):
            continue
        start = time.monotonic()
        if me:
            try:
                getattr(dist, bad_op)(bad_t, partner)
                raise AssertionError(f"{bad_op}: the faulty rank did not raise at the call")
            except (RuntimeError, ValueError) as e:  # ValueError: not contiguous (NCCL's)
                assert reason in str(e), (bad_op, e)
        else:
            t = torch.full((2, 3), -3.0, device=dev)
            getattr(dist, peer_op)(t, bad)
            try:
                torch.neuron.synchronize()
                raise AssertionError(f"{peer_op}: rank {RANK} did not raise")
            except RuntimeError as e:
                took = time.monotonic() - start
                msg = str(e)
                assert took < 20, (peer_op, took, msg)  # a bound on a hang (timeout 60 s)
                assert (
                    f"rank {bad} failed this call (its {bad_op.upper()})" in msg and reason in msg
                ), msg
                assert f"neuron c10d {peer_op} (rank {RANK} of {WS})" in msg, msg
                assert "timeout" not in msg.lower() and "timed out" not in msg.lower(), msg
            same(
                t,
                torch.full((2, 3), -3.0),
                f"{peer_op} buffer intact after the peer's bad {bad_op}",
            )
        # The pair's checks stay in step, both ways, on the same tag.
        for src in (partner, bad):
            got = torch.zeros(4, device=dev)
            if RANK == src:
                dist.send(
                    torch.full((4,), 5.0 + src, device=dev), bad if src == partner else partner
                )
            else:
                dist.recv(got, src)
                same(got, torch.full((4,), 5.0 + src), f"send/recv after a bad {bad_op}")
        ok(f"one rank's bad {bad_op} is an error on its peer")
    # ReduceOp.AVG on bool on every rank: NCCL's TypeError, at the call.
    try:
        dist.all_reduce(torch.ones(3, device=dev, dtype=torch.bool), op=dist.ReduceOp.AVG)
        raise AssertionError("AVG on bool did not raise")
    except TypeError as e:
        assert "Cannot use ReduceOp.AVG with boolean inputs" in str(e), e
    f = torch.full((2,), float(RANK), device=dev)
    dist.all_reduce(f, op=dist.ReduceOp.AVG)
    same(f, torch.full((2,), sum(range(WS)) / WS), "AVG on float after AVG errors")
    ok("one rank's bad argument is an error on every rank; the group keeps working")


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


def main() -> None:
    job = sys.argv[1]
    if job.startswith("fault-"):
        job_fault(job[len("fault-") :])
        return
    if job == "cuda_compat":
        job_cuda_compat()
        return
    backend = os.environ.get("DIST_BACKEND", "neuron")
    backend = None if backend == "default" else backend
    dev = init(backend)
    # Every core stays visible; this rank's is neuron:LOCAL_RANK (set_device after the group worked).
    assert torch.neuron.device_count() >= WS and dev.index == LOCAL_RANK, (
        torch.neuron.device_count(),
        dev,
    )
    ok("bound to neuron:LOCAL_RANK")
    dist.monitored_barrier(timeout=timedelta(seconds=60))  # any backend string, none included
    ok(f"monitored_barrier on the default group ({dist.get_backend()})")
    cpu = dist.new_group(backend="gloo")
    for name in os.environ.get("DIST_CHECKS", job).split(","):
        if name == "gather_forms":
            from gather_forms import check_gather_forms

            check_gather_forms(dev, RANK, WS, data, same, ok)
            continue
        globals()[f"check_{name}"](dev, cpu) if name in (
            "collectives",
            "functional",
            "streams",
            "errors",
            "one_rank_fails",
        ) else globals()[f"check_{name}"](dev)
    dist.barrier()
    dist.destroy_process_group()
    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
