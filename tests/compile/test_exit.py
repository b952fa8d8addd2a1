"""Compiled graphs launched while the interpreter exits (csrc/aten/compiled_launch.h,
python_module.cpp's python_kernel). A compiled kernel is Python code run on the stream's
worker thread; CPython ends a thread that takes the GIL once finalization has begun, and
the process aborted ("FATAL: exception not rethrown", or "terminate called without an
active exception" when it was ended inside XLA's or torch's own GIL release). Each case
runs in a child process and asserts a clean exit and the launch's outcome."""

from conftest import run_python

_ABORTS = ("terminate called", "FATAL", "Aborted")


def _clean(proc):
    assert proc.returncode == 0 and not any(a in proc.stderr for a in _ABORTS), (
        f"rc={proc.returncode}\n--- stderr\n{proc.stderr[-3000:]}"
    )


def test_launch_from_a_late_atexit_handler_finishes_before_finalization(tmp_path):
    """An atexit handler registered before torchneuron's import runs after its exit
    drains; its launch, queued behind eager work, was still pending when the interpreter
    finalized (aborted 6 times in 6). It now waits for its kernel."""
    code = """
    import atexit

    def late():
        b = big
        for _ in range(3):
            b = b @ big          # keeps the stream busy
        y = f(x)                 # not waited for by the caller
        done = torch.neuron.current_stream().query()
        ok = torch.equal(y.cpu(), (x.cpu() * 2).relu())
        print("late", done, ok, flush=True)

    atexit.register(late)        # before the import: runs after torchneuron's drains
    import torch, torchneuron
    f = torch.compile(lambda a: (a * 2).relu(), backend="neuron")
    x = torch.randn(64, 64, device="neuron")
    big = torch.randn(1024, 1024, device="neuron")
    f(x)
    """
    proc = run_python(code, env={"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}, check=False)
    _clean(proc)
    assert proc.stdout.split() == ["late", "True", "True"]


def test_launch_during_finalization_fails_instead_of_aborting(tmp_path):
    """A ``__del__`` of an object in a reference cycle runs in the final garbage
    collection, after finalization began: the worker took the GIL for its kernel and the
    process aborted (3 in 3). The kernel now fails, reported at the launch's wait."""
    code = """
    import os, sys
    import torch, torchneuron
    f = torch.compile(lambda a: a * 2, backend="neuron")
    x = torch.ones(4, device="neuron")
    f(x)

    class Late:
        def __del__(self, write=os.write, f=f, x=x, finalizing=sys.is_finalizing):
            try:
                f(x)
                write(1, b"returned %d\\n" % finalizing())
            except RuntimeError as e:
                write(1, b"raised %d %s\\n" % (finalizing(), str(e).encode()))

    late = Late()
    late.cycle = late
    del late
    """
    proc = run_python(code, env={"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}, check=False)
    _clean(proc)
    assert proc.stdout.startswith("raised 1 "), proc.stdout
    assert "the Python interpreter is shutting down: compiled graph not run" in proc.stdout
