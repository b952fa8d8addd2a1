"""A crash inside torch-mlir's lowering is a NeuronCompileError, not the end of the process
(lowering_isolation.py); reductions of a 0-dim tensor along dim 0 compile and match the CPU
(passes/zero_dim_reductions.py: with keepdim=True they crashed torch-mlir, SIGSEGV)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401
from conftest import run_python

import torchneuron  # noqa: F401

REDUCTIONS = {
    "sum": lambda a: a.sum(0, keepdim=True),
    "mean": lambda a: a.mean(0, keepdim=True),
    "amax": lambda a: a.amax(0, keepdim=True),
    "amin": lambda a: a.amin(-1, keepdim=True),
    "argmax": lambda a: a.argmax(0, keepdim=True),
    "argmin": lambda a: a.argmin(0, keepdim=True),
    "logsumexp": lambda a: a.logsumexp(0, keepdim=True),
    "nansum": lambda a: a.nansum(0, keepdim=True),
    "nanmean": lambda a: a.nanmean(0, keepdim=True),
    "masked.sum": lambda a: torch.masked.sum(a, 0, keepdim=True, mask=a > 0),
    "masked.amax": lambda a: torch.masked.amax(a, 0, keepdim=True, mask=a > 0),
    "max dim": lambda a: a.max(0, keepdim=True),
    "var": lambda a: a.var(0, keepdim=True, correction=0),
    "all": lambda a: a.all(0),
    "any": lambda a: (a > 3).any(0),
    "cumsum": lambda a: a.cumsum(0),
    "sum no keepdim": lambda a: a.sum(0),
    # full reductions with keepdim (amax's backward sums this way): crashed too
    "sum all keepdim": lambda a: torch.ops.aten.sum.dim_IntList(a, [], True),
    "sum None keepdim": lambda a: torch.ops.aten.sum.dim_IntList(a, None, True),
    "amax all keepdim": lambda a: a.amax([], keepdim=True),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_zero_dim_reduction_matches_cpu(name):
    f = REDUCTIONS[name]
    x = torch.tensor(2.5)
    got = torch.compile(f, backend="neuron")(x.to("neuron"))
    want = f(x)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, equal_nan=True)


def test_crash_in_lowering_is_an_error_and_the_process_lives(tmp_path):
    # the known crash with its fix taken out: torch-mlir dies on sum(0-dim, 0, keepdim)
    proc = run_python(
        """
        import torch, torchneuron
        from torchneuron.compiler import passes
        from torchneuron.compiler.errors import NeuronCompileError
        passes.PIPELINE = tuple(p for p in passes.PIPELINE if p.__name__ != "zero_dim_reductions")
        x = torch.tensor(2.5, device="neuron")
        try:
            torch.compile(lambda a: a.sum(0, keepdim=True), backend="neuron")(x)
        except Exception as e:
            err = getattr(e, "inner_exception", e)  # Dynamo's BackendCompilerFailed
            assert isinstance(err, NeuronCompileError), repr(e)
            print("OP", err.op, "STAGE", err.stage)
            print("MSG", str(err).splitlines()[0])
        # the process still compiles and runs
        print("AFTER", torch.compile(lambda a: a * 3, backend="neuron")(x).cpu().item())
        """,
        env={"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)},
        timeout=300,
    )
    out = proc.stdout
    assert "OP aten.sum.dim_IntList STAGE lowering" in out, proc.stdout + proc.stderr
    assert "SIGSEGV" in out
    assert "AFTER 7.5" in out
