"""Warm starts in a new process (issue 24): the first compiled call of a fresh Python
process with an empty NEFF cache (cold) and with the cache the cold run left (warm), for
all-MiniLM-L6-v2 (real weights, batch 32) and a 4-layer GPT-2 (128 wide, batch 8 x 64).

Each measurement is a child interpreter (``python bench/bench_warm_start.py --child M``)
that imports torch and torchneuron, builds the model, then times its first compiled call
(``torch.compile(model, backend="neuron")``, inference under no_grad) and prints where the
time went: Dynamo's bytecode tracing, AOTAutograd's tracing, the backend (passes, lowering,
compile or cache read). Prints cold, warm and the ratio cold/warm (target >= 10), the median
of ``--repeats`` child pairs. Run: `.venv/bin/python bench/bench_warm_start.py`; with
`TORCHNEURON_AOT_CACHE=1` in the environment the warm child skips AOTAutograd's trace
(compiler/aot_cache.py). The children import this checkout's torchneuron.

``--aot-compile``: the warm start through PyTorch's AOT compile instead (docs/compile.md):
after the cold child, a child compiles ``_forward`` with
``torch.compile(..., fullgraph=True).aot_compile()`` and saves it with
``save_compiled_function``; the warm child loads it with
``torch.compiler.load_compiled_function`` (no Dynamo or AOTAutograd trace) and times
loading plus the first call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _model(name):
    import torch

    from torchneuron import models

    if name == "minilm":
        return models.minilm(batch_size=32)
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=4, n_head=4, n_embd=128, vocab_size=1000, n_positions=128)
    ids = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(0))
    return GPT2Model(cfg).eval(), {"input_ids": ids}


def _forward(model, **inputs):
    """What ``--aot-compile`` compiles: the model's first output (a tensor; PyTorch 2.13
    cannot save a function that returns GPT-2's ModelOutput)."""
    out = model(**inputs)
    return out if hasattr(out, "shape") else out[0]


def child(name: str, mode: str = "plain", artifact: str = "") -> None:
    import warnings

    warnings.simplefilter("ignore")
    import torch

    import torchneuron  # noqa: F401

    model, inputs = _model(name)
    model.to("neuron")
    dev = {k: v.to("neuron") for k, v in inputs.items()}
    torch.neuron.synchronize()
    torch._dynamo.config.enable_aot_compile = True
    t0 = time.perf_counter()
    with torch.no_grad():
        if mode == "aot_save":
            comp = torch.compile(
                _forward,
                backend="neuron",
                fullgraph=True,
                options={"guard_filter_fn": torch.compiler.keep_portable_guards_unsafe},
            ).aot_compile(((model,), dev))
            comp.save_compiled_function(artifact)
        elif mode == "aot_load":
            with open(artifact, "rb") as f:
                comp = torch.compiler.load_compiled_function(f)
            comp(model, **dev)
        else:
            torch.compile(model, backend="neuron")(**dev)
    torch.neuron.synchronize()
    first = time.perf_counter() - t0
    times = torch._dynamo.utils.compile_times(repr="csv")
    names, vals = times[0], times[1]
    phase = dict(zip(names, vals))

    def sec(k):
        v = phase.get(k)
        return float(str(v).split(",")[0]) if v not in (None, "") else 0.0

    recs = torch.neuron.get_dynamo_metrics()
    backend = sum(r["fx_passes_us"] + r["lower_us"] + r["compile_us"] for r in recs) * 1e-6
    print(
        json.dumps(
            {
                "first": first,
                "dynamo_total": sec("_compile.compile_inner"),
                "user_compiler": sec("OutputGraph.call_user_compiler"),
                "backend": backend,
                "cache": sorted({r["cache"] for r in recs}),
                "aot_hits": int(torch._dynamo.utils.counters["aot_autograd"]["autograd_cache_hit"]),
            }
        )
    )


def _run(name: str, cache_dir: str, mode: str = "plain") -> dict:
    # the child imports this checkout's torchneuron (its sys.path[0] is bench/; an editable
    # install may point at another one)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=cache_dir, PYTHONPATH=path)
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            name,
            "--mode",
            mode,
            "--artifact",
            os.path.join(cache_dir, f"{name}.pt2"),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child")
    ap.add_argument("--only", default="minilm,gpt2_4l")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--aot-compile", action="store_true", help="warm = a saved AOT compile")
    ap.add_argument("--mode", default="plain", help=argparse.SUPPRESS)
    ap.add_argument("--artifact", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.mode, a.artifact)
        return
    print(f"load average {os.getloadavg()}")
    for name in a.only.split(","):
        cold, warm = [], []
        for _ in range(a.repeats):
            d = tempfile.mkdtemp(prefix="bench_warm_")
            cold.append(_run(name, d))
            if a.aot_compile:
                _run(name, d, "aot_save")
            warm.append(_run(name, d, "aot_load" if a.aot_compile else "plain"))
        c = statistics.median(r["first"] for r in cold)
        w = statistics.median(r["first"] for r in warm)
        how = "loaded AOT compile" if a.aot_compile else "warm"
        print(
            f"\n== {name}: first call s, cold {c:.2f}, {how} {w:.2f}: {c / w:.1f}x (target >= 10)"
        )
        for label, rs in (("cold", cold), ("warm", warm)):
            r = rs[len(rs) // 2]
            print(
                f"  {label}: Dynamo compile {r['dynamo_total']:.2f} s, of it AOTAutograd + "
                f"backend {r['user_compiler']:.2f} s, of it backend {r['backend']:.2f} s; "
                f"cache {r['cache']}, AOTAutogradCache hits {r.get('aot_hits')}"
            )


if __name__ == "__main__":
    main()
