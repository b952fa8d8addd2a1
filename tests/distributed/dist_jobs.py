"""Multi-process jobs of tests/distributed/test_distributed.py (not collected by pytest).

Run as ``python tests/distributed/dist_jobs.py JOB`` in every rank, with torchrun's
environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Each
job groups many checks (a spawned process costs seconds); every check
compares neuron against an independent reference (the same collective on
CPU tensors over Gloo, or the same training in one process) and prints
``ok <name>``; the last line of a passing rank is ``ALL OK``.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import dist_checks_collectives as collectives
import dist_checks_errors as errors
import dist_checks_training as training
import torch
import torch.distributed as dist
from dist_common import LOCAL_RANK, RANK, WS, data, init, ok, same

CHECKS = {
    "collectives": collectives.check_collectives,
    "functional": collectives.check_functional,
    "streams": collectives.check_streams,
    "errors": errors.check_errors,
    "one_rank_fails": errors.check_one_rank_fails,
    "ddp": training.check_ddp,
    "dtensor": training.check_dtensor,
    "fsdp": training.check_fsdp,
}
job_fault, job_cuda_compat = training.job_fault, training.job_cuda_compat


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
        CHECKS[name](dev, cpu) if name in (
            "collectives",
            "functional",
            "streams",
            "errors",
            "one_rank_fails",
        ) else CHECKS[name](dev)
    dist.barrier()
    dist.destroy_process_group()
    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
