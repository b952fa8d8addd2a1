"""Both tools on MiniLM (all-MiniLM-L6-v2, real weights, batch 8): torch.profiler
with the NeuronCore's device activity, and a memory snapshot read by PyTorch's
own memory visualizer. Writes, into the folder given (default docs/):
  minilm_trace.json          Chrome trace (open in https://ui.perfetto.dev)
  minilm_timeline.png        one steady-state iteration: host dispatch, streams
  minilm_memory.pickle       torch.neuron.memory._dump_snapshot
  minilm_memory.html         torch.cuda._memory_viz.trace_plot of it
and prints the top operators by self device time.

Run: .venv/bin/python examples/profile_minilm.py [OUT_DIR]
"""

import os
import pickle
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from torch.cuda import _memory_viz  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

import torchneuron  # noqa: E402,F401
from torchneuron.check.phases import profile as check_profile  # noqa: E402
from torchneuron.check.report.profile_html import plot_timeline  # noqa: E402
from torchneuron.models import minilm  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "docs"
os.makedirs(out, exist_ok=True)

torch.neuron.memory._record_memory_history(max_entries=100_000)
model, inputs = minilm(batch_size=8)
model = model.to("neuron").eval()
inputs = {k: v.to("neuron") for k, v in inputs.items()}

# wait 1, warm up 1, record 1: the recorded iteration is a steady-state one.
with profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
    schedule=schedule(wait=1, warmup=1, active=1),
) as prof:
    for _ in range(3):
        with record_function("forward"), torch.no_grad():
            model(**inputs)
            torch.neuron.synchronize()
        prof.step()

print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12))
prof.export_chrome_trace(os.path.join(out, "minilm_trace.json"))
plot_timeline(check_profile.summarize(prof), os.path.join(out, "minilm_timeline.png"))

torch.neuron.memory._dump_snapshot(os.path.join(out, "minilm_memory.pickle"))
torch.neuron.memory._record_memory_history(enabled=None)
with open(os.path.join(out, "minilm_memory.pickle"), "rb") as f:
    snapshot = pickle.load(f)
print(_memory_viz.segsum(snapshot).splitlines()[0:4])
with open(os.path.join(out, "minilm_memory.html"), "w") as f:
    f.write(_memory_viz.trace_plot(snapshot))
print("written to", out)
