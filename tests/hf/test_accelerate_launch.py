"""`accelerate launch --num_processes 2` on a machine with torchneuron: MULTI_NEURON with
the c10d backend neuron, each process on neuron:LOCAL_RANK, gather/reduce/gather_object
give the values of both ranks (on the device), gather/gather_for_metrics of a 2-D tensor too
(accelerate gathers into a flat output) and pad_across_processes."""

import json
import os
import subprocess
import sys

import pytest
from hf_jobs import ACCELERATE

pytestmark = pytest.mark.slow


def test_accelerate_launch_two_processes(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(ACCELERATE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCHNEURON_"))}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))  # no user accelerate config
    accelerate = os.path.join(os.path.dirname(sys.executable), "accelerate")
    p = subprocess.run(
        [accelerate, "launch", "--num_processes", "2", "--main_process_port", "0", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    files = sorted(tmp_path.glob("result*.json"))  # one per rank (cwd is tmp_path)
    res = [json.loads(f.read_text()) for f in files]
    assert len(res) == 2, p.stdout
    for r in res:
        assert r["type"] == "DistributedType.MULTI_NEURON" and r["backend"] == "neuron"
        assert r["n"] == 2
        assert r["device"] == f"neuron:{r['local_rank']}" == r["gather_dev"]
        assert r["gather"] == [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]
        assert r["reduce"] == [10.0, 12.0, 14.0]
        assert r["objs"] == [{"rank": 0}, {"rank": 1}]
        rows = [[100.0 * k + 3 * i + j for j in range(3)] for k in range(2) for i in range(2)]
        assert r["gather2d"] == rows and r["metrics"] == rows
        assert r["pad"] == ([1, 0] if r["local_rank"] == "0" else [1, 2])
    assert sorted(r["local_rank"] for r in res) == ["0", "1"]
