"""A recorded run of eager ops compiled as one executable (torchneuron/compiler/segment.py,
the compile half of issue 26's engine): the same values and the same writes into the inputs
as the ops run eagerly, on the device and on the CPU."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from torchneuron.compiler.errors import NeuronCompileError
from torchneuron.compiler.segment import Ref, Segment, Step, compile_segment, segment_key


class _Recorder(TorchDispatchMode):
    """Records the ATen ops a function runs as a Segment (the engine records in C++)."""

    def __init__(self, args):
        super().__init__()
        self.args, self.steps, self._refs, self._keep = list(args), [], {}, []

    def _ref(self, t):
        if id(t) not in self._refs:  # not made by a step: one of the function's arguments
            self._refs[id(t)] = Ref(-1, next(i for i, a in enumerate(self.args) if a is t))
        return self._refs[id(t)]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        as_ref = lambda a: self._ref(a) if isinstance(a, torch.Tensor) else a  # noqa: E731
        rargs, rkw = tree_map(as_ref, args), tree_map(as_ref, kwargs)
        out = func(*args, **kwargs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        j = len(self.steps)
        self.steps.append(Step(func, rargs, rkw, n_out=len(outs)))
        for k, t in enumerate(outs):
            self._refs[id(t)], _ = Ref(j, k), self._keep.append(t)
        return out

    def segment(self, results) -> Segment:
        return Segment(self.steps, len(self.args), [self._refs[id(r)] for r in results])


def _check(fn, make_inputs, **tol):
    """fn's ops recorded on the device, compiled as a segment and run on fresh inputs: the
    outputs and every input's final value equal eager's, on the device and on the CPU."""
    eager_in = make_inputs("neuron")
    with _Recorder(eager_in) as rec:
        eager_out = fn(*eager_in)
    seg = rec.segment(eager_out)
    fused_in = make_inputs("neuron")
    cs = compile_segment(seg, fused_in)
    fused_out = cs(fused_in)
    cpu_in = make_inputs("cpu")
    cpu_out = fn(*cpu_in)
    for got, e, c in zip(fused_out, eager_out, cpu_out):
        torch.testing.assert_close(got.cpu(), e.cpu(), **tol)
        torch.testing.assert_close(got.cpu(), c, **tol)
    for got, e, c in zip(fused_in, eager_in, cpu_in):
        torch.testing.assert_close(got.cpu(), e.cpu(), **tol)
        torch.testing.assert_close(got.cpu(), c, **tol)
    return seg, fused_in


def _randn(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return lambda dev: torch.randn(*shape, generator=g.manual_seed(seed)).to(dev)


def test_a_chain_of_ops_is_one_executable():
    w, b, x = _randn(16, 8, seed=1), _randn(16, seed=2), _randn(4, 8, seed=3)

    def fn(x, w, b):
        h = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))
        return (torch.nn.functional.layer_norm(h, (16,)) * 2).softmax(-1), h

    before = torch.neuron.get_dynamo_metrics()
    seg, _ = _check(fn, lambda d: [x(d), w(d), b(d)], atol=1e-5, rtol=1e-5)
    assert len(seg.steps) >= 5 and len(seg.outputs) == 2
    assert len(torch.neuron.get_dynamo_metrics()) == len(before) + 1  # one graph compiled


def test_in_place_writes_into_inputs_and_through_views():
    x, y = _randn(3, 5, seed=4), _randn(3, 5, seed=5)

    def fn(x, y):
        x.add_(1.0)
        x[0].mul_(3.0)  # through a view of an input
        y.t().clamp_(min=0.0)
        return (x * y,)

    _check(fn, lambda d: [x(d), y(d)])


def test_inputs_that_share_a_storage():
    base = _randn(10, seed=6)

    def make(d):
        t = base(d)
        return [t[:6], t[4:]]  # overlap in positions 4 and 5

    def fn(a, b):
        a.mul_(2.0)  # b sees the write in its first two elements
        return (b + 1.0,)

    _check(fn, make)


def test_ops_with_several_results():
    x = _randn(6, 4, seed=7)

    def fn(x):
        v, m = torch.var_mean(x, 0)
        p, q = torch.split(x, [2, 4])
        return v + m, p.sum(0) - q.sum(0)

    _check(fn, lambda d: [x(d)], atol=1e-5, rtol=1e-5)


def test_the_key_sees_aliasing_and_shapes():
    seg = Segment([Step(torch.ops.aten.add_.Tensor, (Ref(-1, 0), Ref(-1, 1)))], 2, [Ref(0, 0)])
    t = torch.zeros(8, device="neuron")
    apart = [torch.zeros(4, device="neuron"), torch.zeros(4, device="neuron")]
    shared = [t[:4], t[4:]]
    assert segment_key(seg, apart) == segment_key(seg, [a.clone() for a in apart])
    assert segment_key(seg, apart) != segment_key(seg, shared)
    assert segment_key(seg, apart) != segment_key(seg, [torch.zeros(5, device="neuron")] * 2)


def test_an_op_without_lowering_is_refused_by_name():
    x = _randn(5, seed=8)
    seg = Segment(
        [
            Step(torch.ops.aten.exp.default, (Ref(-1, 0),)),
            Step(torch.ops.aten.igamma.default, (Ref(0, 0), Ref(0, 0))),
        ],
        1,
        [Ref(1, 0)],
    )
    with pytest.raises(NeuronCompileError, match="igamma"):
        compile_segment(seg, [x("neuron")])


def test_a_reference_to_a_later_result_is_a_value_error():
    seg = Segment([Step(torch.ops.aten.exp.default, (Ref(0, 0),))], 1, [Ref(0, 0)])
    with pytest.raises(ValueError, match="step 0 is not yet made"):
        compile_segment(seg, [torch.zeros(2, device="neuron")])


def test_outputs_written_into_the_results_eager_handed_out():
    x = _randn(4, 4, seed=9)
    eager_in = [x("neuron")]
    with _Recorder(eager_in) as rec:
        eager_out = (eager_in[0].exp() + 1.0,)
    dst = torch.full((4, 4), -7.0, device="neuron")  # the caller's result tensor
    got = compile_segment(rec.segment(eager_out), [x("neuron")])([x("neuron")], [dst])
    assert got[0] is dst
    torch.testing.assert_close(dst.cpu(), x("cpu").exp() + 1.0)
    with pytest.raises(ValueError, match="2 destinations for 1 outputs"):
        compile_segment(rec.segment(eager_out), [x("neuron")])([x("neuron")], [dst, dst])
