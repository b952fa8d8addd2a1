"""Householder QR of small matrices, unrolled, for the decomposition table
(decompositions.py): ``geqrf``, ``linalg_householder_product`` (``orgqr``), ``ormqr``
and ``linalg_qr`` (geqrf, then the product of its reflectors, as ATen computes it).

torch-mlir lowers none of them (each was refused naming the op). The reflectors are
LAPACK's (``dgeqr2``/``dlarfg``): for column j, ``beta = -sign(alpha) * ||(alpha, x)||``
(``+`` for ``alpha = 0``), ``tau = (beta - alpha) / beta``, ``v = x / (alpha - beta)``
with an implicit leading 1, and ``tau = 0`` (H = I) where ``x`` is zero; so Q and R
have LAPACK's signs. As in decompositions_linalg.py, matrices larger than ``MAX_N`` are
not decomposed (refused naming the op). Gradients are ATen's formulas.
"""

from __future__ import annotations

import torch

from .decompositions_linalg import MAX_N, _small  # noqa: F401  (MAX_N: the docstring's)

aten = torch.ops.aten


def _geqrf(a):
    m, n = a.shape[-2], a.shape[-1]
    taus = []
    for j in range(min(m, n)):
        alpha, x = a[..., j, j], a[..., j + 1 :, j]
        xnorm = x.square().sum(-1).sqrt()
        norm = (alpha.square() + xnorm.square()).sqrt()
        beta = torch.where(alpha >= 0, -norm, norm)
        keep = xnorm == 0  # H = I: tau 0, the column as it is
        safe_beta = torch.where(keep, 1.0, beta)
        tau = torch.where(keep, 0.0, (beta - alpha) / safe_beta)
        v = x / torch.where(keep, 1.0, alpha - beta).unsqueeze(-1)
        v = torch.where(keep.unsqueeze(-1), x, v)
        top = torch.where(keep, alpha, beta)
        taus.append(tau)
        u = torch.cat([torch.ones_like(top).unsqueeze(-1), v], -1)  # (*, m - j)
        rest = a[..., j:, j + 1 :]
        w = (u.unsqueeze(-1) * rest).sum(-2)  # u^T rest: (*, n - j - 1)
        rest = rest - (tau.unsqueeze(-1) * u).unsqueeze(-1) * w.unsqueeze(-2)
        col = torch.cat([top.unsqueeze(-1), v], -1).unsqueeze(-1)
        lower = torch.cat([a[..., j:, :j], col, rest], -1)
        a = torch.cat([a[..., :j, :], lower], -2)
    if taus:
        tau = torch.stack(taus, -1)
    else:
        tau = a.new_zeros(list(a.shape[:-2]) + [0])
    return a, tau


def _reflector(a, i, m):
    """u_i (*, m): zeros above row i, 1 at row i, then column i of ``a`` below it."""
    v = a[..., i + 1 : m, i]
    parts = [torch.ones_like(a[..., i, i : i + 1]), v]
    if i:
        parts.insert(0, v.new_zeros(list(v.shape[:-1]) + [i]))
    return torch.cat(parts, -1)


def _apply(a, tau, c, left: bool, forward: bool):
    """``c`` multiplied by the reflectors H_i = I - tau_i u_i u_i^T of ``a``, i in order
    (``forward``) or reversed: from the left (H c) or the right (c H)."""
    m = c.shape[-2] if left else c.shape[-1]
    k = tau.shape[-1]
    order = range(k) if forward else range(k - 1, -1, -1)
    for i in order:
        u = _reflector(a, i, m)
        t = tau[..., i : i + 1]
        if left:  # c - tau u (u^T c)
            w = (u.unsqueeze(-1) * c).sum(-2)
            c = c - (t * u).unsqueeze(-1) * w.unsqueeze(-2)
        else:  # c - tau (c u) u^T
            w = (c * u.unsqueeze(-2)).sum(-1)
            c = c - (t * w).unsqueeze(-1) * u.unsqueeze(-2)
    return c


def geqrf(a):
    if not _small(a):
        return NotImplemented
    return _geqrf(a)


def householder_product(a, tau):
    """Q = H_0 ... H_{k-1} applied to the first n columns of I (LAPACK's orgqr)."""
    if not _small(a):
        return NotImplemented
    m, n = a.shape[-2], a.shape[-1]
    eye = torch.eye(m, n, dtype=a.dtype, device=a.device)
    batch = torch.broadcast_shapes(a.shape[:-2], tau.shape[:-1])
    return _apply(a, tau, eye.expand(list(batch) + [m, n]), True, False)


def ormqr(a, tau, c, left=True, transpose=False):
    """Q c, Q^T c, c Q or c Q^T with Q = H_0 ... H_{k-1}."""
    if not _small(a, c):
        return NotImplemented
    # Q c = H_0 (... (H_{k-1} c)): the last reflector first; Q^T c the first first
    return _apply(a, tau, c, left, forward=(left == transpose))


def linalg_qr(a, mode="reduced"):
    if not _small(a) or mode not in ("reduced", "complete", "r"):
        return NotImplemented
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    h, tau = _geqrf(a)
    if mode == "r":
        return a.new_zeros([0]), h[..., :k, :].triu()
    cols = m if mode == "complete" else k
    eye = torch.eye(m, cols, dtype=a.dtype, device=a.device)
    q = _apply(h, tau, eye.expand(list(a.shape[:-2]) + [m, cols]), True, False)
    r = h[..., :cols, :].triu()
    return q, r


TABLE = {
    aten.geqrf.default: geqrf,
    aten.linalg_householder_product.default: householder_product,
    aten.ormqr.default: ormqr,
    aten.linalg_qr.default: linalg_qr,
}
