"""uint8 constants in compiled graphs (passes/legalize/uint8_constants.py, passes/legalize/empty_results.py)
against the CPU: torch-mlir's ``ui8`` literal does not legalize, so these failed to
compile, and ``sort``/``gather`` of an empty uint8 tensor aborted the process."""

import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401

_U8 = torch.tensor([[0, 1, 7, 200, 255], [3, 128, 9, 64, 2]], dtype=torch.uint8)


def _run(f, *xs):
    out = torch.compile(f, backend="neuron", fullgraph=True)(*(x.to("neuron") for x in xs))
    ref = f(*xs)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape and torch.equal(o.cpu(), r), (o, r)


def test_uint8_fills_match_cpu():
    _run(
        lambda a: (
            torch.zeros_like(a),
            torch.ones_like(a),
            torch.full_like(a, 255),
            torch.full_like(a, 2.7),
            torch.full_like(a, -1),
            a.clone().fill_(200),
            a.clone().zero_(),
            a.new_full((3,), 128),
            a + torch.ones_like(a),
            a * torch.full_like(a, 2),
        ),
        _U8,
    )


def test_uint8_conversions_of_constants_match_cpu():
    """A conversion to uint8 of a value known at compile time (torch-mlir folds it into
    a ui8 literal where it is an output): the CPU's wraparound (300 -> 44) and float
    truncation (200.7 -> 200)."""

    def f(a):
        d = a.device
        return (
            torch.full_like(a, 300, dtype=torch.int32).to(torch.uint8),
            torch.full_like(a, 200.7, dtype=torch.float32).to(torch.uint8),
            torch.full((5,), 7, dtype=torch.int32, device=d).to(torch.uint8),
            a < torch.tensor(-5, device=d),
            torch.arange(5, device=d).to(torch.uint8) * a,
        )

    _run(f, _U8)


def test_empty_uint8_results_compile_and_match_cpu(run_py):
    """sort/gather of an empty uint8 tensor aborted the process (SIGABRT in torch-mlir),
    stack/scatter/indexing/gcd of one failed to compile. In a child process, so an abort
    fails only this test."""
    run_py(
        """
        import torch, torchneuron

        def f(a, b):
            i = torch.zeros(0, 2, dtype=torch.int64, device=a.device)
            return (a.sort(1), a.gather(1, i), torch.stack([a, b]), a.scatter(1, i, b[:, :2]),
                    a.scatter_add(1, i, b[:, :2]), a[:, torch.tensor([-1, 0], device=a.device)],
                    torch.zeros_like(a), a.argsort(0), torch.cat([a, b], 0))

        a = torch.tensor([[1, 2, 3, 4, 5]], dtype=torch.uint8)[:0]
        b = a.clone()
        out = torch.compile(f, backend="neuron", fullgraph=True)(a.to("neuron"), b.to("neuron"))
        flat = lambda t: [t] if isinstance(t, torch.Tensor) else [y for x in t for y in flat(x)]
        for o, r in zip(flat(out), flat(f(a, b)), strict=True):
            assert o.dtype == r.dtype and o.shape == r.shape and torch.equal(o.cpu(), r), (o, r)
        print("ok")
    """,
        timeout=240,
    )
