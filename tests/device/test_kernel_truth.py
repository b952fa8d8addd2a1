"""The generic native kernel's results match the CPU kernel's whatever ATen's
Meta kernel says (dtype, shape, strides); the 64-bit policy never turns a
working call into an error; the result-geometry cache follows global state;
errors have the CPU's type and are raised at the call."""

import warnings

import pytest
import torch
import torch.nn.functional as F

DEV = "neuron"


def _same(cpu, dev):
    if isinstance(cpu, (tuple, list)):
        assert len(cpu) == len(dev)
        for c, d in zip(cpu, dev):
            _same(c, d)
        return
    d = dev.cpu()
    assert d.dtype == cpu.dtype and d.shape == cpu.shape, (d.dtype, d.shape, cpu.dtype, cpu.shape)
    if cpu.numel():
        torch.testing.assert_close(d, cpu, equal_nan=True)


def _both(fn, *args):
    cpu = fn(*args)
    dev = fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args])
    _same(cpu, dev)
    return cpu, dev


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def test_softmax_backward_data_dtype_argument():
    g = torch.randn(3, 5, generator=_g())
    out = torch.randn(3, 5, generator=_g(1)).softmax(-1)
    for _ in range(2):  # first call and cached signature
        _both(lambda a, b: torch.ops.aten._softmax_backward_data(a, b, -1, torch.bfloat16), g, out)


def test_grad_of_sdpa_under_bf16_autocast():
    q, k, v = (torch.randn(1, 2, 4, 8, generator=_g(i)) for i in range(3))

    def loss(q, k, v, dev):
        with torch.autocast(dev, dtype=torch.bfloat16):
            return F.scaled_dot_product_attention(q, k, v).float().sum()

    want = torch.func.grad(lambda q: loss(q, k, v, "cpu"))(q)
    got = torch.func.grad(lambda q: loss(q, k.to(DEV), v.to(DEV), DEV))(q.to(DEV))
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, rtol=2e-2, atol=2e-2)


def test_norm_statistics_dtype_and_shape():
    x = torch.randn(2, 3, 4, generator=_g()).bfloat16()
    w, b = torch.randn(4, generator=_g(1)).bfloat16(), torch.randn(4, generator=_g(2)).bfloat16()
    _both(lambda x, w, b: torch.ops.aten.native_layer_norm(x, [4], w, b, 1e-5), x, w, b)
    wc, bc = w[:3].contiguous(), b[:3].contiguous()
    rm, rv = torch.zeros(3), torch.ones(3)
    _both(
        lambda x, w, b, m, v: torch.ops.aten.native_batch_norm(x, w, b, m, v, False, 0.1, 1e-5),
        x,
        wc,
        bc,
        rm.bfloat16(),
        rv.bfloat16(),
    )
    xf = x.float()
    _both(
        lambda x, m, v: torch.ops.aten._native_batch_norm_legit_no_training(
            x, None, None, m, v, 0.1, 1e-5
        ),
        xf,
        rm,
        rv,
    )  # CPU: save_mean of shape [0]
    cpu_m, cpu_v = rm.clone(), rv.clone()
    dev_m, dev_v = rm.to(DEV), rv.to(DEV)
    want = torch.ops.aten._native_batch_norm_legit(x, None, None, cpu_m, cpu_v, True, 0.1, 1e-5)
    got = torch.ops.aten._native_batch_norm_legit(
        x.to(DEV), None, None, dev_m, dev_v, True, 0.1, 1e-5
    )
    _same(want, got)
    _same(cpu_m, dev_m)
    _same(cpu_v, dev_v)


def test_int64_convolution_and_pooling_compute_at_full_width():
    torch.neuron.reset_full_width_stats()
    torch.neuron.reset_narrowing_stats()
    x = torch.randint(-5, 5, (1, 2, 6, 6), generator=_g())
    w = torch.randint(-3, 3, (3, 2, 3, 3), generator=_g(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            _both(lambda x, w: F.conv2d(x, w), x, w)
            _both(lambda x: F.avg_pool2d(x, 2), x)
            _both(lambda x, w: F.conv1d(x, w), x[:, :, 0], w[:, :, 0].contiguous())
    stats = torch.neuron.full_width_stats()
    assert stats.get("aten::avg_pool2d", 0) == 2  # ATen has no int32 avg_pool2d
    conv = "aten::convolution_overrideable"
    assert stats.get(conv, 0) + torch.neuron.narrowing_stats().get(conv, 0) == 4


def test_geometry_cache_follows_default_dtype():
    a = torch.tensor([True, False, True])
    _both(lambda a: a / a, a)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        cpu, dev = _both(lambda a: a / a, a)
        assert dev.dtype == torch.float64
        _both(lambda a: torch.true_divide(a, 2), a.long())
    finally:
        torch.set_default_dtype(old)
    _, dev = _both(lambda a: a / a, a)
    assert dev.dtype == old


def test_geometry_cache_follows_grad_mode_and_determinism():
    x = torch.randn(4, 3, generator=_g())
    w = torch.randn(3, generator=_g(1))
    for grad in (True, False, True):
        with torch.set_grad_enabled(grad):
            _both(lambda x, w, b: torch.ops.aten.native_layer_norm(x, [3], w, b, 1e-5), x, w, w)
    old = torch.are_deterministic_algorithms_enabled()
    try:
        for det in (False, True, False):
            torch.use_deterministic_algorithms(det)
            src = torch.randn(6, generator=_g(2))
            idx = torch.tensor([0, 2, 2, 1, 0, 3])
            _both(lambda s, i: torch.zeros(4).to(s.device).index_add(0, i, s), src, idx)
    finally:
        torch.use_deterministic_algorithms(old)


def test_zero_size_reduction_raises_index_error_at_once():
    for fn in (lambda t: t.amax(0), lambda t: t.amin(0), lambda t: t.max(0), lambda t: t.argmax(0)):
        with pytest.raises(IndexError) as cpu:
            fn(torch.empty(0, 3))
        with pytest.raises(IndexError) as dev:
            fn(torch.empty(0, 3, device=DEV))
        assert str(dev.value).split("\n")[0] == str(cpu.value).split("\n")[0]
    torch.neuron.synchronize()  # nothing left over


def test_out_of_range_index_raises_index_error_at_once():
    t = torch.ones(3, device=DEV)
    for _ in range(2):
        with pytest.raises(IndexError, match="index 7 is out of bounds"):
            t[torch.tensor([7], device=DEV)]
        with pytest.raises(IndexError, match="out of bounds"):
            t[torch.tensor([7])] = 2.0
    torch.neuron.synchronize()
    assert t.cpu().tolist() == [1.0, 1.0, 1.0]  # a failed op leaves its inputs intact


def test_invalid_device_ordinal_is_a_runtime_error_as_on_cuda():
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(2, device="neuron:17")
    with pytest.raises(torch.AcceleratorError):
        torch.neuron.set_device(17)


def test_out_tensor_resized_as_on_the_cpu():
    x = torch.tensor([0.0, 1.0, 0.0, 2.0, 3.0])
    out_cpu = torch.empty(0, dtype=torch.long)
    out_dev = torch.empty(0, dtype=torch.long, device=DEV)
    torch.nonzero(x, out=out_cpu)
    torch.nonzero(x.to(DEV), out=out_dev)
    _same(out_cpu, out_dev)
    a, b = torch.randn(2, 3, generator=_g()), torch.randn(2, 3, generator=_g(1))
    o_cpu, o_dev = torch.empty(5), torch.empty(5, device=DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "An output with one or more elements was resized"
        torch.add(a, b, out=o_cpu)
        torch.add(a.to(DEV), b.to(DEV), out=o_dev)
    _same(o_cpu, o_dev)


def test_strided_input_uses_the_functional_kernel():
    # ATen's native_batch_norm.out computes wrong statistics for a strided
    # input (PyTorch 2.13 CPU); the device must give the functional result.
    x = torch.randn(5, 5, 10, generator=_g())[..., ::2]
    w, b = torch.randn(5, generator=_g(1)), torch.randn(5, generator=_g(2))
    for _ in range(2):
        _both(lambda x, w, b: torch.native_batch_norm(x, w, b, None, None, True, 0.5, 0.6), x, w, b)
        _both(lambda x: F.batch_norm(x, None, None, training=True), x)


def test_cpu_index_tensor_accepted_as_on_cuda():
    idx = torch.tensor([1, 3])
    want = torch.zeros(5).index_fill_(0, idx, 2.0)
    got = torch.zeros(5, device=DEV).index_fill_(0, idx, 2.0)
    assert torch.equal(got.cpu(), want)


def test_take_out_of_range_raises_index_error_at_once():
    t = torch.zeros(5, device=DEV)
    with pytest.raises(IndexError, match="out of range"):
        t.take(torch.tensor([9], device=DEV))
    torch.neuron.synchronize()


def test_op_whose_probe_rejects_zeros_still_computes():
    # multinomial rejects all-zero weights (the geometry probe's inputs): the
    # call computes with the data, and its results give the geometry after.
    p = torch.rand(4, 5, generator=_g()) + 0.1
    for _ in range(2):
        torch.neuron.manual_seed(3)
        got = torch.multinomial(p.to(DEV), 3).cpu()
        assert torch.equal(got, torch.multinomial(p, 3, generator=torch.Generator().manual_seed(3)))
