"""Small dense linear algebra compiled against the CPU (decompositions_linalg.py): LU
with partial pivoting (solve, inv, det, slogdet, lu_factor, lu, lu_unpack, lu_solve),
Cholesky, triangular solves and `cholesky_solve`, with their gradients (ATen's formulas, which call these
ops again), and Householder QR (decompositions_householder.py). Each was refused
naming its op before; a matrix past MAX_N still is."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron.compiler.decompositions_linalg import MAX_N
from torchneuron.compiler.errors import NeuronCompileError

_TOL = {"rtol": 1e-4, "atol": 1e-4}


def _compiled(f, *args):
    torch._dynamo.reset()
    out = torch.compile(f, backend="neuron")(*(a.to("neuron") for a in args))
    return tuple(o.cpu() for o in out) if isinstance(out, tuple) else out.cpu()


def _a(*batch, n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    # well conditioned: random plus n on the diagonal
    return torch.randn(*batch, n, n, generator=g) + n * torch.eye(n)


def _pd(*batch, n=5, seed=1):
    a = _a(*batch, n=n, seed=seed)
    return a @ a.mT + torch.eye(n)


def test_solve_inv_det_slogdet():
    a, b = _a(2), torch.randn(2, 5, 3)
    # a row swap is needed: the first column's largest entry is not on the diagonal
    a[:, 3, 0] = 40.0

    def f(a, b):
        return (
            torch.linalg.solve(a, b),
            torch.linalg.solve(a, b[..., 0]),
            torch.linalg.solve(a, b.mT, left=False),
            torch.linalg.inv(a),
            torch.linalg.det(a),
            *torch.linalg.slogdet(a),
        )

    for got, ref in zip(_compiled(f, a, b), f(a, b)):
        torch.testing.assert_close(got, ref, **_TOL)


def test_lu_factor_matches_lapack_pivots():
    a = _a(3, n=6, seed=2)
    a[1, 4, 0] = 50.0  # partial pivoting picks row 4 for column 0
    lu, piv, info = _compiled(lambda a: torch.linalg.lu_factor_ex(a), a)
    rlu, rpiv, rinfo = torch.linalg.lu_factor_ex(a)
    assert piv.dtype == torch.int32 and torch.equal(piv, rpiv) and torch.equal(info, rinfo)
    torch.testing.assert_close(lu, rlu, **_TOL)
    p, low, up = _compiled(lambda a: torch.linalg.lu(a), a)
    rp, rlow, rup = torch.linalg.lu(a)
    assert torch.equal(p, rp)
    torch.testing.assert_close(low, rlow, **_TOL)
    torch.testing.assert_close(up, rup, **_TOL)


def test_lu_of_a_wide_and_a_singular_matrix():
    wide = torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    singular = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    for a in (wide, singular):
        lu, piv, info = _compiled(lambda a: torch.linalg.lu_factor_ex(a), a)
        rlu, rpiv, rinfo = torch.linalg.lu_factor_ex(a)
        assert torch.equal(piv, rpiv) and torch.equal(info, rinfo)
        torch.testing.assert_close(lu, rlu, **_TOL)


@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("left", [True, False])
def test_lu_solve(left, adjoint):
    a = _a(2, seed=4)
    a[0, 2, 0] = 30.0
    lu, piv = torch.linalg.lu_factor(a)
    b = torch.randn(2, 5, 2) if left else torch.randn(2, 2, 5)

    def f(lu, piv, b):
        return torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint)

    torch.testing.assert_close(_compiled(f, lu, piv, b), f(lu, piv, b), **_TOL)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_triangular_solves(upper):
    p, b = _pd(2), torch.randn(2, 5, 3)

    def f(p, b):
        c = torch.linalg.cholesky(p, upper=upper)
        return (
            c,
            torch.linalg.cholesky_ex(p, upper=upper)[1],
            torch.linalg.solve_triangular(c, b, upper=upper),
            torch.linalg.solve_triangular(c, b.mT, upper=upper, left=False, unitriangular=True),
            torch.triangular_solve(b, c, upper=upper, transpose=True)[0],
        )

    for got, ref in zip(_compiled(f, p, b), f(p, b)):
        torch.testing.assert_close(got, ref, **_TOL)


def test_cholesky_info_of_a_matrix_not_positive_definite():
    p = _pd(seed=5)
    p[2, 2] = -1.0
    _, info = _compiled(lambda p: torch.linalg.cholesky_ex(p), p)
    assert int(info) == int(torch.linalg.cholesky_ex(p)[1]) == 3


def test_gradients():
    a, p, b = _a(2, seed=6), _pd(2, seed=7), torch.randn(2, 5, 2)

    def loss(a, p, b):
        return (
            torch.linalg.solve(a, b).sum()
            + torch.linalg.inv(a).sum()
            + torch.linalg.det(a).sum()
            + torch.linalg.slogdet(a)[1].sum()
            + torch.linalg.cholesky(p).sum()
            + torch.linalg.lu_factor(a)[0].sum()
        )

    cpu = [t.clone().requires_grad_() for t in (a, p, b)]
    ref = torch.autograd.grad(loss(*cpu), cpu)
    dev = [t.to("neuron").requires_grad_() for t in (a, p, b)]
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(loss, backend="neuron")(*dev), dev)
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.cpu(), r, rtol=1e-4, atol=1e-3)


def test_a_matrix_past_the_limit_is_refused_naming_the_op():
    a = _a(n=MAX_N + 1)
    with pytest.raises(Exception) as e:
        _compiled(lambda a: torch.linalg.inv_ex(a)[0], a)
    err = e.value
    while err is not None and not isinstance(err, NeuronCompileError):
        err = err.__cause__ or err.__context__
    assert err is not None, e.value
    assert err.op == "aten.linalg_inv_ex.default", str(err)
    assert f"unrolled up to 32 x 32; got {MAX_N + 1} x {MAX_N + 1}" in str(err)


@pytest.mark.parametrize("shape", [(5, 5), (2, 6, 4), (4, 6)])
def test_householder_qr(shape):
    """decompositions_householder.py: LAPACK's reflectors, so Q and R have its signs."""
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(8))
    m = shape[-2]
    c = torch.randn(*shape[:-2], m, 3)

    def f(a, c):
        h, tau = torch.geqrf(a)
        out = [h, tau, *torch.linalg.qr(a), *torch.linalg.qr(a, mode="complete")]
        out += [torch.ormqr(h, tau, c, True, t) for t in (False, True)]
        out += [torch.ormqr(h, tau, c.mT, False, t) for t in (False, True)]
        if m >= shape[-1]:
            out.append(torch.linalg.householder_product(h, tau))
        return tuple(out)

    for got, ref in zip(_compiled(f, a, c), f(a, c)):
        torch.testing.assert_close(got, ref, **_TOL)


def test_qr_gradient():
    a = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(9))

    def loss(a):
        q, r = torch.linalg.qr(a)
        return (q * torch.arange(4.0, device=a.device)).sum() + r.sum()

    cpu = a.clone().requires_grad_()
    ref = torch.autograd.grad(loss(cpu), cpu)[0]
    dev = a.to("neuron").requires_grad_()
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(loss, backend="neuron")(dev), dev)[0]
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shapes", [((1, 5, 5), (4, 5, 3)), ((5, 5), (2, 3, 5, 3)), ((2, 1, 5, 5), (3, 5, 3))]
)
def test_triangular_solves_broadcast_batches(shapes):
    """ATen broadcasts the batches of A and B: triangular_solve's copy of A has the joint
    batch too (it came back with A's own)."""
    a, b = _a(*shapes[0][:-2], seed=10), torch.randn(shapes[1])
    lu, piv = torch.linalg.lu_factor(a)

    def f(a, b, lu, piv):
        return (
            *torch.triangular_solve(b, a),
            *torch.triangular_solve(b, a, upper=False, transpose=True),
            torch.linalg.solve_triangular(a, b.mT, upper=True, left=False),
            torch.linalg.solve(a, b),
            torch.linalg.lu_solve(lu, piv, b, adjoint=True),
        )

    for got, ref in zip(_compiled(f, a, b, lu, piv), f(a, b, lu, piv)):
        assert got.shape == ref.shape
        torch.testing.assert_close(got, ref, **_TOL)


def test_lu_rounds_as_lapack():
    """getf2's order: times the pivot's reciprocal, the products rounded before the
    subtraction (XLA:CPU made FMAs of them). A singular matrix then has LAPACK's zero
    pivot and info (it had 1.8e-7 and info 0); n from 5 to 16 agree bitwise."""
    singular = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])

    def f(a):
        return (
            *torch.linalg.lu_factor_ex(a),
            *torch.linalg.inv_ex(a),
            *torch.linalg.solve_ex(a, a),
        )

    got, ref = _compiled(f, singular), f(singular)
    for i in (0, 1, 2, 4, 6):  # LU, pivots and the infos
        assert torch.equal(got[i], ref[i]), (i, got[i], ref[i])
    assert int(got[2]) == 3
    for n in (5, 8, 16):
        a = torch.randn(10, n, n, generator=torch.Generator().manual_seed(n))
        for got, ref in zip(_compiled(torch.linalg.lu_factor_ex, a), torch.linalg.lu_factor_ex(a)):
            assert torch.equal(got, ref), n


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_of_a_matrix_not_positive_definite_leaves_lapacks_values(upper):
    """potrf stops at the failing column: its pivot on the diagonal, the input's triangle
    past it (the columns past it were NaN), each batch element at its own column."""
    p = _pd(3, seed=11)
    p[0, 2, 2] = -1.0
    p[2] = torch.eye(5)
    p[2, 0, 1] = p[2, 1, 0] = 2.0  # fails at column 2
    p[2, 3, 1] = 7.0  # in the lower triangle only: which triangle is read
    f = lambda p: torch.linalg.cholesky_ex(p, upper=upper)  # noqa: E731
    (got, info), (ref, rinfo) = _compiled(f, p), f(p)
    assert torch.equal(info, rinfo) and rinfo.tolist() == [3, 0, 2]
    torch.testing.assert_close(got, ref, **_TOL)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_is_refused_as_eager(dtype):
    """LAPACK has no bfloat16/float16 kernels: eager raises (RuntimeError for inv, from
    its meta function, which Dynamo runs too; NotImplementedError for the others), so
    the compiled op is refused naming it and the dtype (it ran in that dtype)."""
    a = _a(2, n=4, seed=12).to(dtype)
    for f in (torch.linalg.det, torch.linalg.cholesky, lambda a: torch.linalg.qr(a)[1]):
        with pytest.raises((RuntimeError, NotImplementedError)):
            f(a)
        with pytest.raises(Exception) as e:
            _compiled(f, a)
        err = e.value
        while err is not None and not isinstance(err, NeuronCompileError):
            err = err.__cause__ or err.__context__
        assert err is not None and err.op is not None and "linalg" in err.op, e.value
        assert f"takes float32 and float64, as eager's CPU kernels; got {dtype}" in str(err)
    with pytest.raises(RuntimeError, match=f"Low precision dtypes not supported. Got {dtype}"):
        _compiled(torch.linalg.inv, a)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize(
    "shapes",
    [((5, 5), (5, 2)), ((3, 5, 5), (3, 5, 3)), ((5, 5), (2, 5, 1)), ((2, 1, 5, 5), (3, 5, 2))],
)
def test_cholesky_solve(upper, shapes):
    # two triangular solves with the factor (refused naming the op before); batches broadcast
    (sa, _), b = shapes, torch.randn(*shapes[1], generator=torch.Generator().manual_seed(8))
    c = torch.linalg.cholesky(_pd(*sa[:-2], seed=9), upper=upper)

    def f(b, c):
        return torch.cholesky_solve(b, c, upper)

    ref, got = f(b, c), _compiled(f, b, c)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    torch.testing.assert_close(got, ref, **_TOL)


def test_cholesky_solve_gradient_and_its_limit():
    c, b = torch.linalg.cholesky(_pd(2, seed=10)), torch.randn(2, 5, 3)
    w = torch.randn(2, 5, 3)

    def loss(b, c):
        return (torch.cholesky_solve(b, c) * w.to(b.device)).sum()

    cpu = [t.clone().requires_grad_() for t in (b, c)]
    ref = torch.autograd.grad(loss(*cpu), cpu)
    dev = [t.to("neuron").requires_grad_() for t in (b, c)]
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(loss, backend="neuron")(*dev), dev)
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.cpu(), r, rtol=1e-4, atol=1e-3)
    big = torch.linalg.cholesky(_pd(n=MAX_N + 1))
    with pytest.raises(Exception) as e:
        _compiled(lambda b, c: torch.cholesky_solve(b, c), torch.randn(MAX_N + 1, 1), big)
    err = e.value
    while err is not None and not isinstance(err, NeuronCompileError):
        err = err.__cause__ or err.__context__
    assert err is not None and err.op == "aten.cholesky_solve.default", e.value
    # the matrix is named, not b (33 x 1), which comes first
    assert f"unrolled up to 32 x 32; got {MAX_N + 1} x {MAX_N + 1}" in str(err), str(err)
