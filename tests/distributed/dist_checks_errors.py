"""dist_jobs.py checks: bad arguments and failures (on every rank, at once; one rank failing)."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from dist_common import RANK, WS, ok, same


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
