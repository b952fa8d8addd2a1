"""The conformance sweep's checks for what issue 23's bugs slipped past
(tests/device/conformance_sweep.py runs them beside TestCommon's):

- ``grad_strided`` (float32): gradients of ``sample.noncontiguous()``, so a
  CPU fallback's layout (LAPACK's column-major results) reaches the backward;
- ``out_alias``: ``out=`` over the sample's input's memory (its first
  elements): neuron raises where the CPU raises (overlap), and matches where
  the CPU computes;
- ``mixed_device``: one non-0-dim tensor operand left on the CPU beside neuron
  tensors: neuron raises, as CUDA does ("Expected all tensors to be on the
  same device", or the op's own check); ops CUDA lets take CPU tensors are
  not counted;
- ``channels_last_3d``: a 5-D input in ``torch.channels_last_3d``: values and
  the results' memory format (contiguous, channels_last_3d) equal the CPU's.
"""

from __future__ import annotations

import torch
from conformance_sweep import Outcome, _dev_sample, _judge, _run_neuron, _tensors, check_grad
from test_opinfo import CPU_ARGS, _device_arg, to_neuron

EXTRA_CHECKS = ("grad_strided", "out_alias", "mixed_device", "channels_last_3d")

# Ops CUDA runs with CPU tensor operands: indices of advanced indexing, copies
# and device moves, and what only reads sizes or builds on the given device.
CUDA_TAKES_CPU = {
    "__getitem__",
    "index_put",
    "index_fill",  # kHostIndexOps (csrc/aten/native_ops.h), as CUDA accepts
    "_unsafe_index_put",
    "to",
    "copy",
    "_to_copy",
    "nn.functional.pad",
    "new_empty",
    "new_empty_strided",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "as_strided_scatter",
    "broadcast_shapes",
    # only the other's sizes are read (views), or it is copied in (copy_)
    "view_as",
    "reshape_as",
    "expand_as",
    "broadcast_tensors",
    "slice_scatter",
    "select_scatter",
    "diagonal_scatter",
    "nn.functional.ctc_loss",  # lengths on the CPU, as cuDNN's wants them
} | CPU_ARGS


def check_grad_strided(op, sample) -> Outcome:
    return check_grad(op, sample.noncontiguous())


def check_out_alias(op, sample) -> Outcome:
    out = Outcome()
    x = sample.input
    if not op.supports_out or not isinstance(x, torch.Tensor) or x.dim() == 0:
        return out
    try:
        r = op(x, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001
        return out
    first = r[0] if isinstance(r, tuple) and r else r
    if (
        not isinstance(first, torch.Tensor)
        or first.dtype != x.dtype
        or not x.is_contiguous()
        or not 0 < first.numel() <= x.numel()
    ):
        return out
    multi = isinstance(r, tuple)

    def outs(self_):  # the first result over the input's first elements
        o = self_.view(-1)[: first.numel()].view(first.shape)
        if not multi:
            return o
        return (o,) + tuple(torch.empty_like(t, device=self_.device) for t in r[1:])

    cpu_self = x.clone()
    try:
        ref = (op(cpu_self, *sample.args, **sample.kwargs, out=outs(cpu_self)), cpu_self)
        cpu_err = None
    except Exception as e:  # noqa: BLE001
        cpu_err = e
    dev = _dev_sample(op, sample)
    dev_self = dev.input.clone()
    res, err, fb = _run_neuron(
        lambda: (op(dev_self, *dev.args, **dev.kwargs, out=outs(dev_self)), dev_self)
    )
    if cpu_err is not None:
        out.fallback = fb
        if err is not None:
            out.status = "pass"
        else:
            out.status = "fail"
            out.why = f"computed where the CPU raised {type(cpu_err).__name__}: "
            out.why += str(cpu_err).splitlines()[0][:120]
        return out
    if err is None and (first.shape != x.shape or not _same(ref[0], r)):
        # out= over part of the input, or reads that see the writes (a blocked
        # matmul): the values follow the kernel's order (the CPU's varies
        # between runs); computing, as the CPU did, is what is checked.
        out.status, out.fallback = "designed", fb
        out.why = "the CPU's result depends on its kernel's read/write order"
        return out
    _judge(out, res, err, fb, ref, False)
    return out


def _same(a, b) -> bool:
    try:
        torch.testing.assert_close(a, b, equal_nan=True)
        return True
    except (AssertionError, TypeError, ValueError, RuntimeError):
        return False


def check_mixed_device(op, sample) -> Outcome:
    out = Outcome()
    x = sample.input
    if op.name in CUDA_TAKES_CPU or not isinstance(x, torch.Tensor) or x.numel() == 0:
        return out  # an empty input: ATen returns early, without device checks
    others = [
        t
        for t in _tensors((sample.args, sample.kwargs))
        if t.dim() > 0 and t.numel() > 0 and t is not x
    ]
    if not others:
        return out
    try:
        op(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001
        return out
    keep = others[0]  # this operand stays on the CPU
    dev = sample.transform(lambda t: t if t is keep else to_neuron(t))
    dev.args = tuple(_device_arg(a) for a in dev.args)
    dev.kwargs = {k: _device_arg(v) for k, v in dev.kwargs.items()}
    res, err, fb = _run_neuron(lambda: op(dev.input, *dev.args, **dev.kwargs))
    out.fallback = fb
    if err is not None:  # the device check's words, or the op's own device check
        out.status = "pass"
    else:
        out.status, out.why = "fail", "computed with a non-0-dim CPU operand (CUDA raises)"
    return out


def _formats(x):
    return [
        (t.is_contiguous(), t.is_contiguous(memory_format=torch.channels_last_3d))
        for t in _tensors(x)
        if t.dim() == 5
    ]


def check_channels_last_3d(op, sample) -> Outcome:
    out = Outcome()
    x = sample.input
    if (
        not isinstance(x, torch.Tensor)
        or x.dim() != 5
        or x.is_contiguous(memory_format=torch.channels_last_3d)
    ):
        return out
    cl = sample.transform(lambda t: t)
    cl.input = x.contiguous(memory_format=torch.channels_last_3d)
    try:
        ref = op(cl.input, *cl.args, **cl.kwargs)
    except Exception:  # noqa: BLE001
        return out
    dev = _dev_sample(op, cl)
    res, err, fb = _run_neuron(lambda: op(dev.input, *dev.args, **dev.kwargs))
    _judge(out, res, err, fb, ref, False)
    if out.status == "pass" and _formats(res) != _formats(ref):
        out.status = "fail"
        out.why = (
            f"memory format (contiguous, channels_last_3d) {_formats(res)}, CPU {_formats(ref)}"
        )
    return out
