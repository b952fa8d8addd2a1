"""dist_jobs.py checks: collectives against the same collective on CPU tensors over Gloo,
the functional collectives, and streams."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from dist_common import RANK, WS, data, ok, same

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
