"""More than one machine: two torchrun agents (--nnodes 2, static rendezvous, one
process each), as two hosts would start them, here both on 127.0.0.1. DDP trains on
neuron over the c10d backend neuron (Gloo's TCP transport between the nodes) and ends
with the parameters of the same training on the CPU over both nodes' data."""

import json
import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
JOB = os.path.join(os.path.dirname(__file__), "multinode_job.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_static_rendezvous_ddp():
    port = _free_port()
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCHNEURON_"))}
    agents = [
        subprocess.Popen(
            [torchrun, "--nnodes", "2", "--node_rank", str(n), "--nproc_per_node", "1"]
            + ["--rdzv_backend", "static", "--master_addr", "127.0.0.1"]
            + ["--master_port", str(port), JOB],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in (0, 1)
    ]
    outs = [a.communicate(timeout=300) for a in agents]
    for a, (out, err) in zip(agents, outs):
        assert a.returncode == 0, err[-4000:]
    res = [
        json.loads(ln[7:]) for out, _ in outs for ln in out.splitlines() if ln.startswith("RESULT ")
    ]
    assert sorted((r["rank"], r["group_rank"]) for r in res) == [(0, "0"), (1, "1")]
    for r in res:
        assert r["world"] == 2 and r["device"] == r["param_device"] == "neuron:0"
        assert r["max_err"] < 1e-5
