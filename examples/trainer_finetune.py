"""Fine-tune all-MiniLM-L6-v2 (real weights) with Hugging Face Trainer; it trains on
`neuron` without naming it: transformers finds the device through `torch_neuronx`.

The task, built from torchneuron's sample sentences: tell a sentence from the same
words shuffled (label 1: original). Prints the device, the loss and the held-out
accuracy before and after, and the operators that fell back to the CPU (none).

    python examples/trainer_finetune.py [--compile]
"""

import random
import sys

import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    Trainer,
    TrainingArguments,
)

from torchneuron.models import minilm_path, sentences


def pairs(texts, seed):
    rng, out = random.Random(seed), []
    for t in texts:
        words = t.split()
        shuffled = words[:]
        while shuffled == words:
            rng.shuffle(shuffled)
        out += [(t, 1), (" ".join(shuffled), 0)]
    return out


class Pairs(torch.utils.data.Dataset):
    def __init__(self, items, tok):
        self.enc = tok([t for t, _ in items], padding="max_length", max_length=32, truncation=True)
        self.labels = [y for _, y in items]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        item = {k: torch.tensor(v[i]) for k, v in self.enc.items()}
        item["labels"] = torch.tensor(self.labels[i])
        return item


def accuracy(trainer, data):
    pred = trainer.predict(data)
    return float((pred.predictions.argmax(-1) == pred.label_ids).mean())


texts = sentences()
tok = AutoTokenizer.from_pretrained(minilm_path())
train = Pairs(pairs(texts[:18], seed=0) * 4, tok)
held_out = Pairs(pairs(texts[18:], seed=1), tok)
torch.manual_seed(0)
model = AutoModelForSequenceClassification.from_pretrained(minilm_path(), num_labels=2)
args = TrainingArguments(
    output_dir="/tmp/trainer_finetune",
    per_device_train_batch_size=8,
    num_train_epochs=3,
    learning_rate=5e-5,
    logging_steps=9,
    save_strategy="no",
    report_to=[],
    torch_compile="--compile" in sys.argv,
    disable_tqdm=True,
)
trainer = Trainer(model=model, args=args, train_dataset=train)
print(f"device: {args.device}, compile backend: {args.torch_compile_backend}")
before = accuracy(trainer, held_out)
result = trainer.train()
after = accuracy(trainer, held_out)
print(f"train loss {result.training_loss:.3f}; held-out accuracy {before:.2f} -> {after:.2f}")
print(f"CPU fallbacks: {torch.neuron.fallback_stats() or 'none'}")
