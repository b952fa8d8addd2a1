"""XLA:CPU (jaxlib, the engine behind torchneuron/compiler/neuron_cc.py) vs IREE
(`iree-base-compiler`/`iree-base-runtime` 3.13, llvm-cpu backend, local-task driver)
on the same StableHLO: what our lowering produces for all-MiniLM-L6-v2 (batch 32), a
GPT-2 block and the small ResNet (the models of bench_compile.py).

Per model and engine: compile time (s, StableHLO text -> loaded executable, one cold
compile each) and steady-state latency (median of --iters calls, ms, inputs already
in the engine's buffers, outputs back on the host); ratios IREE/XLA (< 1: IREE
better); and the largest absolute difference between the two engines' outputs on
the model's real inputs and weights. Iterations of the two engines alternate.

IREE is not a dependency of the project: install it outside the venv, e.g.
`pip install --target /tmp/iree-pkgs iree-base-compiler==3.13.* iree-base-runtime==3.13.*`
and run with `PYTHONPATH=/tmp/iree-pkgs .venv/bin/python bench/bench_engines.py`.
Exits 2, saying so, when IREE is not importable.
"""

from __future__ import annotations

import argparse
import copy
import glob
import os
import statistics
import sys
import tempfile
import time
import warnings

PIP = "pip install iree-base-compiler==3.13.* iree-base-runtime==3.13.*"


def _need_iree():
    try:
        import iree.compiler  # noqa: F401
        import iree.runtime  # noqa: F401
    except ImportError as e:
        print(
            f"bench_engines: IREE is not importable ({e}). Install it, e.g. "
            f"`{PIP.replace('pip install', 'pip install --target /tmp/iree-pkgs')}`, "
            "and run with PYTHONPATH=/tmp/iree-pkgs (not into the shared .venv)",
            file=sys.stderr,
        )
        sys.exit(2)


def _lowered(name, model, inputs):
    """(StableHLO text, [numpy inputs in the executable's order]) of the model's graph."""
    import numpy as np
    import torch

    from torchneuron.compiler import executable

    seen = {}
    orig = executable.CompiledGraph.__call__

    def spy(self, args):
        seen[self.name] = (self, list(args))
        return orig(self, args)

    dbg = tempfile.mkdtemp(prefix="bench_engines_")
    os.environ["TORCH_NEURONX_DEBUG_DIR"] = dbg
    os.environ["TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"] = "1"
    executable.CompiledGraph.__call__ = spy
    try:
        torch._dynamo.reset()
        m = copy.deepcopy(model).to("neuron")
        with torch.no_grad():
            torch.compile(m, backend="neuron", options={"model_name": name})(
                **{k: v.to("neuron") for k, v in inputs.items()}
            )
        torch.neuron.synchronize()
    finally:
        executable.CompiledGraph.__call__ = orig
        del os.environ["TORCH_NEURONX_DEBUG_DIR"]
    if len(seen) != 1:
        raise RuntimeError(f"{name}: expected one compiled graph, got {sorted(seen)}")
    ((gname, (cg, args)),) = seen.items()
    if any(src[0] != "arg" for src in cg.plan.inputs):
        raise RuntimeError(f"{name}: graph has non-argument inputs (random ops)")
    ins = [np.ascontiguousarray(args[i].detach().cpu().numpy()) for _, i in cg.plan.inputs]
    from torchneuron.compiler import artifacts

    (path,) = glob.glob(os.path.join(dbg, "run_*", artifacts.folder_name(gname), "stablehlo.mlir"))
    with open(path) as f:
        return f.read(), ins


class _Xla:
    name = "XLA:CPU"

    def __init__(self, text, ins):
        from torchneuron.compiler import neuron_cc

        t0 = time.perf_counter()
        self.exe = neuron_cc.compile(text, "trn2", 2, 2, [])
        self.compile_s = time.perf_counter() - t0
        self.ins = [neuron_cc.host_view(a) for a in ins]

    def __call__(self):
        return self.exe.execute(self.ins)  # numpy arrays over XLA's result buffers


class _Iree:
    name = "IREE"

    def __init__(self, text, ins):
        import iree.compiler as ic
        import iree.runtime as ir

        t0 = time.perf_counter()
        vmfb = ic.compile_str(
            text,
            target_backends=["llvm-cpu"],
            input_type="stablehlo",
            extra_args=["--iree-llvmcpu-target-cpu=host"],
        )
        cfg = ir.Config("local-task")
        ctx = ir.SystemContext(config=cfg)
        ctx.add_vm_module(ir.VmModule.copy_buffer(ctx.instance, vmfb))
        self.fn = ctx.modules.module["main"]
        self.compile_s = time.perf_counter() - t0
        self.ins = [ir.asdevicearray(cfg.device, a) for a in ins]

    def __call__(self):
        out = self.fn(*self.ins)
        out = out if isinstance(out, (list, tuple)) else [out]
        return [o.to_host() for o in out]


def bench_one(name, model, inputs, iters):
    import numpy as np

    text, ins = _lowered(name, model, inputs)
    engines = [_Xla(text, ins), _Iree(text, ins)]
    outs = [e() for e in engines]
    diff = max(
        float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
        for a, b in zip(*outs)
    )
    times = [[] for _ in engines]
    for i in range(iters + 2):
        for k, e in enumerate(engines):
            t0 = time.perf_counter()
            e()
            if i >= 2:
                times[k].append(time.perf_counter() - t0)
    med = [statistics.median(t) * 1e3 for t in times]
    x, r = engines
    print(f"\n== {name} ({len(ins)} inputs)")
    print(
        f"compile s: XLA:CPU {x.compile_s:.2f}, IREE {r.compile_s:.2f}; IREE/XLA "
        f"{r.compile_s / x.compile_s:.2f}"
    )
    print(
        f"latency ms (median of {iters}): XLA:CPU {med[0]:.2f}, IREE {med[1]:.2f}; "
        f"IREE/XLA {med[1] / med[0]:.2f}"
    )
    print(f"max |IREE - XLA| over outputs: {diff:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--only", default="minilm,gpt2_block,resnet")
    a = ap.parse_args()
    _need_iree()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_compile  # noqa: E402  (sets the NEFF cache folder; loads torchneuron)

    warnings.simplefilter("ignore")
    print(f"load average {os.getloadavg()}")
    for name, (model, inputs) in bench_compile._models(a.only.split(",")).items():
        bench_one(name, model, inputs, a.iters)


if __name__ == "__main__":
    main()
