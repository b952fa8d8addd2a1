"""The compile-path op sweep: each op compiled (backend ``neuron``) against the same op on
the CPU, over dtypes and input kinds (special values, non-contiguous, empty). The cases
(dtype groups, inputs, the op table) are in compile_sweep_cases.py; this is the runner.

Used by tests/compile/test_op_sweep.py: a fast subset in ``make test``, the whole table
behind ``make test-compile-sweep`` (marker ``compile_sweep``). ``python
tests/compile/compile_sweep.py`` prints the counts. The ops of one (dtype, input kind) are
compiled as one graph (an XLA compile costs about a second), each op's result compared on
its own; a graph that fails to compile is split in halves until the failing ops are
found. Reference: integers and bool exact; floats ``assert_close`` with the tolerances of
the other compile tests (float64 is narrowed to float32 by the 64-bit policy, so it gets
float32's), NaN equal to NaN, and the sign of a zero checked.
"""

from __future__ import annotations

import torch
from compile_sweep_cases import ALL, cases, inputs

import torchneuron  # noqa: F401

# rtol, atol per result dtype (float64: narrowed to float32 arithmetic)
TOL = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.complex64: (1e-5, 1e-5),
}

SIGNED_ZERO = "sign of zero"


# --- running and comparing --------------------------------------------------------------
def _flat(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    res = []
    for o in out:
        res.extend(_flat(o))
    return res


def compare(out, ref, zero_sign=True) -> str | None:
    """None when ``out`` (compiled, on neuron) matches ``ref`` (CPU), else the difference."""
    out, ref = _flat(out), _flat(ref)
    if len(out) != len(ref):
        return f"{len(out)} outputs, CPU {len(ref)}"
    for k, (o, r) in enumerate(zip(out, ref)):
        o = o.cpu()
        if o.dtype != r.dtype or o.shape != r.shape:
            return f"output {k}: {o.dtype}{tuple(o.shape)}, CPU {r.dtype}{tuple(r.shape)}"
        if r.dtype.is_floating_point or r.dtype.is_complex:
            rtol, atol = TOL[r.dtype]
            try:
                torch.testing.assert_close(o, r, rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError as e:
                return f"output {k}: {str(e).splitlines()[2:5]} got {o.flatten()[:16].tolist()} CPU {r.flatten()[:16].tolist()}"
            zero = (r == 0) & (o == 0)
            if (
                zero_sign
                and r.dtype.is_floating_point
                and not torch.equal(torch.signbit(o[zero]), torch.signbit(r[zero]))
            ):
                return f"output {k}: {SIGNED_ZERO} differs: got {o.flatten().tolist()} CPU {r.flatten().tolist()}"
        elif not torch.equal(o, r):
            return f"output {k}: got {o.flatten()[:16].tolist()} CPU {r.flatten()[:16].tolist()}"
    return None


def _compile_group(ops, x, y):
    """Compiled results of ``ops`` on neuron x, y in one graph; raises if it fails."""
    torch._dynamo.reset()
    fns = [op.fn for op in ops]

    def f(a, b):
        return [fn(a, b) for fn in fns]

    return torch.compile(f, backend="neuron", fullgraph=True)(x.to("neuron"), y.to("neuron"))


_WIDE = (torch.float64, torch.int64)


def _narrowed(x, y, ref) -> bool:
    return x.dtype in _WIDE or any(r.dtype in _WIDE for r in _flat(ref))


def run_group(ops, x, y, results: dict):
    """Compiles ``ops`` together; on failure splits them. Fills ``results[name]`` with
    None (match), a difference string, or ``("compile", error)``. Where a 64-bit value
    is involved and the CPU differs, eager neuron is the reference (the 64-bit policy
    narrows both alike: float64 ``exp(100.)`` is inf in both)."""
    try:
        outs = _compile_group(ops, x, y)
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001  (the failing ops are looked for below)
        if len(ops) == 1:
            results[ops[0].name] = (
                "compile",
                f"{type(e).__name__}: {str(e).splitlines()[0][:300]}",
            )
            return
        h = len(ops) // 2
        run_group(ops[:h], x, y, results)
        run_group(ops[h:], x, y, results)
        return
    for op, out in zip(ops, outs):
        ref = op.fn(x, y)
        diff = compare(out, ref, op.zero_sign)
        if diff is not None and _narrowed(x, y, ref):
            eager = op.fn(x.to("neuron"), y.to("neuron"))
            if compare(out, [e.cpu() for e in _flat(eager)], op.zero_sign) is None:
                diff = None
        results[op.name] = diff


def sweep(dtype, kind, names=None) -> dict:
    x, y = inputs(dtype, kind)
    results = {}
    ops = cases(dtype, kind, names)
    if ops:
        run_group(ops, x, y, results)
    return results


if __name__ == "__main__":
    import sys
    import time

    kinds = sys.argv[1:] or ["plain", "strided", "empty"]
    total = bad = 0
    for kind in kinds:
        for dt in ALL:
            t = time.time()
            r = sweep(dt, kind)
            total += len(r)
            for n, v in r.items():
                if v is not None:
                    bad += 1
                    print(f"{kind:8s} {str(dt):15s} {n}: {v}", flush=True)
            print(f"# {kind} {dt}: {len(r)} ops, {time.time() - t:.1f}s", flush=True)
    print(f"# {total} cases, {bad} differ")
