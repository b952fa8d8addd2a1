"""The CPU fallback keeps layouts: inputs reach the CPU kernel with their own
strides (a strided or transposed matrix stays so; linalg_det factors A^T of a
contiguous A and its backward relies on that), and results come back with the
CPU kernel's strides (column-major LAPACK factors). Forward values, strides
and gradients against the same computation on the CPU (issue 23)."""

import warnings

import pytest
import torch

N = 5


def _general():
    g = torch.Generator().manual_seed(0)
    return torch.randn(N, N, generator=g) + N * torch.eye(N)


def _spd():
    g = torch.Generator().manual_seed(1)
    b = torch.randn(N, N, generator=g)
    return b @ b.mT + N * torch.eye(N)


def _rhs():
    return torch.randn(N, 3, generator=torch.Generator().manual_seed(2))


def _laid_out(m, layout, device):
    """m (2-d) on `device` as a leaf in the given memory layout."""
    if layout == "contiguous":
        t = m.clone().to(device)
    elif layout == "strided":  # every other column of a wider buffer
        t = torch.empty(m.shape[0], 2 * m.shape[1], device=device)[:, ::2]
        t.copy_(m)
    else:  # transposed: column-major
        t = m.mT.contiguous().to(device).mT
    return t.requires_grad_()


def _loss_weights(outs):
    g = torch.Generator().manual_seed(3)
    return [torch.randn(o.shape, generator=g) for o in outs]


def _triangular(a):
    return torch.triu(a) + N * torch.eye(N, device=a.device)


# name -> (input matrix, function of the leaf returning a tuple of tensors, differentiable)
CASES = {
    "det": (_general, lambda a: (torch.linalg.det(a),), True),
    "slogdet": (_general, lambda a: tuple(torch.linalg.slogdet(a)), True),
    "logdet": (_general, lambda a: (torch.logdet(a),), True),
    "inv": (_general, lambda a: (torch.linalg.inv(a),), True),
    "solve": (_general, lambda a: (torch.linalg.solve(a, _rhs().to(a.device)),), True),
    "lu_factor": (_general, lambda a: tuple(torch.linalg.lu_factor(a)), True),
    "lu_solve": (
        _general,
        lambda a: (torch.linalg.lu_solve(*torch.linalg.lu_factor(a), _rhs().to(a.device)),),
        True,
    ),
    "solve_triangular": (
        _general,
        lambda a: (torch.linalg.solve_triangular(_triangular(a), _rhs().to(a.device), upper=True),),
        True,
    ),
    "triangular_solve": (
        _general,
        lambda a: tuple(torch.triangular_solve(_rhs().to(a.device), _triangular(a))),
        True,
    ),
    "qr": (_general, lambda a: tuple(torch.linalg.qr(a)), True),
    # U S Vh and the singular values: invariant to the singular vectors' signs
    "svd": (
        _general,
        lambda a: (lambda u, s, vh: (u * s @ vh, s))(*torch.linalg.svd(a)),
        True,
    ),
    "svd_factors": (_general, lambda a: tuple(torch.linalg.svd(a)), False),
    "eigh": (_spd, lambda a: (lambda w, v: (w, v.abs()))(*torch.linalg.eigh(a)), True),
    "cholesky": (_spd, lambda a: (torch.linalg.cholesky(a),), True),
    "ldl_factor": (_spd, lambda a: tuple(torch.linalg.ldl_factor(a)), False),
}


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_fallback_values_strides_and_gradients_match_cpu(name, layout):
    make, fn, differentiable = CASES[name]
    m = make()
    ref_in = _laid_out(m, layout, "cpu")
    dev_in = _laid_out(m, layout, "neuron")
    assert dev_in.stride() == ref_in.stride()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = fn(ref_in)
        got = fn(dev_in)
        assert len(got) == len(ref)
        for r, d in zip(ref, got):
            assert d.device.type == "neuron"
            assert d.dtype == r.dtype and d.shape == r.shape
            if r.numel() > 1:
                assert d.stride() == r.stride(), (name, d.stride(), r.stride())
            torch.testing.assert_close(d.cpu(), r, rtol=1e-4, atol=1e-4)
        if not differentiable:
            return
        diff = [(r, d) for r, d in zip(ref, got) if r.requires_grad]
        weights = _loss_weights([r for r, _ in diff])
        ref_loss = sum((r * w).sum() for (r, _), w in zip(diff, weights))
        dev_loss = sum((d * w.neuron()).sum() for (_, d), w in zip(diff, weights))
        (ref_grad,) = torch.autograd.grad(ref_loss, ref_in)
        (dev_grad,) = torch.autograd.grad(dev_loss, dev_in)
    torch.testing.assert_close(
        dev_grad.cpu(), ref_grad, rtol=1e-4, atol=1e-4 * ref_grad.abs().max()
    )


def test_issue_repro_det_gradient_of_a_strided_input():
    g = _general()
    a = torch.empty(5, 10, device="neuron")[:, ::2]
    a.copy_(g)
    a.requires_grad_()
    c = g.clone().requires_grad_()
    for fn in (torch.linalg.det, lambda x: torch.linalg.slogdet(x)[1], torch.logdet):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (ga,) = torch.autograd.grad(fn(a), a)
        (gc,) = torch.autograd.grad(fn(c), c)
        torch.testing.assert_close(ga.cpu(), gc, rtol=1e-4, atol=1e-4 * gc.abs().max())
