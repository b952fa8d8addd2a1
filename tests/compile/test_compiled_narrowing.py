"""The 64-bit policy in compiled graphs: float64 computed in 32 bits, int64 arithmetic and
comparisons in int32 (wrapping as in eager), index arguments and data movement at full
width, outputs in their original dtype, so compiled and eager agree;
TORCHNEURON_NARROW_64BIT=0 keeps full width."""

import torch
from compile_support import fresh_compile_state  # noqa: F401
from conftest import run_python

import torchneuron  # noqa: F401


def _f(x, idx):
    y = (x * 1.000000001).exp().cumsum(0)
    g = torch.gather(y, 0, idx)  # gather keeps int64 indices (exempt)
    return g, idx.sum() * 3, torch.arange(5, dtype=torch.int64) * 2


def test_float64_int64_graph_matches_eager_narrowed():
    x = torch.linspace(0, 1, 100, dtype=torch.float64)
    idx = torch.tensor([0, 5, 99], dtype=torch.int64)
    xd, idxd = x.to("neuron"), idx.to("neuron")
    eager = _f(xd, idxd)
    comp = torch.compile(_f, backend="neuron")(xd, idxd)
    for e, c in zip(eager, comp):
        assert c.dtype == e.dtype  # original dtypes restored
        assert torch.allclose(c.cpu(), e.cpu(), rtol=2e-6, atol=0)  # float32's precision
    ref = _f(x, idx)[0]
    # computed in float32: off the float64 result by float32 rounding, not by 1e-15
    err = ((comp[0].cpu() - ref).abs() / ref.abs()).max().item()
    assert 1e-10 < err < 2e-6


def test_full_width_when_narrowing_off():
    out = run_python(
        """
        import torch, torchneuron
        x = torch.linspace(0, 1, 100, dtype=torch.float64)
        f = lambda x: (x * 1.000000001).exp().cumsum(0)
        c = torch.compile(f, backend="neuron")(x.to("neuron")).cpu()
        print(c.dtype, (c - f(x)).abs().max().item() < 1e-12)
    """,
        env={"TORCHNEURON_NARROW_64BIT": "0"},
    )
    assert out.stdout.split() == ["torch.float64", "True"]


def _int_ops(a, b, idx, x, big):
    return (
        a + 1,
        big * 1,
        (big * 3).sum(),
        torch.cumsum(big, 0),
        a > big,
        a == -(2**31),
        torch.gather(x, 0, idx),
        idx + 0,
        torch.cat([big, a]),
        big.max(),
        torch.embedding(x.view(-1, 1), idx),
        a * b - 7,
    )


def test_int64_wraps_as_in_eager():
    a = torch.tensor([2**31 - 1, 5], dtype=torch.int64)
    b = torch.tensor([2**20, -3], dtype=torch.int64)
    big = torch.tensor([3_000_000_000, 2**40], dtype=torch.int64)
    idx = torch.tensor([1, 0], dtype=torch.int64)
    x = torch.tensor([10.0, 20.0])
    args = [t.to("neuron") for t in (a, b, idx, x, big)]
    eager = _int_ops(*args)
    comp = torch.compile(_int_ops, backend="neuron")(*args)
    for e, c in zip(eager, comp):
        assert c.dtype == e.dtype and torch.equal(c.cpu(), e.cpu())
    wrap = lambda v: (v + 2**31) % 2**32 - 2**31  # noqa: E731
    assert comp[0].cpu().tolist() == [-(2**31), 6]  # docs/device.md: 2**31 - 1 + 1
    assert comp[1].cpu().tolist() == [-1294967296, 0]  # 3_000_000_000 * 1
    assert comp[2].item() == wrap(-1294967296 * 3)  # the sum's terms wrapped
    assert comp[11].cpu().tolist() == [wrap((2**31 - 1) * 2**20) - 7, -22]
    # data movement and indices keep full width: the CPU's values
    assert comp[8].cpu().tolist() == [3_000_000_000, 2**40, 2**31 - 1, 5]
    assert comp[6].cpu().tolist() == [20.0, 10.0] and comp[7].cpu().tolist() == [1, 0]


def test_int64_full_width_when_narrowing_off():
    out = run_python(
        """
        import torch, torchneuron
        f = lambda a: (a + 1, (a * 3).sum())
        a = torch.tensor([2**31 - 1, 3_000_000_000])
        print([t.cpu().tolist() for t in torch.compile(f, backend="neuron")(a.to("neuron"))])
    """,
        env={"TORCHNEURON_NARROW_64BIT": "0"},
    )
    assert out.stdout.strip() == str([[2**31, 3_000_000_001], (2**31 - 1 + 3_000_000_000) * 3])


def test_int64_position_ids_and_mask_model_matches_eager():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    m = BertModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 8:] = 0
    pos = torch.arange(12, dtype=torch.int64).expand(2, 12)
    ref = m(input_ids=ids, attention_mask=mask, position_ids=pos).last_hidden_state
    md = m.to("neuron")
    with torch.no_grad():
        out = torch.compile(md, backend="neuron")(
            input_ids=ids.to("neuron"),
            attention_mask=mask.to("neuron"),
            position_ids=pos.to("neuron"),
        )
    assert torch.allclose(out.last_hidden_state.cpu(), ref, atol=1e-4)


def _moves(x):
    return (
        x.flip(0),
        torch.cat([x, x]),
        x[2:5],
        x.clone(),
        x[torch.tensor([1, 2], device=x.device)],
        torch.where(x > 0, x, 0.0),
        x.view(2, 4).t().contiguous(),
    )


def test_float64_data_movement_is_exact_as_on_cpu():
    # eager never narrows data movement: moved float64 values are the CPU's bit for bit
    # (compiled graphs used to round them to float32, or failed to lower flip/slice/clone)
    x = torch.randn(8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    comp = torch.compile(_moves, backend="neuron")(x.to("neuron"))
    for c, r in zip(comp, _moves(x)):
        assert c.dtype == torch.float64 and torch.equal(c.cpu(), r)


def test_narrowing_switched_off_in_process_recompiles_full_width():
    # the graph index key follows the switch itself, not only the variable: a graph
    # compiled narrowed must not serve a full-width request (it did, silently)
    a = torch.tensor([2**31 - 1, 3_000_000_000])
    f = lambda a: a + 1  # noqa: E731
    assert torch.compile(f, backend="neuron")(a.to("neuron")).cpu().tolist() == [
        -(2**31),
        -1294967295,
    ]
    torch._dynamo.reset()
    torchneuron._C._set_narrow_64bit(False)  # restored by the conftest fixture
    assert torch.equal(torch.compile(f, backend="neuron")(a.to("neuron")).cpu(), f(a))


def _switch_case(a, x):
    return a + 1, (a * 3).sum(), (x * (1 + 1e-12)).exp()


def _check_switch_case(f, a, x, narrow):
    torchneuron._C._set_narrow_64bit(narrow)
    got = f(a.to("neuron"), x.to("neuron"))
    eager = _switch_case(a.to("neuron"), x.to("neuron"))
    for g, e in zip(got, eager):
        assert g.dtype == e.dtype and torch.equal(g.cpu(), e.cpu()), (narrow, g, e)
    if not narrow:  # full width: the CPU's values
        for g, r in zip(got, _switch_case(a, x)):
            assert torch.equal(g.cpu(), r), (g, r)


def test_compiled_function_follows_the_switch_without_reset():
    # Dynamo does not guard on the switch: a compiled function kept its narrowed graph
    # after _set_narrow_64bit(False), so a + 1 at 2**31 - 1 still wrapped (eager: 2**31)
    a = torch.tensor([2**31 - 1, 3_000_000_000])
    x = torch.tensor([1e-3, 2.0], dtype=torch.float64)
    f = torch.compile(_switch_case, backend="neuron")
    for narrow in (True, False, True, False):  # restored by the conftest fixture
        _check_switch_case(f, a, x, narrow)
    torchneuron._C._set_narrow_64bit(False)
    assert f(a.to("neuron"), x.to("neuron"))[0].cpu().tolist() == [2**31, 3_000_000_001]
    recs = torch.neuron.get_dynamo_metrics()
    assert len(recs) == 2, recs  # one graph per setting, each compiled once
    assert "narrowing switched off" in recs[1]["recompile_reason"]


def test_compiled_backward_follows_the_switch_without_reset():
    w = torch.tensor([1 + 1e-12, 3.0], dtype=torch.float64)

    def loss(p):
        return (p * w.to(p.device)).exp().sum()

    f = torch.compile(loss, backend="neuron")
    p = torch.tensor([0.5, 0.25], dtype=torch.float64, requires_grad=True)
    loss(p).backward()
    cpu = p.grad
    for narrow in (False, True, False):
        torchneuron._C._set_narrow_64bit(narrow)
        grads = []
        for fn in (f, loss):
            p = torch.tensor([0.5, 0.25], dtype=torch.float64, device="neuron", requires_grad=True)
            fn(p).backward()
            grads.append(p.grad.cpu())
        # XLA's float64 exp and ATen's may differ in the last bit; float32's are 1e-8 off
        tol = 2e-7 if narrow else 1e-14
        torch.testing.assert_close(grads[0], grads[1], rtol=tol, atol=0)
        err = ((grads[0] - cpu).abs() / cpu).max().item()
        assert (err > 1e-10) if narrow else (err < 1e-14), (narrow, err)


def _counted(x, i):
    y = (x * 2 + x).exp().sum()
    # layer_norm and softmax reach the backend decomposed: still one call each
    return (
        y,
        (i + 1) > 3,
        torch.cat([i, i]),
        x[1:3] * 1.5,
        i.cumsum(0),
        torch.nn.functional.layer_norm(x.view(2, 3), (3,)),
        torch.softmax(x, 0),
    )


def test_compiled_narrowing_counted_as_eager():
    # two calls each: the same {op: calls} in torch.neuron.narrowing_stats()
    x = torch.randn(6, dtype=torch.float64).to("neuron")
    i = torch.arange(6).to("neuron")
    torch.neuron.reset_narrowing_stats()
    for _ in range(2):
        _counted(x, i)
    torch.neuron.synchronize()
    eager = torch.neuron.narrowing_stats()
    torch.neuron.reset_narrowing_stats()
    f = torch.compile(_counted, backend="neuron")
    for _ in range(2):
        f(x, i)
    torch.neuron.synchronize()
    assert torch.neuron.narrowing_stats() == eager
    assert eager == {
        "aten::mul.Tensor": 4,
        "aten::add.Tensor": 4,
        "aten::exp": 2,
        "aten::sum": 2,
        "aten::gt.Scalar": 2,
        "aten::cumsum": 2,
        "aten::native_layer_norm": 2,
        "aten::_softmax": 2,
    }


def _fallback_ops(t, f):
    return (
        torch.sort(t).values,
        t // 7,
        t >> 3,
        t.topk(1).values,
        t // 2**33,
        t % 2**33,
        torch.nan_to_num(f),
        torch.sort(f).values,
        t + 1,
    )


def test_ops_eager_runs_on_the_cpu_fallback_keep_full_width():
    # eager narrows only the ops it computes with a neuron kernel: >> and nan_to_num take
    # the CPU fallback at full width, sort and topk only move values (never narrowed),
    # and a divisor that wraps to 0 (2**33) keeps full width, so compiled they must too
    # (they had been narrowed: sort of 2**40 gave [0, 1, 3], x // 2**33 divided by the
    # wrapped 0); t // 7 and t + 1 are native: they wrap in both
    t = torch.tensor([2**40, 3, 2**40 + 1, -7], dtype=torch.int64)
    f = torch.tensor([3e39, 1 + 1e-12, 1.0, -3.5], dtype=torch.float64)
    args = (t.to("neuron"), f.to("neuron"))
    eager = _fallback_ops(*args)
    comp = torch.compile(_fallback_ops, backend="neuron")(*args)
    cpu = _fallback_ops(t, f)
    for i, (c, e, r) in enumerate(zip(comp, eager, cpu)):
        assert c.dtype == e.dtype == r.dtype, i
        assert torch.equal(c.cpu(), e.cpu()), (i, c.cpu(), e.cpu())
        if i not in (1, 8):
            assert torch.equal(c.cpu(), r), (i, c.cpu(), r)
    assert torch.equal(comp[1].cpu(), (t.to(torch.int32) // 7).long())  # narrowed, as eager


def _scalar_operand_ops(t, f):
    return (
        t % 3,
        t | 1,
        t ^ 3,
        torch.fmod(t, 3),
        f % 2.5,
        t % 2**33,
        torch.fmod(t, -(2**33)),
        t % -(2**32),
        t // 3,
        t % 2**31,
        1 - t,
        2.5 - f,
    )


def test_scalar_operand_ops_narrow_as_eager():
    # x % 3, x | 1, fmod(x, 3) are .Scalar overloads whose composite kernel calls the
    # narrowing .Tensor one in eager (1 - x, rsub.Scalar, calls sub.Tensor); compiled they were judged fallback ops and kept
    # full width (2**40 % 3 gave 1, eager 0). A divisor that is 0 at 32 bits (2**33)
    # makes eager's narrowed kernel fail, so eager and compiled compute it at full width.
    t = torch.tensor([2**40, 3, 2**40 + 1, -7, 2**33 + 5, -3_000_000_000], dtype=torch.int64)
    f = torch.tensor([3e39, 1 + 1e-12, -7.25, 2.5], dtype=torch.float64)
    args = (t.to("neuron"), f.to("neuron"))
    stats = []
    for fn in (_scalar_operand_ops, torch.compile(_scalar_operand_ops, backend="neuron")):
        torch.neuron.reset_narrowing_stats()
        torch.neuron.reset_full_width_stats()
        out = [o.cpu() for o in fn(*args)]
        torch.neuron.synchronize()
        stats.append((out, torch.neuron.narrowing_stats(), torch.neuron.full_width_stats()))
    (eager, *eager_stats), (comp, *comp_stats) = stats
    for i, (c, e) in enumerate(zip(comp, eager)):
        assert c.dtype == e.dtype, i
        torch.testing.assert_close(c, e, rtol=0, atol=0, equal_nan=True)  # 3e39 % 2.5
    assert comp_stats == eager_stats
    t32 = t.to(torch.int32)  # what eager's narrowing computes: int32, result restored
    assert torch.equal(eager[0], (t32 % 3).long()) and torch.equal(eager[1], (t32 | 1).long())
    assert torch.equal(eager[9], (t32 % -(2**31)).long())  # 2**31 is -2**31 at 32 bits
    cpu = _scalar_operand_ops(t, f)
    for i in (5, 6, 7):  # zero-at-32-bit divisors: full width
        assert torch.equal(comp[i], cpu[i]), (i, comp[i], cpu[i])
    assert torch.equal(eager[8], (t32 // 3).long())  # floor_divide: a narrowing kernel


def test_eager_scalar_divisor_decided_per_value():
    # eager's geometry cache was keyed on a CPU scalar's shape, not its value: x % 3
    # after x % 2**33 ran at full width, and x % 2**33 after x % 3 raised
    # ZeroDivisionError (the divisor wrapped to 0)
    t = torch.tensor([2**40, -7, 2**33 + 5], dtype=torch.int64)
    x = t.to("neuron")
    narrowed3 = (t.to(torch.int32) % 3).long()
    for _ in range(2):
        assert torch.equal((x % 3).cpu(), narrowed3)
        assert torch.equal((x % 2**33).cpu(), t % 2**33)


def test_same_graph_from_other_eager_ops_not_shared():
    # x // y (aten::floor_divide) and div(x, y, rounding_mode="floor")
    # (aten::div.Tensor_mode) reach the backend as the same graph; the graph index
    # ignored the eager op the nodes came from, so the second compiled got the first's
    # executable and its eager accounting (when // took the CPU fallback, its full-width
    # result too). Each must count under its own eager name, as eager does.
    a = torch.tensor([3e38, 7.0], dtype=torch.float64).to("neuron")
    b = torch.tensor([0.1, 2.0], dtype=torch.float64).to("neuron")
    fns = (lambda x, y: x // y, lambda x, y: torch.div(x, y, rounding_mode="floor"))
    for order in (fns, fns[::-1]):
        torch._dynamo.reset()
        for f in order:
            torch.neuron.reset_narrowing_stats()
            want = f(a, b).cpu()
            eager_stats = torch.neuron.narrowing_stats()
            torch.neuron.reset_narrowing_stats()
            assert torch.equal(torch.compile(f, backend="neuron")(a, b).cpu(), want)
            assert torch.neuron.narrowing_stats() == eager_stats
    assert set(eager_stats) == {"aten::floor_divide"}  # the last: fns[0]


def _train_stats(compiled: bool):
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = (
        torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
        )
        .double()
        .to("neuron")
    )
    f = torch.compile(m, backend="neuron") if compiled else m
    x = torch.randn(5, 8, dtype=torch.float64).to("neuron")
    t = torch.tensor([0, 3, 1, 2, 0]).to("neuron")
    torch.neuron.reset_narrowing_stats()
    for _ in range(2):
        torch.nn.functional.cross_entropy(f(x), t).backward()
    torch.neuron.synchronize()
    return torch.neuron.narrowing_stats()


def test_compiled_backward_narrowing_counted_as_eager():
    # backward nodes carry no from_node: each decomposed node had counted as a call
    # (gelu_backward 22 for 2 calls, native_layer_norm_backward 30)
    eager, comp = _train_stats(False), _train_stats(True)
    assert eager["aten::gelu_backward"] == 2 and eager["aten::native_layer_norm_backward"] == 2
    assert comp == eager


def test_division_by_a_cpu_scalar_tensor_input_keeps_full_width():
    # x % torch.tensor(2**33): eager sees the CPU scalar's value per call (0 at 32 bits:
    # full width); the graph sees an input and had narrowed it to 0: [7, -9, ...] for
    # [7, 8589934583, ...]. Compiled now keeps such a call at full width (exact: the CPU).
    x = torch.tensor([7, -9, 2**40 + 3, 12345678901])
    for d in (2**33, -(2**32), 3):
        torch._dynamo.reset()
        f = torch.compile(lambda a, b: (a % b, a // b), backend="neuron")
        got = f(x.to("neuron"), torch.tensor(d))
        for g, r in zip(got, (x % torch.tensor(d), x // torch.tensor(d))):
            assert torch.equal(g.cpu(), r), (d, g.cpu(), r)
        if d != 3:  # eager narrows x % 3 (its dividends past int32 wrap), not these
            assert torch.equal(got[0].cpu(), (x.to("neuron") % torch.tensor(d)).cpu()), d


def test_decomposed_index_arguments_keep_full_width_as_in_eager():
    # cross_entropy's int64 target and the embedding backward's indices are index
    # arguments, never narrowed in eager; compiled, their decompositions compute with
    # them under other names and had narrowed them (nll_loss_forward/backward and
    # embedding_dense_backward counted in narrowing_stats)
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 5).to("neuron")
    x = torch.randn(4, 5).to("neuron")
    t = torch.tensor([0, 4, 2, 1]).to("neuron")
    idx = torch.tensor([[1, 2], [3, 9]]).to("neuron")

    def f(x, t, idx):
        return torch.nn.functional.cross_entropy(x + emb(idx).sum(1).mean(0), t)

    runs = []
    for g in (f, torch.compile(f, backend="neuron")):
        emb.zero_grad()
        xx = x.clone().requires_grad_()
        torch.neuron.reset_narrowing_stats()
        loss = g(xx, t, idx)
        loss.backward()
        torch.neuron.synchronize()
        runs.append(
            (loss.cpu(), xx.grad.cpu(), emb.weight.grad.cpu(), torch.neuron.narrowing_stats())
        )
    (le, ge, we, se), (lc, gc, wc, sc) = runs
    assert se == {} and sc == {}
    torch.testing.assert_close(lc, le)
    torch.testing.assert_close(gc, ge)
    torch.testing.assert_close(wc, we)
