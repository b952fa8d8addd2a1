"""Conformance with PyTorch's own test data: the checks of PyTorch's
``TestCommon`` (test_ops.py), written by us, over every OpInfo of ``op_db``.

For each OpInfo and each configuration (float32, bfloat16, float16, int64
with the 64-bit policy on, int64 with it off, bool) the first samples of
``sample_inputs("cpu", dtype)`` run on the CPU and on ``neuron``:

- ``functional``: the op on samples moved keeping their layout;
- ``noncontiguous``: ``sample.noncontiguous()`` (TestCommon.test_noncontiguous_samples);
- ``inplace``: the in-place variant on a clone (returned value and self);
- ``out``: the ``out=`` form into tensors of the CPU result's geometry;
- ``grad`` (float32): ``torch.autograd.grad`` of the outputs (all-ones
  cotangents) with respect to every differentiable input, vs the CPU's.
- issue 23's (``conformance_extra.py``): ``grad_strided``, ``out_alias``,
  ``mixed_device``, ``channels_last_3d``.

Each check is ``pass``, ``fail`` (mismatch or an error the CPU did not
raise) or ``designed`` (a difference the design calls for, by rule); it is
``fallback`` too when the neuron run took the CPU fallback. A check the CPU
itself rejects is not counted. Designed differences, by rule, not by hand:

1. 64-bit policy: with narrowing on (every configuration but int64-full;
   an op may create 64-bit intermediates), a result that differs from the CPU's
   but equals the CPU's result on the inputs wrapped to int32, or matches at
   float32 tolerances a float64 result computed at 32 bits (the policy's
   defined behaviour, docs/device.md "64-bit policy").
2. Random ops (name contains a random word) and ops returning uninitialised
   memory (empty*) are not compared; sparse layouts are not supported.
3. Results the op leaves unspecified (batch norm's saved statistics in eval
   mode) are not compared.
4. Noncontiguous samples: where the CPU's own result depends on the layout
   (it differs between the noncontiguous sample and its contiguous copy), a
   neuron result equal to the CPU's on the contiguous copy is accepted.

Run: ``python tests/device/conformance_sweep.py --report docs/conformance.md``
(``make conformance``); ``tests/device/test_conformance.py`` runs a CI subset.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import time
import warnings
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten, tree_map

import torchneuron  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_opinfo import (  # noqa: E402
    CPU_ARGS,
    OPS,
    _device_arg,
    _op_id,
    _skip_reason,
    _unspecified_results,
    to_neuron,
)

CONFIGS = {
    "float32": (torch.float32, True),
    "bfloat16": (torch.bfloat16, True),
    "float16": (torch.float16, True),
    "int64": (torch.int64, True),
    "int64-full": (torch.int64, False),  # TORCHNEURON_NARROW_64BIT=0
    "bool": (torch.bool, True),
}
CHECKS = ("functional", "noncontiguous", "inplace", "out", "grad")  # + conformance_extra's
STATUSES = ("pass", "fail", "designed")


@contextlib.contextmanager
def narrowing(on: bool):
    old = torchneuron._C._narrow_64bit()
    torchneuron._C._set_narrow_64bit(on)
    try:
        yield
    finally:
        torchneuron._C._set_narrow_64bit(old)


def _tensors(x):
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _to_cpu(x):
    return tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, x)


def _close(got, ref, **tol) -> str | None:
    """None if ``got`` (from neuron) matches ``ref``; else why not."""
    try:
        for t in _tensors(got):
            if t.device.type != "neuron":
                return f"a result is on {t.device}"
        if tol:  # float32 tolerances for float64 results: cast both
            got = tree_map(
                lambda t: (
                    t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float64 else t
                ),
                _to_cpu(got),
            )
            ref = tree_map(
                lambda t: (
                    t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float64 else t
                ),
                ref,
            )
        torch.testing.assert_close(_to_cpu(got), ref, equal_nan=True, **tol)
        return None
    except (AssertionError, TypeError, ValueError, RuntimeError) as e:
        return str(e).strip().splitlines()[0][:200]


def _wrap32(x):
    """int64 tensors wrapped to int32 and back (the 64-bit policy's inputs)."""
    return tree_map(
        lambda t: (
            t.to(torch.int32).to(torch.int64)
            if isinstance(t, torch.Tensor) and t.dtype == torch.int64
            else t
        ),
        x,
    )


def _dev_sample(op, sample):
    d = sample.transform(to_neuron)
    if op.name in CPU_ARGS:
        d.args, d.kwargs = sample.args, sample.kwargs
    d.args = tuple(_device_arg(a) for a in d.args)
    d.kwargs = {k: _device_arg(v) for k, v in d.kwargs.items()}
    return d


def _drop(x, idx):
    if idx and isinstance(x, (tuple, list)):
        return [v for i, v in enumerate(x) if i not in idx]
    return x


class Outcome:
    def __init__(self):
        self.status: str | None = None  # None: not counted (the CPU rejected it)
        self.fallback = False
        self.why = ""


def _run_neuron(fn):
    torch.neuron.reset_fallback_stats()
    try:
        res = fn()
        torch.neuron.synchronize()
        err = None
    except Exception as e:  # noqa: BLE001
        res, err = None, e
    return res, err, bool(torch.neuron.fallback_stats())


def _judge(out: Outcome, res, err, fell_back, ref, narrowed, designed_ref=None, layout_ref=None):
    out.fallback = fell_back
    if err is not None:
        out.status, out.why = (
            "fail",
            f"raised {type(err).__name__}: {str(err).splitlines()[0][:160]}",
        )
        return
    why = _close(res, ref)
    if why is None:
        out.status = "pass"
    elif narrowed and designed_ref is not None and _close(res, designed_ref()) is None:
        out.status, out.why = "designed", "64-bit policy (int32 wrap)"
    elif narrowed and _close(res, ref, rtol=1.3e-6, atol=1e-5) is None:
        out.status, out.why = "designed", "64-bit policy (float64 computed as float32)"
    elif layout_ref is not None and _close(res, layout_ref()) is None:
        out.status, out.why = "designed", "the CPU's result depends on the layout"
    else:
        out.status, out.why = "fail", why


def check(op, sample, kind: str, narrowed: bool) -> Outcome:
    out = Outcome()
    unspecified = _unspecified_results(op.name, sample)
    if kind == "noncontiguous":
        sample = sample.noncontiguous()
    dev = _dev_sample(op, sample)
    call = lambda f, s, *extra, **kw: f(s.input, *s.args, *extra, **s.kwargs, **kw)  # noqa: E731
    if kind in ("functional", "noncontiguous"):
        try:
            ref = call(op, sample)
        except Exception:  # noqa: BLE001
            return out
        res, err, fb = _run_neuron(lambda: call(op, dev))
        contiguous = sample.transform(
            lambda t: t.contiguous() if isinstance(t, torch.Tensor) else t
        )
        _judge(
            out,
            _drop(res, unspecified),
            err,
            fb,
            _drop(ref, unspecified),
            narrowed,
            lambda: _drop(call(op, _wrap_sample(sample)), unspecified),
            (lambda: _drop(call(op, contiguous), unspecified)) if kind == "noncontiguous" else None,
        )
    elif kind == "inplace":
        fn = op.inplace_variant
        if fn is None or not isinstance(sample.input, torch.Tensor):
            return out
        cpu_self = sample.input.clone()
        try:
            ref = (fn(cpu_self, *sample.args, **sample.kwargs), cpu_self)
        except Exception:  # noqa: BLE001
            return out
        dev_self = to_neuron(sample.input.clone())
        res, err, fb = _run_neuron(lambda: (fn(dev_self, *dev.args, **dev.kwargs), dev_self))

        def wrapped_ref():
            s = _wrap_sample(sample)
            c = s.input.clone()
            return (fn(c, *s.args, **s.kwargs), c)

        _judge(out, res, err, fb, ref, narrowed, wrapped_ref)
    elif kind == "out":
        if not op.supports_out or unspecified:
            return out
        try:
            r = call(op, sample)
            if isinstance(r, torch.Tensor):
                cpu_out, dev_out = torch.empty_like(r), torch.empty_like(r, device="neuron")
            elif isinstance(r, tuple) and r and all(isinstance(t, torch.Tensor) for t in r):
                cpu_out = tuple(torch.empty_like(t) for t in r)
                dev_out = tuple(torch.empty_like(t, device="neuron") for t in r)
            else:
                return out
            cpu_ret = call(op, sample, out=cpu_out)
            if _close(tree_map(lambda t: t.to("neuron"), cpu_out), r) is not None:
                return out  # the CPU's own out= disagrees with its functional form
        except Exception:  # noqa: BLE001
            return out
        res, err, fb = _run_neuron(lambda: (call(op, dev, out=dev_out), dev_out))
        _judge(
            out,
            res,
            err,
            fb,
            (cpu_ret, cpu_out),
            narrowed,
            lambda: (call(op, _wrap_sample(sample)),) * 2,
        )
    return out


def _wrap_sample(sample):
    return sample.transform(lambda t: _wrap32(t) if isinstance(t, torch.Tensor) else t)


def check_grad(op, sample) -> Outcome:
    out = Outcome()
    leaves = [
        t
        for t in _tensors((sample.input, sample.args, sample.kwargs))
        if t.requires_grad and t.is_leaf
    ]
    if not leaves:
        return out
    try:
        res = op(sample.input, *sample.args, **sample.kwargs)
        outs = [t for t in _tensors(res) if t.requires_grad]
        if not outs:
            return out
        ref = torch.autograd.grad(
            outs, leaves, [torch.ones_like(t) for t in outs], allow_unused=True
        )
    except Exception:  # noqa: BLE001
        return out
    mapping = {}

    def leaf(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in mapping:
            d = to_neuron(t.detach())
            mapping[id(t)] = d.requires_grad_(t.requires_grad) if t.requires_grad else d
        return mapping[id(t)]

    dev = sample.transform(leaf)
    if op.name in CPU_ARGS:
        dev.args, dev.kwargs = sample.args, sample.kwargs
    dev.args = tuple(_device_arg(a) for a in dev.args)
    dev.kwargs = {k: _device_arg(v) for k, v in dev.kwargs.items()}
    dev_leaves = [mapping[id(t)] for t in leaves]

    def run():
        r = op(dev.input, *dev.args, **dev.kwargs)
        o = [t for t in _tensors(r) if t.requires_grad]
        return torch.autograd.grad(
            o, dev_leaves, [torch.ones_like(t) for t in o], allow_unused=True
        )

    res, err, fb = _run_neuron(run)
    if err is None:
        res = [torch.zeros(0) if g is None else g for g in res]
        res = [g if g.device.type == "neuron" else g.to("neuron") for g in res]
        ref = [torch.zeros(0) if g is None else g for g in ref]
    _judge(out, res, err, fb, ref, False)
    return out


def _guarded(record, cfg, kind, fn, *args):
    try:
        o = fn(*args)
    except Exception as e:  # noqa: BLE001  (a harness error is a failure)
        o = Outcome()
        o.status, o.why = "fail", f"harness: {type(e).__name__}: {e}"[:200]
    _count(record, cfg, kind, o)


def sweep_op(op, configs, max_samples: int, record: dict) -> None:
    """Fills record[(config, check)] -> Counter of status (+ 'fallback')."""
    import conformance_extra as extra  # imports this module's helpers

    if _skip_reason(op) in ("uninitialised result", "random", "sparse layout"):
        record["skip"] = _skip_reason(op)
        return
    for cfg in configs:
        dtype, narrow = CONFIGS[cfg]
        if dtype not in op.supported_dtypes("cpu"):
            continue
        with warnings.catch_warnings(), narrowing(narrow):
            warnings.simplefilter("ignore")
            try:
                samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:max_samples]
            except Exception:  # noqa: BLE001
                continue
            narrowed = narrow  # the policy may narrow inside the op (log_softmax(dtype=float64))
            for sample in samples:
                for kind in ("functional", "noncontiguous", "inplace", "out"):
                    try:
                        o = check(op, sample, kind, narrowed)
                    except Exception as e:  # noqa: BLE001  (a harness error is a failure)
                        o = Outcome()
                        o.status, o.why = "fail", f"harness: {type(e).__name__}: {e}"[:200]
                    _count(record, cfg, kind, o)
                _guarded(record, cfg, "out_alias", extra.check_out_alias, op, sample)
                _guarded(record, cfg, "channels_last_3d", extra.check_channels_last_3d, op, sample)
                if dtype == torch.float32:  # the devices' check does not depend on the dtype
                    _guarded(record, cfg, "mixed_device", extra.check_mixed_device, op, sample)
            if dtype == torch.float32 and op.supports_autograd:
                try:
                    gs = list(op.sample_inputs("cpu", dtype, requires_grad=True))[:max_samples]
                except Exception:  # noqa: BLE001
                    gs = []
                for sample in gs:
                    try:
                        o = check_grad(op, sample)
                    except Exception as e:  # noqa: BLE001
                        o = Outcome()
                        o.status, o.why = "fail", f"harness: {type(e).__name__}: {e}"[:200]
                    _count(record, cfg, "grad", o)
                    _guarded(record, cfg, "grad_strided", extra.check_grad_strided, op, sample)


def _count(record, cfg, kind, o: Outcome):
    if o.status is None:
        return
    c = record.setdefault((cfg, kind), collections.Counter())
    c[o.status] += 1
    if o.fallback:
        c["fallback"] += 1
    if o.status == "fail":
        record.setdefault("failures", []).append(f"{cfg} {kind}: {o.why}")


def render(results: dict[str, dict], configs, seconds: float, max_samples: int) -> str:
    total = collections.Counter()
    per_cfg = {c: collections.Counter() for c in configs}
    for rec in results.values():
        for key, c in rec.items():
            if isinstance(key, tuple):
                total.update(c)
                per_cfg[key[0]].update(c)
    counted = total["pass"] + total["fail"] + total["designed"]
    rate = (total["pass"] + total["designed"]) / counted if counted else 0.0
    lines = [
        "# Conformance with PyTorch's OpInfo test data (generated)",
        "",
        "Generated by `tests/device/conformance_sweep.py` (`make conformance`); do not edit.",
        f"torch {torch.__version__}; first {max_samples} samples per OpInfo and configuration; "
        f"{len(results)} OpInfos; {seconds:.0f} s.",
        "Checks (TestCommon's, written by us): functional, noncontiguous samples, in-place, "
        "`out=`, gradients (float32, `torch.autograd.grad` vs the CPU); and (issue 23, "
        "`conformance_extra.py`) gradients of noncontiguous samples, `out=` aliasing the input "
        "(raises where the CPU raises), a non-0-dim CPU operand (raises, as on CUDA), "
        "channels_last_3d inputs (values and the results' memory format). A check the CPU "
        "itself rejects is not counted. Designed differences are excluded by the rules in "
        "the module docstring (64-bit policy: int32 wrap with narrowing on; random and "
        "uninitialised ops; results the op leaves unspecified).",
        "",
        f"**Samples passing on the CPU that pass on neuron: {rate:.2%}** "
        f"({total['pass']} pass + {total['designed']} designed of {counted}; "
        f"{total['fail']} fail; {total['fallback']} ran through the CPU fallback).",
        "",
        "| configuration | pass | designed | fail | fallback |",
        "|---|---|---|---|---|",
    ]
    for c in configs:
        p = per_cfg[c]
        lines.append(f"| {c} | {p['pass']} | {p['designed']} | {p['fail']} | {p['fallback']} |")
    lines += [
        "",
        "## Per operator",
        "",
        "Cells: pass/designed/fail (fallback) over all checks of that configuration.",
        "",
        "| OpInfo | " + " | ".join(configs) + " |",
        "|---|" + "---|" * len(configs),
    ]
    for name in sorted(results):
        rec = results[name]
        if "skip" in rec:
            lines.append(
                f"| {name} | "
                + " | ".join([f"skipped: {rec['skip']}"] + [""] * (len(configs) - 1))
                + " |"
            )
            continue
        cells = []
        for c in configs:
            agg = collections.Counter()
            for key, cnt in rec.items():
                if isinstance(key, tuple) and key[0] == c:
                    agg.update(cnt)
            if not agg:
                cells.append("")
                continue
            cell = f"{agg['pass']}/{agg['designed']}/{agg['fail']}"
            if agg["fallback"]:
                cell += f" ({agg['fallback']})"
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    fails = [(n, f) for n, r in sorted(results.items()) for f in r.get("failures", [])]
    lines += ["", f"## Failures ({len(fails)})", ""]
    lines += [f"- `{n}` {f.replace('|', '/')}" for n, f in fails]
    return "\n".join(lines) + "\n"


def run(op_names=None, configs=tuple(CONFIGS), max_samples=3, progress=False):
    ops = [o for o in OPS if op_names is None or _op_id(o) in op_names]
    results = {}
    t0 = time.perf_counter()
    for i, op in enumerate(ops):
        rec = results.setdefault(_op_id(op), {})
        sweep_op(op, configs, max_samples, rec)
        if progress and i % 25 == 0:
            print(f"[{i}/{len(ops)}] {_op_id(op)} {time.perf_counter() - t0:.0f} s", flush=True)
    return results, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description="OpInfo conformance sweep, neuron vs CPU")
    ap.add_argument("--report", default="docs/conformance.md")
    ap.add_argument("--ops", nargs="*", help="OpInfo names (default: all)")
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--max-samples", type=int, default=3)
    args = ap.parse_args()
    results, secs = run(args.ops, tuple(args.configs), args.max_samples, progress=True)
    text = render(results, tuple(args.configs), secs, args.max_samples)
    Path(args.report).write_text(text)
    print("\n".join(text.splitlines()[:20]))


if __name__ == "__main__":
    main()
