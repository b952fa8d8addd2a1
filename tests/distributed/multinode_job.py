"""One rank of the two-node DDP job (tests/distributed/test_multinode.py), started by a
torchrun agent per node. Trains 3 DDP steps on neuron and checks the parameters against
the same training on the CPU over both ranks' data; prints one RESULT line."""

import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("neuron")
rank, ws = dist.get_rank(), dist.get_world_size()
local = int(os.environ["LOCAL_RANK"])
dev = torch.device("neuron", local)
torch.manual_seed(0)
ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
model = DDP(
    torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(dev),
    device_ids=[local],
)
model.module.load_state_dict(ref.state_dict())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
for step in range(3):
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(ws * 4, 8, generator=g), torch.randn(ws * 4, 1, generator=g)
    mine = slice(rank * 4, rank * 4 + 4)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x[mine].to(dev)), y[mine].to(dev)).backward()
    opt.step()
    opt_ref.zero_grad()
    torch.nn.functional.mse_loss(ref(x), y).backward()  # the mean over both ranks' batches
    opt_ref.step()
err = max(
    (p.detach().cpu() - q).abs().max().item() for p, q in zip(model.parameters(), ref.parameters())
)
print(
    "RESULT "
    + json.dumps(
        {
            "rank": rank,
            "world": ws,
            "group_rank": os.environ.get("GROUP_RANK"),
            "device": str(dev),
            "param_device": str(next(model.parameters()).device),
            "max_err": err,
        }
    ),
    flush=True,
)
dist.destroy_process_group()
