"""Training on `neuron` against the CPU: backward through convolutions
(convolution_backward_overrideable), nn.LSTM / nn.GRU (ATen's fused cells and
their backwards, csrc/aten/rnn_and_conv_grad.cpp), and a small CNN trained
for a few SGD steps. Every test also asserts that nothing took the CPU
fallback."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torchneuron  # noqa: F401

TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture
def no_fallback():
    torch.neuron.synchronize()
    torch.neuron.reset_fallback_stats()
    yield
    torch.neuron.synchronize()
    assert torch.neuron.fallback_stats() == {}


def _grads_of(tensors):
    return [None if t.grad is None else t.grad.cpu() for t in tensors]


# ---- convolution backward ---------------------------------------------------

# (functional, input shape, weight shape, bias, keyword arguments)
CONV_CASES = {
    "conv1d": (F.conv1d, (2, 3, 9), (4, 3, 3), True, {}),
    "conv1d_stride_pad_dil": (
        F.conv1d,
        (2, 4, 11),
        (6, 2, 3),
        False,
        dict(stride=2, padding=2, dilation=2, groups=2),
    ),
    "conv2d": (F.conv2d, (2, 3, 7, 6), (5, 3, 3, 2), True, {}),
    "conv2d_stride_pad": (
        F.conv2d,
        (1, 2, 8, 8),
        (3, 2, 3, 3),
        True,
        dict(stride=(2, 1), padding=(1, 2)),
    ),
    "conv2d_groups_dil": (
        F.conv2d,
        (2, 4, 9, 9),
        (8, 1, 3, 3),
        False,
        dict(groups=4, dilation=2, padding=1),
    ),
    "conv3d": (F.conv3d, (1, 2, 5, 5, 4), (3, 2, 2, 3, 2), True, dict(stride=(1, 2, 1))),
    "conv_transpose1d": (
        F.conv_transpose1d,
        (2, 4, 5),
        (4, 3, 3),
        True,
        dict(stride=2, padding=1, output_padding=1),
    ),
    "conv_transpose2d": (
        F.conv_transpose2d,
        (2, 4, 5, 4),
        (4, 3, 3, 3),
        True,
        dict(stride=2, padding=1, output_padding=1),
    ),
    "conv_transpose2d_groups": (
        F.conv_transpose2d,
        (1, 4, 4, 4),
        (4, 2, 2, 3),
        False,
        dict(groups=2, dilation=(1, 2)),
    ),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_convolution_backward_matches_cpu(case, no_fallback):
    fn, in_shape, w_shape, with_bias, kwargs = CONV_CASES[case]
    torch.manual_seed(0)
    x = torch.randn(in_shape, requires_grad=True)
    w = torch.randn(w_shape, requires_grad=True)
    out_channels = w_shape[1] * kwargs.get("groups", 1) if "transpose" in case else w_shape[0]
    b = torch.randn(out_channels, requires_grad=True) if with_bias else None
    leaves = [t for t in (x, w, b) if t is not None]
    out = fn(x, w, b, **kwargs)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)

    nleaves = [t.detach().to("neuron").requires_grad_() for t in leaves]
    nb = nleaves[2] if with_bias else None
    nout = fn(nleaves[0], nleaves[1], nb, **kwargs)
    nout.backward(grad_out.to("neuron"))
    torch.testing.assert_close(nout.cpu(), out.detach(), **TOL)
    for got, want in zip(_grads_of(nleaves), _grads_of(leaves)):
        torch.testing.assert_close(got, want, **TOL)


def test_convolution_backward_computes_only_what_is_asked(no_fallback):
    torch.manual_seed(0)
    x, w = torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3)
    b = torch.randn(3, requires_grad=True)
    nx, nw = x.to("neuron"), w.to("neuron").requires_grad_()
    nb = b.detach().to("neuron").requires_grad_()
    F.conv2d(nx, nw, nb).square().sum().backward()
    F.conv2d(x, w.requires_grad_(), b).square().sum().backward()
    assert nx.grad is None
    torch.testing.assert_close(nw.grad.cpu(), w.grad, **TOL)
    torch.testing.assert_close(nb.grad.cpu(), b.grad, **TOL)
    # The operator itself: undefined results where the mask says no.
    go = torch.ones(1, 3, 4, 4, device="neuron")
    gi, gw, gb = torch.ops.aten.convolution_backward_overrideable(
        go, nx, nw.detach(), [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, False]
    )
    assert gi is None and gb is None
    assert gw.device.type == "neuron" and gw.shape == w.shape


# ---- recurrent networks -------------------------------------------------------

RNN_CASES = [
    # (cls, num_layers, batch_first, bidirectional, bias, initial state)
    (nn.LSTM, 1, True, False, True, False),
    (nn.LSTM, 2, False, True, True, True),
    (nn.LSTM, 2, True, True, False, True),
    (nn.LSTM, 1, False, False, False, False),
    (nn.GRU, 1, True, False, True, False),
    (nn.GRU, 2, False, True, True, True),
    (nn.GRU, 2, True, True, False, True),
    (nn.GRU, 1, False, False, False, True),
]


def _rnn_id(c):
    cls, layers, bf, bi, bias, init = c
    return (
        f"{cls.__name__}-{layers}l-{'bf' if bf else 'sf'}{'-bi' if bi else ''}"
        f"{'' if bias else '-nobias'}{'-h0' if init else ''}"
    )


def _run_rnn(model, x, state, device):
    model = model.to(device)
    x = x.detach().to(device).requires_grad_()
    if state is not None:
        state = tuple(s.detach().to(device).requires_grad_() for s in state)
    args = (x,) if state is None else (x, state if len(state) == 2 else state[0])
    out, final = model(*args)
    finals = final if isinstance(final, tuple) else (final,)
    # A loss that reaches every output: the sequence and the final states.
    loss = (out * torch.linspace(-1, 1, out.shape[-1], device=device)).sum()
    for k, s in enumerate(finals):
        loss = loss + (k + 2) * s.square().sum()
    loss.backward()
    grads = [p.grad.cpu() for p in model.parameters()] + [x.grad.cpu()]
    if state is not None:
        grads += [s.grad.cpu() for s in state]
    return [out.detach().cpu()] + [s.detach().cpu() for s in finals], grads


@pytest.mark.parametrize("case", RNN_CASES, ids=_rnn_id)
def test_rnn_forward_and_backward_match_cpu(case, no_fallback):
    cls, layers, batch_first, bidirectional, bias, init = case
    torch.manual_seed(0)
    model = cls(
        4, 6, num_layers=layers, batch_first=batch_first, bidirectional=bidirectional, bias=bias
    )
    batch, seq = 3, 5
    x = torch.randn((batch, seq, 4) if batch_first else (seq, batch, 4))
    state = None
    if init:
        shape = (layers * (2 if bidirectional else 1), batch, 6)
        state = (
            (torch.randn(shape), torch.randn(shape)) if cls is nn.LSTM else (torch.randn(shape),)
        )
    clone = cls(
        4, 6, num_layers=layers, batch_first=batch_first, bidirectional=bidirectional, bias=bias
    )
    clone.load_state_dict(model.state_dict())
    want_out, want_grads = _run_rnn(model, x, state, "cpu")
    got_out, got_grads = _run_rnn(clone, x, state, "neuron")
    for got, want in zip(got_out, want_out):
        torch.testing.assert_close(got, want, **TOL)
    assert len(got_grads) == len(want_grads)
    for got, want in zip(got_grads, want_grads):
        torch.testing.assert_close(got, want, **TOL)


def test_rnn_cells_unbatched_and_no_grad(no_fallback):
    torch.manual_seed(0)
    for cls in (nn.LSTM, nn.GRU):
        model = cls(3, 4)
        x = torch.randn(6, 3)  # unbatched sequence
        with torch.no_grad():
            want, _ = model(x)
            got, _ = model.to("neuron")(x.to("neuron"))
        torch.testing.assert_close(got.cpu(), want, **TOL)


def test_lstm_grad_through_cell_state_only(no_fallback):
    """Only c_n reaches the loss: the fused backward gets no grad_hy for the last step."""
    torch.manual_seed(0)
    model = nn.LSTM(3, 5)
    x = torch.randn(4, 2, 3)
    _, (_, c) = model(x)
    c.sum().backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.to("neuron")
    _, (_, c) = model(x.to("neuron"))
    c.sum().backward()
    for p, w in zip(model.parameters(), want):
        torch.testing.assert_close(p.grad.cpu(), w, **TOL)


# ---- a small CNN trained for a few steps ---------------------------------------


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 8, 3, stride=2, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 3 * 3, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(x.flatten(1))


def _train(model, x, y, device, steps=3):
    model = model.to(device)
    x, y = x.to(device), y.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _train_cnn_on_both():
    torch.manual_seed(0)
    model = SmallCNN()
    clone = SmallCNN()
    clone.load_state_dict(model.state_dict())
    x, y = torch.randn(4, 3, 14, 14), torch.randint(0, 5, (4,))
    want = _train(model, x, y, "cpu")
    torch.neuron.synchronize()
    torch.neuron.reset_fallback_stats()
    got = _train(clone, x, y, "neuron")
    torch.neuron.synchronize()
    return got, want, set(torch.neuron.fallback_stats())


def test_cnn_training_matches_cpu():
    (got_losses, got_state), (want_losses, want_state), fell_back = _train_cnn_on_both()
    torch.testing.assert_close(torch.tensor(got_losses), torch.tensor(want_losses), **TOL)
    for k, want in want_state.items():
        torch.testing.assert_close(got_state[k], want, **TOL, msg=lambda m, k=k: f"{k}: {m}")
    assert fell_back == set()  # conv, batch norm, pooling and loss gradients are native


def test_convolution_backward_float64_channels_last(no_fallback):
    """64-bit policy as in the forward: computed at 32 bits, float64 results;
    grad_input in the input's (channels_last) layout."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64).to(memory_format=torch.channels_last)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64)
    x.requires_grad_(), w.requires_grad_()
    F.conv2d(x, w).sin().sum().backward()
    nx, nw = (t.detach().to("neuron").requires_grad_() for t in (x, w))
    F.conv2d(nx, nw).sin().sum().backward()
    assert nx.grad.dtype == nw.grad.dtype == torch.float64
    assert nx.grad.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(nx.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(nw.grad.cpu(), w.grad, rtol=1e-4, atol=1e-4)
