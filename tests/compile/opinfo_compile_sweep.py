"""The compile path against PyTorch's OpInfo samples (issue 24).

For every OpInfo of ``op_db`` (bar random, uninitialised and sparse ones) and a dtype
the CPU supports, the first samples of ``sample_inputs`` (0-dim, broadcasting,
keyword variants, whatever the OpInfo chose) are compiled with backend ``neuron`` on
neuron tensors and compared with the same call on the CPU. Each (op, dtype) ends in one
outcome:

- ``match``: every sample matched the CPU (assert_close at the dtype's tolerance);
- ``refused``: a ``NeuronCompileError`` named the op it cannot lower (the contract for
  what the compile path does not support);
- ``mismatch``: a compiled result differs from the CPU (a silent error);
- ``error``: anything else raised (a crash of the compile path).

``grad`` runs float32 samples that require grad and compares the gradients of the
sum of the floating outputs too. Used by tests/compile/test_opinfo_compile.py (a subset
in ``make test``) and by ``python tests/compile/opinfo_compile_sweep.py [dtype ...]``
(every case, about a second each: the rates and lists).
"""

from __future__ import annotations

import collections
import dataclasses
import sys

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_unflatten

import torchneuron  # noqa: F401

MAX_SAMPLES = 3
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int64": torch.int64}
# assert_close's defaults for float32; bfloat16: two units in the last place (a
# compiled graph rounds once where ATen's CPU kernels may round per op).
TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (1.6e-2, 1e-2), torch.int64: (0, 0)}
_RANDOM = (
    "rand",
    "normal",
    "bernoulli",
    "multinomial",
    "uniform",
    "dropout",
    "exponential",
    "cauchy",
    "geometric",
    "log_normal",
    "poisson",
    "rrelu",
)
_CPU_ARGS = {"tensor_split"}
_UNINITIALISED = {
    "empty",
    "empty_like",
    "new_empty",
    "new_empty_strided",
    "empty_strided",
    "empty_permuted",
    "resize_",
    "resize_as_",
}


def op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


OPS = {op_id(op): op for op in op_db}


def skip_reason(op) -> str | None:
    if op.name in _UNINITIALISED:
        return "uninitialised result"
    if any(w in op.name for w in _RANDOM):
        return "random"
    if op.name.startswith(("sparse.", "to_sparse")) or "sparse" in (op.variant_test_name or ""):
        return "sparse layout"
    return None


def cases(dtype_names=tuple(DTYPES), grad=True) -> list[tuple[str, str]]:
    """(op id, dtype name or "grad") of every case the CPU supports."""
    out = []
    for oid, op in OPS.items():
        if skip_reason(op):
            continue
        cpu = op.supported_dtypes("cpu")
        out += [(oid, n) for n in dtype_names if DTYPES[n] in cpu]
        if grad and op.supports_autograd and torch.float32 in op.supported_backward_dtypes("cpu"):
            out.append((oid, "grad"))
    return out


@dataclasses.dataclass
class Outcome:
    status: str  # match | refused | mismatch | error | no_samples
    detail: str = ""


def _to_neuron(x):
    """``x`` on neuron with the same storage, strides and offset (as_strided samples
    address the whole storage)."""
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            return x.detach().to("neuron")
        flat = torch.empty(0, dtype=x.dtype).set_(x.detach().untyped_storage())
        t = flat.to("neuron").as_strided(x.size(), x.stride(), x.storage_offset())
        return t.requires_grad_() if x.requires_grad else t
    if isinstance(x, torch.device) and x.type == "cpu" or x == "cpu":
        return "neuron"
    return x


def _as_function(op, sample):
    """(f, tensors): ``f(*tensors)`` makes the sample's call; other leaves are constants."""
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    where = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]

    def f(*ts):
        vals = list(leaves)
        for i, t in zip(where, ts):
            vals[i] = t
        inp, args, kwargs = tree_unflatten(vals, spec)
        return op(inp, *args, **kwargs)

    return f, [leaves[i] for i in where]


def _floating_sum(out):
    ts = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    ts = [t for t in ts if t.is_floating_point() and t.requires_grad]
    return sum(t.sum() for t in ts) if ts else None


def _grads(f, ts):
    out = f(*ts)
    loss = _floating_sum(out)
    inputs = [t for t in ts if t.requires_grad]
    if loss is None or not inputs:
        return None
    return torch.autograd.grad(loss, inputs, allow_unused=True)


def _refusal(e: BaseException) -> str | None:
    """The op a NeuronCompileError names, else None."""
    while e is not None:
        if type(e).__name__ == "NeuronCompileError":
            if getattr(e, "op", None):
                return str(e.op)
            msg = str(e)
            i = msg.find("aten")
            return msg[i : i + 80].split()[0].rstrip(",") if i >= 0 else msg[:80]
        e = getattr(e, "inner_exception", None) or e.__cause__
    return None


def _compare(got, ref, dtype) -> str | None:
    got = [g.detach().cpu() if isinstance(g, torch.Tensor) else g for g in tree_flatten(got)[0]]
    ref = [r.detach() if isinstance(r, torch.Tensor) else r for r in tree_flatten(ref)[0]]
    for g, r in zip(got, ref):  # the tolerance of each result's dtype (int64 sin: float)
        rtol, atol = TOL.get(r.dtype if isinstance(r, torch.Tensor) else dtype, (1e-5, 1e-5))
        try:
            torch.testing.assert_close(g, r, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            return str(e).strip().splitlines()[0][:200]
    if len(got) != len(ref):
        return f"{len(got)} results, the CPU gives {len(ref)}"
    return None


# (values, indices) ops whose index among tied values is left open by PyTorch ("not
# necessarily the first occurrence"; ATen's CPU quickselect picks one): the position of
# (dim, keepdim) in their arguments, with the defaults.
_TIED_INDICES = {"kthvalue": 1, "median": 0, "nanmedian": 0, "mode": 0, "topk": 1, "sort": 0}
_TIED_INDICES |= {"argsort": 0}  # (sort/argsort: stable=False leaves ties' order open)


def _tied_indices_ok(op, sample, got, ref, dtype) -> bool:
    """Whether ``got`` has the CPU's values and indices that point at them."""
    if op.name == "argsort" and isinstance(ref, torch.Tensor):  # the values it sorts
        x, at = sample.input.detach(), _TIED_INDICES["argsort"]
        dim = (list(sample.args[at:]) or [sample.kwargs.get("dim", -1)])[0]
        if x.dim() == 0 or got.shape != ref.shape:
            return False
        return _compare(x.gather(dim, got.detach().cpu()), x.gather(dim, ref), dtype) is None
    if op.name not in _TIED_INDICES or not isinstance(ref, tuple) or len(ref) != 2:
        return False
    v, i = got[0].detach().cpu(), got[1].detach().cpu()
    if _compare(v, ref[0], dtype) or i.shape != ref[1].shape:
        return False
    at = _TIED_INDICES[op.name]
    args = list(sample.args[at:]) + [None, None]
    dim = args[0] if args[0] is not None else sample.kwargs.get("dim", -1)
    keepdim = args[1] if args[1] is not None else sample.kwargs.get("keepdim", False)
    keepdim = keepdim if op.name not in ("topk", "sort") else True  # (not their args)
    x = sample.input.detach()
    if x.dim() == 0:
        picked = x.reshape(-1)[i.reshape(-1)].reshape(i.shape)
    else:
        idx = i if keepdim else i.unsqueeze(dim)
        picked = x.gather(dim, idx)
        picked = picked if keepdim else picked.squeeze(dim)
    return _compare(picked, v, dtype) is None


# bfloat16: the compiled error's norms against the CPU's (both against the float32
# computation of the same inputs). Max-abs: no larger than the CPU's (1.0x); root mean
# square: up to _RMS_FACTOR times the CPU's. A graph rounds once where ATen rounds per op,
# so its errors fall on other elements and spread otherwise: conv_transpose3d sample 1,
# compiled max error 0.9366 = the CPU's (another element), RMS 1.23x the CPU's.
_RMS_FACTOR = 1.5


def _error_within_cpu(g, r, t) -> bool:
    """Whether ``g``'s error against ``t`` is within the CPU's (``r``'s): the same
    non-finite values as ``t`` (NaN where NaN, the same infinities), then max-abs error
    <= the CPU's and RMS error <= _RMS_FACTOR x the CPU's over the finite ones."""
    if g.shape != t.shape:
        return False
    fin = t.isfinite()
    if not bool((g.isnan() == t.isnan()).all()) or not bool((g[t.isinf()] == t[t.isinf()]).all()):
        return False
    eg, er = (g - t)[fin].double(), (r - t)[fin].double().nan_to_num(0.0, 0.0, 0.0)
    if eg.numel() == 0:
        return True
    if not bool(eg.isfinite().all()):
        return False
    return bool(eg.abs().max() <= er.abs().max()) and bool(
        eg.square().mean().sqrt() <= _RMS_FACTOR * er.square().mean().sqrt()
    )


def _closer_than_cpu(f, ts, got, ref) -> bool:
    """bfloat16: whether ``got``'s error against the float32 result is within the CPU
    bfloat16 result's (``_error_within_cpu``: max-abs and RMS norms, not element by
    element: a compiled graph rounds once where ATen rounds per op, so its largest error
    may sit on another element; a bfloat16 transposed convolution differed so)."""
    up = [t.float() if t.dtype == torch.bfloat16 else t for t in ts]
    try:
        ref32 = f(*[t.detach() for t in up])
    except Exception:  # noqa: BLE001
        return False
    got, ref, ref32 = (
        [t.detach().cpu().float() for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]
        for x in (got, ref, ref32)
    )
    if not (len(got) == len(ref) == len(ref32)):
        return False
    return all(_error_within_cpu(g, r, t) for g, r, t in zip(got, ref, ref32))


# Cases where the CPU's float32 kernel is the one off, so its result is no reference: the
# compiled result counts as matching when it is as near the float64 result as the CPU's
# is, plus float32's tolerance (the check ``_nearer_than_cpu_float64``). Each measured:
_CPU_FLOAT32_OFF = {
    # ATen's float32 trigamma (polygamma n=1, digamma's gradient) near a pole: sample 1's
    # x = -7.9506 gives 412.75259, float64 412.74422 (2e-5 relative), compiled 412.74414
    # (2e-7). polygamma's OpInfo variants n=0..4 all call polygamma(1, x) in sample 1.
    ("polygamma", "float32"): "ATen's float32 trigamma near a pole (2e-5 relative)",
    ("special.polygamma", "float32"): "ATen's float32 trigamma near a pole (2e-5 relative)",
    ("digamma", "grad"): "digamma's gradient is ATen's float32 trigamma (as polygamma)",
    # a layer norm over one element: x - mean is 0, so the weight gradient is 0 (float64
    # 6e-14); the CPU's float32 kernel gives -2.4e-5 (its mean's rounding times rstd =
    # 1/sqrt(eps) = 316), compiled 0.0
    ("nn.functional.layer_norm", "grad"): "ATen's float32 x - mean rounding times 1/sqrt(eps)",
}


def _nearer_than_cpu_float64(f, ts, got, ref, grad: bool) -> bool:
    """Whether ``got`` is as near the float64 result as the CPU's float32 ``ref`` is,
    plus float32's tolerance (for the cases of ``_CPU_FLOAT32_OFF``)."""
    up = [t.detach().double().requires_grad_(t.requires_grad) for t in ts]
    try:
        ref64 = _grads(f, up) if grad else f(*up)
    except Exception:  # noqa: BLE001
        return False
    got, ref, ref64 = (
        [t.detach().cpu().double() for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]
        for x in (got, ref, ref64)
    )
    if not (len(got) == len(ref) == len(ref64)):
        return False
    rtol, atol = TOL[torch.float32]
    for g, r, t in zip(got, ref, ref64):
        if g.shape != t.shape:
            return False
        allowed = (r - t).abs().nan_to_num(0.0) + atol + rtol * t.abs()
        near = (g - t).abs() <= allowed
        if not bool(near.logical_or(g.isnan() & t.isnan()).logical_or(g == t).all()):
            return False
    return True


def run_case(oid: str, dtype_name: str, max_samples: int = MAX_SAMPLES) -> Outcome:
    op = OPS[oid]
    grad = dtype_name == "grad"
    dtype = torch.float32 if grad else DTYPES[dtype_name]
    n = 0
    for sample in op.sample_inputs("cpu", dtype, requires_grad=grad):
        if n == max_samples:
            break
        f, ts = _as_function(op, sample)
        try:
            ref = _grads(f, ts) if grad else f(*ts)
        except Exception:  # noqa: BLE001  (not a valid call on the CPU either)
            continue
        if grad and ref is None:
            continue
        n += 1
        # tensor_split takes its indices tensor on the CPU (as on CUDA)
        dev = [_to_neuron(t) if i == 0 or op.name not in _CPU_ARGS else t for i, t in enumerate(ts)]
        torch._dynamo.reset()
        g = torch.compile(f, backend="neuron")
        try:
            got = _grads(g, dev) if grad else g(*dev)
            torch.neuron.synchronize()
        except Exception as e:  # noqa: BLE001
            op_named = _refusal(e)
            if op_named:
                return Outcome("refused", op_named)
            return Outcome("error", f"{type(e).__name__}: {str(e).strip()[:200]}")
        bad = _compare(got, ref, dtype)
        if bad and not grad and _tied_indices_ok(op, sample, got, ref, dtype):
            bad = None
        if bad and (op.name, dtype_name) in _CPU_FLOAT32_OFF:
            bad = None if _nearer_than_cpu_float64(f, ts, got, ref, grad) else bad
        if bad and dtype == torch.bfloat16 and not _closer_than_cpu(f, ts, got, ref):
            return Outcome("mismatch", f"sample {n}: {bad}")
        if bad and dtype != torch.bfloat16:
            return Outcome("mismatch", f"sample {n}: {bad}")
    return Outcome("match" if n else "no_samples")


def _rates(results) -> list[str]:
    out = ["| dtype | cases | match | refused | mismatch | error | match rate |"]
    out.append("|---|---|---|---|---|---|---|")
    for d, rs in results.items():
        c = collections.Counter(o.status for o in rs.values())
        total = sum(v for k, v in c.items() if k != "no_samples")
        rate = 100 * c["match"] / total if total else 0
        out.append(
            f"| {d} | {total} | {c['match']} | {c['refused']} | {c['mismatch']} | "
            f"{c['error']} | {rate:.1f} % |"
        )
    return out


def report(lines) -> str:
    """docs/compile.md's tables from this script's printed lines (``dtype op status
    detail``; a later line for the same case wins, so reruns can be appended)."""
    results = collections.defaultdict(dict)
    for line in lines:
        parts = line.rstrip("\n").split(" ", 3)
        if len(parts) < 3 or parts[0] not in (*DTYPES, "grad") or parts[1] not in OPS:
            continue
        results[parts[0]][parts[1]] = Outcome(parts[2], parts[3] if len(parts) > 3 else "")
    order = [d for d in (*DTYPES, "grad") if d in results]
    results = {d: results[d] for d in order}
    out = _rates(results)
    out += ["", "Mismatches and errors:", ""]
    for d, rs in results.items():
        for oid, o in sorted(rs.items()):
            if o.status in ("mismatch", "error"):
                out.append(f"- {d} `{oid}` ({o.status}): {o.detail}")
    out += ["", "Refused, by the op the error names (the (op, dtype) cases that hit it):", ""]
    refused = collections.defaultdict(list)
    for d, rs in results.items():
        for oid, o in sorted(rs.items()):
            if o.status == "refused":
                named = o.detail.split(":")[0] if o.detail.startswith("neuron") else o.detail
                refused[named].append(f"{oid} {d}")
    for named, who in sorted(refused.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"- `{named}` ({len(who)}): {', '.join(who)}")
    return "\n".join(out)


def main(argv: list[str]) -> None:
    """Run every case (or those of the dtypes named) and print the rates and lists;
    ``--report FILE...``: the markdown tables from earlier runs' output."""
    if argv[:1] == ["--report"]:
        lines = [ln for f in argv[1:] for ln in open(f, encoding="utf-8")]
        print(report(lines))
        return
    names = argv or [*DTYPES, "grad"]
    results = collections.defaultdict(dict)
    for oid, d in cases([n for n in names if n in DTYPES], grad="grad" in names):
        results[d][oid] = run_case(oid, d)
        print(d, oid, results[d][oid].status, results[d][oid].detail, flush=True)
    print()
    print("\n".join(_rates(results)))


if __name__ == "__main__":
    main(sys.argv[1:])
