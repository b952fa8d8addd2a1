"""The output/input forms of all_gather_into_tensor and reduce_scatter_tensor that NCCL
accepts (any tensor of world size x numel elements), checked in every rank of a
dist_jobs.py job against values computed from every rank's input (not a collective)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def check_gather_forms(dev: torch.device, rank: int, ws: int, data, same, ok) -> None:
    shape = (3, 2)
    inputs = [data(71, *shape, rank=r) for r in range(ws)]
    stacked = torch.stack(inputs)  # (world, 3, 2): the reference
    forms = {
        "concatenated": (ws * 3, 2),
        "stacked": (ws, *shape),
        "flat": (ws * 6,),
        "other shape": (ws * 2, 3),
    }
    for name, out_shape in forms.items():
        out = torch.full(out_shape, float("nan"), device=dev)
        dist.all_gather_into_tensor(out, inputs[rank].to(dev))
        same(out, stacked.reshape(out_shape), f"all_gather_into_tensor {name}")
    # A 0-dim input gathers to (world,).
    out = torch.empty(ws, device=dev)
    dist.all_gather_into_tensor(out, inputs[rank][0, 0].to(dev))
    same(out, stacked[:, 0, 0], "all_gather_into_tensor of 0-dim")
    ok("all_gather_into_tensor: concatenated, stacked and flat outputs")

    # reduce_scatter_tensor: rank r gets chunk r of the inputs' sum, whatever their shape.
    full = [data(72, ws * 6, rank=r) for r in range(ws)]
    total = torch.stack(full).sum(0).reshape(ws, *shape)
    for name, in_shape in {
        "concatenated": (ws * 3, 2),
        "stacked": (ws, *shape),
        "flat": (ws * 6,),
    }.items():
        out = torch.empty(shape, device=dev)
        dist.reduce_scatter_tensor(out, full[rank].reshape(in_shape).to(dev))
        same(out, total[rank], f"reduce_scatter_tensor {name}", atol=1e-5)
    ok("reduce_scatter_tensor: concatenated, stacked and flat inputs")

    # A wrong numel or dtype: NCCL's ValueError / TypeError, naming the sizes.
    for call, args, etype, words in (
        (
            dist.all_gather_into_tensor,
            (torch.empty(ws * 6 + 1, device=dev), inputs[rank].to(dev)),
            ValueError,
            "expected world size",
        ),
        (
            dist.all_gather_into_tensor,
            (torch.empty(ws * 6, device=dev, dtype=torch.float64), inputs[rank].to(dev)),
            TypeError,
            "dtype",
        ),
        (
            dist.reduce_scatter_tensor,
            (torch.empty(7, device=dev), full[rank].to(dev)),
            ValueError,
            "must hold world size",
        ),
    ):
        try:
            call(*args)
            torch.neuron.synchronize()
            raise AssertionError(f"{call.__name__}: no error")
        except etype as e:
            assert words in str(e), e
    ok("gather forms: wrong numel or dtype is NCCL's error")
    out = torch.empty(ws * 6, device=dev)
    dist.all_gather_into_tensor(out, inputs[rank].to(dev))
    torch.neuron.synchronize()
    same(out, stacked.reshape(-1), "all_gather_into_tensor after the errors")
