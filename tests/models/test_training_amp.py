"""Training without CPU fallbacks: fused optimizers, GradScaler, autocast, dropout and
attention backwards run natively on neuron and match the CPU (issue 7, section 2)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import torchneuron  # noqa: F401


def _same_model_pair(make):
    torch.manual_seed(0)
    cpu = make()
    dev = copy.deepcopy(cpu).to("neuron")
    return cpu, dev


@pytest.mark.parametrize(
    "opt, kw",
    [
        (torch.optim.AdamW, dict(fused=True, weight_decay=0.1)),
        (torch.optim.Adam, dict(fused=True, amsgrad=True)),
        (torch.optim.SGD, dict(fused=True, momentum=0.9, nesterov=True)),
        (torch.optim.AdamW, dict(fused=True, lr=torch.tensor(0.01))),  # the tensor_lr overloads
    ],
)
def test_fused_optimizer_bit_for_bit(opt, kw):
    cpu, dev = _same_model_pair(
        lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    )
    kw = dict(kw)
    lr = kw.pop("lr", 0.01)
    ocpu = opt(cpu.parameters(), lr=lr, **kw)
    odev = opt(dev.parameters(), lr=lr.to("neuron") if isinstance(lr, torch.Tensor) else lr, **kw)
    torch.neuron.reset_fallback_stats()
    for step in range(3):
        x = torch.randn(5, 8)
        for m, o, d in ((cpu, ocpu, "cpu"), (dev, odev, "neuron")):
            o.zero_grad()
            m(x.to(d)).square().mean().backward()
            o.step()
    for a, b in zip(cpu.parameters(), dev.parameters()):
        assert torch.equal(a, b.cpu())  # the CPU's kernel over device memory
    assert torch.neuron.fallback_stats() == {}


def test_grad_scaler_kernels_match_cpu():
    grads = [torch.randn(4, 3), torch.randn(7), torch.tensor([1.0, float("inf")])]
    for with_inf in (False, True):
        gc = [g.clone() for g in grads[: 2 + with_inf]]
        gd = [g.to("neuron") for g in gc]
        inv = torch.tensor(1 / 1024.0)
        fc, fd = torch.zeros(1), torch.zeros(1, device="neuron")
        torch.neuron.reset_fallback_stats()
        torch._amp_foreach_non_finite_check_and_unscale_(gc, fc, inv)
        torch._amp_foreach_non_finite_check_and_unscale_(gd, fd, inv.to("neuron"))
        assert torch.equal(fd.cpu(), fc) and fc.item() == float(with_inf)
        for a, b in zip(gc, gd):
            assert torch.equal(a, b.cpu())
        sc, sd = torch.full((1,), 2.0**16), torch.full((1,), 2.0**16, device="neuron")
        tc, td = torch.ones(1, dtype=torch.int32), torch.ones(1, dtype=torch.int32, device="neuron")
        rd = torch._amp_update_scale_(sd, td, fd, 2.0, 0.5, 2)
        torch._amp_update_scale_(sc, tc, fc, 2.0, 0.5, 2)
        assert rd is sd and torch.equal(sd.cpu(), sc) and torch.equal(td.cpu(), tc)
        assert torch.neuron.fallback_stats() == {}


def test_dropout_and_attention_backward_native():
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 3, 5, 8, requires_grad=True) for _ in range(3))
    qd, kd, vd = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    torch.neuron.reset_fallback_stats()
    out = nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=True)
    torch.manual_seed(1)
    nn.functional.dropout(out, 0.3, training=True).square().sum().backward()
    torch.neuron.synchronize()
    assert torch.neuron.fallback_stats() == {}
    ref = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.manual_seed(1)
    nn.functional.dropout(ref, 0.3, training=True).square().sum().backward()
    for a, b in ((q, qd), (k, kd), (v, vd)):
        torch.testing.assert_close(b.grad.cpu(), a.grad)
    g = torch.randn(6, 4)
    mask = torch.rand(6, 4) > 0.5
    ref = torch.ops.aten.native_dropout_backward(g, mask, 2.0)
    got = torch.ops.aten.native_dropout_backward(g.to("neuron"), mask.to("neuron"), 2.0)
    assert torch.equal(got.cpu(), ref) and torch.neuron.fallback_stats() == {}


def test_neuron_amp_module_has_cuda_amp_shape():
    amp = torch.neuron.amp
    with amp.autocast(dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("neuron")
        assert torch.get_autocast_dtype("neuron") == torch.bfloat16
        y = nn.functional.linear(
            torch.randn(2, 3, device="neuron"), torch.randn(4, 3, device="neuron")
        )
    assert y.dtype == torch.bfloat16 and not torch.is_autocast_enabled("neuron")
    with amp.autocast():
        assert torch.get_autocast_dtype("neuron") == torch.float16
    s = amp.GradScaler(init_scale=8.0)
    assert s._device == "neuron" and s.get_scale() == 8.0
    assert not amp.amp_definitely_not_available()

    class Square(torch.autograd.Function):
        @staticmethod
        @amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            assert not torch.is_autocast_enabled("neuron")  # cast_inputs turns it off
            return x * x

        @staticmethod
        @amp.custom_bwd
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.randn(3, device="neuron", dtype=torch.float16, requires_grad=True)
    with amp.autocast():
        y = Square.apply(x)
    assert y.dtype == torch.float32
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), (2 * x.detach().float()).half().cpu())


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        attention_dropout=0.1,
        attn_implementation="sdpa",
    )
    return transformers.LlamaForCausalLM(cfg)


def _llama_steps(model, device, dtype, steps=3):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10)
    g = torch.Generator().manual_seed(0)
    losses = []
    torch.manual_seed(5)  # dropout draws: the same stream on both devices
    for _ in range(steps):
        ids = torch.randint(0, 64, (2, 12), generator=g).to(device)
        with torch.autocast(device, dtype=dtype):
            loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_llama_amp_training_no_fallback(dtype):
    cpu = _tiny_llama().train()
    dev = copy.deepcopy(cpu).to("neuron")
    ref = _llama_steps(cpu, "cpu", dtype)
    torch.neuron.reset_fallback_stats()
    with torch.neuron.fallback_mode("error"):
        got = _llama_steps(dev, "neuron", dtype)
    assert torch.neuron.fallback_stats() == {}
    # Autocast's per-op policy and reduced-precision rounding differ by device: the
    # CPU's own tolerance for the dtype (torch.testing's defaults, loosened for 3 steps).
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=5e-3, atol=5e-3)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), **tol)
    for (n, a), b in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(b.cpu(), a, **tol, msg=lambda m: f"{n}: {m}")


def test_fused_step_checks_before_queuing_and_accepts_cpu_lr():
    p = [torch.randn(3, device="neuron"), torch.randn(2, 2, device="neuron")]
    before = [t.cpu() for t in p]
    g = [torch.randn(3, device="neuron")]  # one gradient for two parameters
    z = [torch.zeros_like(t) for t in p]
    steps = [torch.zeros((), device="neuron") for _ in p]
    with pytest.raises(RuntimeError, match="grads"):
        torch._fused_adamw_(
            p,
            g,
            z,
            [torch.zeros_like(t) for t in p],
            [],
            steps,
            lr=0.1,
            beta1=0.9,
            beta2=0.999,
            weight_decay=0.0,
            eps=1e-8,
            amsgrad=False,
            maximize=False,
        )
    with pytest.raises(RuntimeError, match="same device"):
        torch._fused_sgd_(
            p,
            [torch.randn(3), torch.randn(2, 2)],
            [],
            weight_decay=0.0,
            momentum=0.0,
            lr=0.1,
            dampening=0.0,
            nesterov=False,
            maximize=False,
            is_first_step=True,
        )
    torch.neuron.synchronize()
    assert all(torch.equal(a.cpu(), b) for a, b in zip(p, before))  # untouched
    # A CPU 0-dim lr tensor, as CUDA accepts it.
    gr = [torch.ones_like(t) for t in p]
    torch._fused_sgd_(
        p,
        gr,
        [],
        weight_decay=0.0,
        momentum=0.0,
        lr=torch.tensor(0.5),
        dampening=0.0,
        nesterov=False,
        maximize=False,
        is_first_step=True,
    )
    assert all(torch.equal(a.cpu(), b - 0.5) for a, b in zip(p, before))


def test_fused_adamw_float64_follows_the_64bit_policy():
    torch.manual_seed(0)
    ref32 = nn.Linear(4, 3)
    dev64 = copy.deepcopy(ref32).double().to("neuron")
    full = copy.deepcopy(ref32).double()
    dev_full = copy.deepcopy(full).to("neuron")
    x = torch.randn(5, 4)
    runs = (
        (ref32, x, False),
        (dev64, x.double().to("neuron"), True),
        (full, x.double(), False),
        (dev_full, x.double().to("neuron"), False),
    )
    for model, inp, narrow in runs:
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, fused=True)
        old = torchneuron._C._narrow_64bit()
        torchneuron._C._set_narrow_64bit(model is dev64)
        try:
            for _ in range(3):
                opt.zero_grad()
                model(inp).square().sum().backward()
                opt.step()
            torch.neuron.synchronize()
        finally:
            torchneuron._C._set_narrow_64bit(old)
    # Narrowed: the float32 computation, widened; full width: the CPU's float64 bit for bit.
    for a, b in zip(ref32.parameters(), dev64.parameters()):
        assert b.dtype == torch.float64
        torch.testing.assert_close(b.cpu(), a.detach().double())
    for a, b in zip(full.parameters(), dev_full.parameters()):
        assert torch.equal(b.cpu(), a)
