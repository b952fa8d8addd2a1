"""Child-process programs of the Hugging Face tests: plain transformers/accelerate
scripts, as a user writes them (no torchneuron import: the stack finds the device
through ``find_spec("torch_neuronx")``). Each prints one JSON line prefixed RESULT."""

# A tiny randomly initialised BERT classifier trained a few steps with Trainer.
# TRAINER % dict(use_cpu=..., compile=..., out=..., max_steps=..., resume=..., save_steps=...,
# dropout=...)
TRAINER = r"""
import json, os, torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

class Data(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, 100, (32, 16), generator=g)
        self.labels = (self.ids[:, 0] > 50).long()
    def __len__(self):
        return len(self.ids)
    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(16, dtype=torch.long),
                "labels": self.labels[i]}

torch.manual_seed(0)
cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=32, num_labels=2,
                 hidden_dropout_prob=%(dropout)s, attention_probs_dropout_prob=%(dropout)s)
model = BertForSequenceClassification(cfg)
args = TrainingArguments(output_dir=%(out)r, per_device_train_batch_size=4, max_steps=%(max_steps)d,
                         logging_steps=1, save_steps=%(save_steps)d, save_strategy="steps",
                         report_to=[], use_cpu=%(use_cpu)s, torch_compile=%(compile)s,
                         learning_rate=1e-3, seed=0, disable_tqdm=True)
trainer = Trainer(model=model, args=args, train_dataset=Data())
trainer.train(resume_from_checkpoint=%(resume)r)
losses = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
print("RESULT " + json.dumps({
    "device": str(args.device), "param_device": str(next(trainer.model.parameters()).device),
    "backend": args.torch_compile_backend, "losses": losses,
    "fallbacks": sorted(torch.neuron.fallback_stats()) if args.device.type == "neuron" else [],
    "graphs": len(torch.neuron.get_dynamo_metrics()) if %(compile)s else 0,
}))
"""


def result(stdout: str) -> dict:
    import json

    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no RESULT line in:\n{stdout}"
    return json.loads(lines[-1][len("RESULT ") :])


# Run by `accelerate launch --num_processes 2`: the state, the device, and collectives.
ACCELERATE = r"""
import json, os, torch
from accelerate import Accelerator
from accelerate.utils import gather, gather_object, reduce
acc = Accelerator()
st = acc.state
r = st.process_index
x = torch.arange(3, dtype=torch.float32, device=acc.device) + 10 * r
g = gather(x)
s = reduce(x, reduction="sum")
objs = gather_object([{"rank": r}])
m = torch.arange(6, dtype=torch.float32, device=acc.device).reshape(2, 3) + 100 * r
g2 = gather(m)  # all_gather_into_tensor into a flat output
gm = acc.gather_for_metrics(m)
pad = acc.pad_across_processes(torch.arange(r + 1, device=acc.device) + 1)
# a file per rank: two processes printing to one pipe can interleave within a line
open(f"result{os.environ.get('LOCAL_RANK')}.json", "w").write(json.dumps({"type": str(st.distributed_type), "device": str(acc.device),
      "local_rank": os.environ.get("LOCAL_RANK"), "backend": st.backend, "n": st.num_processes,
      "gather": g.cpu().tolist(), "gather_dev": str(g.device), "reduce": s.cpu().tolist(),
      "objs": objs, "gather2d": g2.cpu().tolist(), "metrics": gm.cpu().tolist(),
      "pad": pad.cpu().tolist()}))
"""


# generate with the static cache on neuron (transformers compiles the decoding step with
# backend neuron, dynamic=False): 4 then 8 new tokens; greedy tokens of the CPU run.
GENERATE_STATIC = r"""import json, torch
from torch._dynamo.utils import counters
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
model = LlamaForCausalLM(cfg).eval()
ids = torch.randint(0, 128, (1, 5), generator=torch.Generator().manual_seed(1))
ref = model.generate(ids, max_new_tokens=8, do_sample=False, cache_implementation="static")
m = model.to("neuron")
out1 = m.generate(ids.to("neuron"), max_new_tokens=4, do_sample=False, cache_implementation="static")
n1 = len(torch.neuron.get_dynamo_metrics())
out2 = m.generate(ids.to("neuron"), max_new_tokens=8, do_sample=False, cache_implementation="static")
n2 = len(torch.neuron.get_dynamo_metrics())
print("RESULT " + json.dumps({"n1": n1, "n2": n2, "ref": ref.tolist(), "out2": out2.cpu().tolist(),
  "out1": out1.cpu().tolist(), "unique_graphs": counters["stats"]["unique_graphs"], "fallbacks": sorted(torch.neuron.fallback_stats())}))
"""


# accelerate's save_state/load_state keep the neuron generators (torch.neuron.get_rng_state_all):
# the draws after load_state repeat those after save_state.
ACCELERATE_RNG = r"""
import json, torch
from accelerate import Accelerator
acc = Accelerator()
model = acc.prepare(torch.nn.Linear(4, 4))
torch.manual_seed(3)
torch.rand(5, device=acc.device)
acc.save_state(%(out)r)
after_save = torch.nn.functional.dropout(torch.ones(64, device=acc.device), 0.5).cpu()
more = torch.rand(7, device=acc.device).cpu()
acc.load_state(%(out)r)
after_load = torch.nn.functional.dropout(torch.ones(64, device=acc.device), 0.5).cpu()
import pickle, glob
states = torch.load(glob.glob(%(out)r + "/random_states_0.pkl")[0], weights_only=False)
print("RESULT " + json.dumps({"device": str(acc.device), "same": bool(torch.equal(after_save, after_load)),
    "differs_from_next": not torch.equal(after_save, more[:1].expand(64)),
    "keys": sorted(states)}))
"""
