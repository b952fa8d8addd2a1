"""Dense linear algebra of small matrices, unrolled, for the decomposition table
(decompositions.py): LU with partial pivoting (``linalg_lu_factor_ex``, ``linalg_lu``,
``lu_unpack``, ``linalg_lu_solve``, ``_linalg_solve_ex``, ``linalg_inv_ex``,
``_linalg_det``, ``_linalg_slogdet``), Cholesky (``linalg_cholesky_ex``, ``cholesky``)
and triangular solves (``linalg_solve_triangular``, ``triangular_solve``, ``cholesky_solve``
as two of them).

torch-mlir lowers none of them (each was refused naming the op). A factorization is
unrolled over the matrix's columns, each step whole-tensor ops over the batch, so a
graph grows with n: matrices larger than ``MAX_N`` are not decomposed (the op stays and
is refused naming it, as before). LU follows LAPACK's ``getrf``: the pivot is the first
largest magnitude of the column (``argmax``), rows swapped, the column below times the
pivot's reciprocal (a zero pivot leaves a zero column and sets ``info``), the trailing
update's products rounded (no FMA), pivots 1-based int32.
Solves and Cholesky round in other orders than LAPACK's (and larger LUs than its unblocked one).
Gradients are ATen's formulas (AOTAutograd traces them above this table), which call
these ops again (``linalg_lu_solve``, ``linalg_solve_triangular``).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

MAX_N = 32  # larger matrices: the op is left in the graph and refused by name


_LOW = (torch.bfloat16, torch.float16)  # LAPACK has none: eager's CPU raises


def _small(*ts) -> bool:
    return all(
        t.dim() >= 2
        and max(t.shape[-2:]) <= MAX_N
        and t.is_floating_point()
        and t.dtype not in _LOW
        for t in ts
    )


# the ops of these tables and the public ones that reach them (``linalg_det``)
_FAMILY = {"lu_factor", "lu", "lu_unpack", "lu_solve", "solve", "inv", "det", "slogdet"}
_FAMILY |= {"cholesky", "solve_triangular", "triangular_solve", "geqrf", "ormqr", "qr"}
_FAMILY |= {"householder_product", "cholesky_solve", "cholesky_solve_helper"}


def refusal(node) -> str | None:
    """Why a linalg op left in the graph (``node``) is not lowered, for its error."""
    name = str(node.target).split(".")[1] if "." in str(node.target) else ""
    base = name.lstrip("_").removeprefix("linalg_").removesuffix("_ex")
    if base not in _FAMILY:
        return None
    vals = [a.meta.get("val") for a in node.args if isinstance(a, torch.fx.Node)]
    ts = [t for t in vals if isinstance(t, torch.Tensor) and t.is_floating_point()]
    low = [t.dtype for t in ts if t.dtype in _LOW]
    if low:  # eager raises too (LAPACK has no such kernels)
        return f"{name} takes float32 and float64, as eager's CPU kernels; got {low[0]}"
    big = [t.shape[-2:] for t in ts if t.dim() >= 2 and max(t.shape[-2:]) > MAX_N]
    if big:  # the largest operand: cholesky_solve's B (33 x 1) comes before its L (33 x 33)
        m, n = max(big, key=lambda s: (max(s), min(s)))
        return f"linalg ops are unrolled up to {MAX_N} x {MAX_N}; got {m} x {n}"
    return None


def _rounded(prod):
    """``prod`` unchanged (inf and NaN stay so), but XLA:CPU, which always lets LLVM fuse
    a multiply into the add after it, can no longer make an FMA of it: LAPACK rounds the
    product (getrf's factors then match MKL's bitwise for 5 <= n <= 16)."""
    return torch.where(prod.abs() < float("inf"), prod, prod * 2)


def _lu(a):
    """(LU, pivots int32 (*, k), info int32 (*)) of ``a`` (*, m, n), LAPACK's getrf."""
    m, n = a.shape[-2], a.shape[-1]
    batch = list(a.shape[:-2])
    rows = torch.arange(m, device=a.device)
    info = torch.zeros(batch, dtype=torch.int32, device=a.device)
    pivots = []
    for k in range(min(m, n)):
        p = torch.argmax(a[..., k:, k].abs(), -1) + k  # (*,)
        pivots.append(p)
        pe = p.unsqueeze(-1)
        idx = torch.where(rows == k, pe, torch.where(rows == pe, k, rows))
        a = torch.gather(a, -2, idx.unsqueeze(-1).expand(a.shape))
        pivot = a[..., k, k]
        zero = pivot == 0
        info = torch.where((info == 0) & zero, k + 1, info)
        if k + 1 == m:
            break
        # as getf2: times the pivot's reciprocal, divided only where that would overflow
        safe = torch.where(zero, 1.0, pivot).unsqueeze(-1)
        tiny = safe.abs() < torch.finfo(a.dtype).tiny
        col = a[..., k + 1 :, k]
        below = torch.where(tiny, col / safe, col * (1.0 / safe))
        trailing = a[..., k + 1 :, k + 1 :] - _rounded(
            below.unsqueeze(-1) * a[..., k : k + 1, k + 1 :]
        )
        lower = torch.cat([a[..., k + 1 :, :k], below.unsqueeze(-1), trailing], -1)
        a = torch.cat([a[..., : k + 1, :], lower], -2)
    if pivots:
        piv = torch.stack(pivots, -1).to(torch.int32) + 1
    else:
        piv = torch.zeros(batch + [0], dtype=torch.int32, device=a.device)
    return a, piv, info


def _permutation(pivots, m):
    """perm (*, m) int64: LAPACK's row swaps applied in order to ``arange(m)``, so
    ``P^T B = B[perm]`` and ``A = P L U`` with ``P[perm[i], i] = 1``."""
    rows = torch.arange(m, device=pivots.device)
    perm = rows.expand(list(pivots.shape[:-1]) + [m])
    for k in range(pivots.shape[-1]):
        p = pivots[..., k : k + 1].long() - 1
        at_k, at_p = perm[..., k : k + 1], torch.gather(perm, -1, p)
        perm = torch.where(rows == k, at_p, torch.where(rows == p, at_k, perm))
    return perm


def _parity(pivots):
    """-1.0 where the row swaps are odd in number, else 1.0 (*,)."""
    k = pivots.shape[-1]
    swaps = (pivots != torch.arange(1, k + 1, device=pivots.device, dtype=pivots.dtype)).sum(-1)
    return 1.0 - 2.0 * (swaps % 2).float()


def _trsm_lower(t, b, unit: bool):
    """X with ``tril(t) X = b`` (t (*, n, n), b (*, n, r)), by forward substitution."""
    n = t.shape[-1]
    xs, rest = [], b
    for i in range(n):
        x = rest[..., 0, :]
        if not unit:
            x = x / t[..., i, i : i + 1]
        xs.append(x)
        if i + 1 < n:
            rest = rest[..., 1:, :] - t[..., i + 1 :, i : i + 1] * x.unsqueeze(-2)
    if not xs:
        return b
    return torch.stack(xs, -2)


def _trsm(t, b, upper: bool, unit: bool):
    """X with ``T X = b``, T the upper or lower triangle of ``t`` (batch broadcast)."""
    batch = torch.broadcast_shapes(t.shape[:-2], b.shape[:-2])
    t = t.expand(list(batch) + list(t.shape[-2:]))
    b = b.expand(list(batch) + list(b.shape[-2:]))
    if upper:  # reversing rows and columns makes it lower
        return _trsm_lower(t.flip(-2, -1), b.flip(-2), unit).flip(-2)
    return _trsm_lower(t, b, unit)


def _solve_triangular(a, b, upper, left, unit):
    if left:
        return _trsm(a, b, upper, unit)
    return _trsm(a.mT, b.mT, not upper, unit).mT


def linalg_solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    if not _small(a, b):
        return NotImplemented
    return _solve_triangular(a, b, upper, left, unitriangular)


def triangular_solve(b, a, upper=True, transpose=False, unitriangular=False):
    if not _small(a, b):
        return NotImplemented
    # ATen broadcasts both batches first, so the copy of A has the joint batch too
    batch = list(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a = a.expand(batch + list(a.shape[-2:]))
    t = a.mT if transpose else a
    x = _trsm(t, b, upper != transpose, unitriangular)
    return x, a.clone()


def cholesky_solve(b, c, upper=False):
    """X with ``A X = b``, ``A = L L^H`` from its lower factor (``upper``: ``U^H U``):
    two triangular solves (batches broadcast, as ATen)."""
    if not _small(b, c):
        return NotImplemented
    y = _trsm(c.mT if upper else c, b, upper=False, unit=False)
    return _trsm(c if upper else c.mT, y, upper=True, unit=False)


def _lu_solve(lu, pivots, b, left=True, adjoint=False):
    """X with ``A X = B`` (``A^H X = B`` adjoint; ``X A = B`` not left), A = P L U."""
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return _lu_solve(lu, pivots, b.mT, True, not adjoint).mT
    n = lu.shape[-1]
    batch = torch.broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    b = b.expand(list(batch) + list(b.shape[-2:]))
    perm = _permutation(pivots, n).expand(list(batch) + [n])
    if not adjoint:  # L U X = P^T B
        pb = torch.gather(b, -2, perm.unsqueeze(-1).expand(b.shape))
        return _trsm(lu, _trsm(lu, pb, False, True), True, False)
    # U^T L^T P^T X = B: Z = L^-T U^-T B, X = P Z (X[perm] = Z)
    z = _trsm(lu.mT, _trsm(lu.mT, b, False, False), True, True)
    inverse = torch.argsort(perm, -1)
    return torch.gather(z, -2, inverse.unsqueeze(-1).expand(z.shape))


def linalg_lu_factor_ex(a, *, pivot=True, check_errors=False):
    if not pivot or not _small(a):
        return NotImplemented
    return _lu(a)


def _unpack(lu, pivots, unpack_data=True, unpack_pivots=True):
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    empty = lu.new_zeros([0])
    if unpack_pivots:
        perm = _permutation(pivots, m)
        p = torch.nn.functional.one_hot(perm, m).to(lu.dtype).mT
    else:
        p = empty
    if unpack_data:
        eye = torch.eye(m, k, dtype=lu.dtype, device=lu.device)
        lower = lu[..., :, :k].tril(-1) + eye
        upper = lu[..., :k, :].triu()
    else:
        lower = upper = empty
    return p, lower, upper


def lu_unpack(lu, pivots, unpack_data=True, unpack_pivots=True):
    if not _small(lu):
        return NotImplemented
    return _unpack(lu, pivots, unpack_data, unpack_pivots)


def linalg_lu(a, *, pivot=True):
    if not pivot or not _small(a):
        return NotImplemented
    lu, piv, _ = _lu(a)
    return _unpack(lu, piv)


def linalg_lu_solve(lu, pivots, b, *, left=True, adjoint=False):
    if not _small(lu, b):
        return NotImplemented
    return _lu_solve(lu, pivots, b, left, adjoint)


def _linalg_solve_ex(a, b, *, left=True, check_errors=False):
    """ATen's outputs: the solution, and the LU and pivots of A (its backward solves
    with them, ``adjoint=True``)."""
    if not _small(a):
        return NotImplemented
    vector = b.dim() == 1 or (b.dim() == a.dim() - 1 and b.shape == a.shape[:-1])
    bm = b.unsqueeze(-1) if vector else b
    if vector and not left:
        bm = b.unsqueeze(-2)
    lu, piv, info = _lu(a)
    x = _lu_solve(lu, piv, bm, left)
    if vector:
        x = x.squeeze(-1) if left else x.squeeze(-2)
    return x, lu, piv, info


def linalg_inv_ex(a, *, check_errors=False):
    if not _small(a):
        return NotImplemented
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    lu, piv, info = _lu(a)
    return _lu_solve(lu, piv, eye.expand(a.shape)), info


def _lu_for_det(a):
    """ATen's LU for det/slogdet: of ``A^T`` where A is contiguous (det(A^T) = det(A));
    their backward recomputes the choice and solves with the LU accordingly."""
    return _lu(a.mT if a.is_contiguous() else a)


def _linalg_det(a):
    if not _small(a):
        return NotImplemented
    lu, piv, _ = _lu_for_det(a)
    det = lu.diagonal(0, -2, -1).prod(-1) * _parity(piv).to(a.dtype)
    return det, lu, piv


def _linalg_slogdet(a):
    if not _small(a):
        return NotImplemented
    lu, piv, _ = _lu_for_det(a)
    diag = lu.diagonal(0, -2, -1)
    sign = diag.sign().prod(-1) * _parity(piv).to(a.dtype)
    return sign, diag.abs().log().sum(-1), lu, piv


def _cholesky_lower(a):
    """(L, info) from the lower triangle of ``a``, LAPACK's potrf: info is the first
    column (1-based) whose pivot is not positive. potrf stops there: that column's
    diagonal holds the pivot it found, the columns from it on the input's lower triangle."""
    n = a.shape[-1]
    info = torch.zeros(list(a.shape[:-2]), dtype=torch.int32, device=a.device)
    cols, pivots = [], []
    for j in range(n):
        c = a[..., j:, j]
        if j:
            done = torch.stack(cols, -1)  # (*, n, j): the columns so far
            c = c - (done[..., j:, :] * done[..., j : j + 1, :]).sum(-1)
        d = c[..., 0]
        pivots.append(d)
        bad = ~(d > 0)
        info = torch.where((info == 0) & bad, j + 1, info)
        root = d.sqrt()
        col = torch.cat([root.unsqueeze(-1), c[..., 1:] / root.unsqueeze(-1)], -1)
        if j:
            col = torch.cat([col.new_zeros(list(col.shape[:-1]) + [j]), col], -1)
        cols.append(col)
    if not cols:
        return a.clone(), info
    # where it failed (n where it did not): LAPACK's values, not the NaN computed past it
    stop = torch.where(info == 0, n, info - 1).unsqueeze(-1).unsqueeze(-1)
    j = torch.arange(n, device=a.device)
    rest = torch.where(j.unsqueeze(-1) == j, torch.stack(pivots, -1).unsqueeze(-1), a.tril())
    rest = torch.where(j == stop, rest, a.tril())
    return torch.where(j < stop, torch.stack(cols, -1), rest), info


def linalg_cholesky_ex(a, *, upper=False, check_errors=False):
    if not _small(a):
        return NotImplemented
    if upper:  # U from the upper triangle: the transpose of L from A^T's lower one
        lower, info = _cholesky_lower(a.mT)
        return lower.mT, info
    return _cholesky_lower(a)


def cholesky(a, upper=False):
    if not _small(a):
        return NotImplemented
    return linalg_cholesky_ex(a, upper=upper)[0]


def _linalg_check_errors(info, api_name, *, is_matrix):
    """Nothing: a compiled graph does not raise on a singular (or not positive-definite)
    input, it returns what the factorization gives (inf/NaN), as TorchNeuron's JAX
    lowering of it (a no-op). ``info`` of the ``_ex`` variants says where it failed."""
    return None


TABLE = {
    aten._linalg_check_errors.default: _linalg_check_errors,
    aten.linalg_lu_factor_ex.default: linalg_lu_factor_ex,
    aten.linalg_lu.default: linalg_lu,
    aten.lu_unpack.default: lu_unpack,
    aten.linalg_lu_solve.default: linalg_lu_solve,
    aten._linalg_solve_ex.default: _linalg_solve_ex,
    aten.linalg_inv_ex.default: linalg_inv_ex,
    aten._linalg_det.default: _linalg_det,
    aten._linalg_slogdet.default: _linalg_slogdet,
    aten.linalg_cholesky_ex.default: linalg_cholesky_ex,
    aten.cholesky.default: cholesky,
    aten.linalg_solve_triangular.default: linalg_solve_triangular,
    aten.triangular_solve.default: triangular_solve,
    aten.cholesky_solve.default: cholesky_solve,
    aten._cholesky_solve_helper.default: cholesky_solve,
}
