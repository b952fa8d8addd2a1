"""A compiled training step (issue 24): a GPT-2 step with AdamW compiled whole gives the
CPU's losses over 10 steps; CPU tensor inputs of a graph (AdamW's ``step`` counts) are
updated on the host (the host prologue), and what the device reads of them is staged with
one copy per dtype."""

import torch
from compile_support import fresh_compile_state  # noqa: F401

import torchneuron  # noqa: F401
from torchneuron import models


def _train_step(model, opt, ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def _gpt2(device):
    model, _ = models.gpt2_tiny()
    model.config.use_cache = False
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model = model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    ids = torch.randint(0, 1000, (4, 32), generator=torch.Generator().manual_seed(0))
    return model, opt, ids.to(device)


def test_compiled_gpt2_training_step_losses_match_cpu(fresh_compile_state):  # noqa: F811
    ref_model, ref_opt, ref_ids = _gpt2("cpu")
    model, opt, ids = _gpt2("neuron")
    step = torch.compile(_train_step, backend="neuron")
    ref = [_train_step(ref_model, ref_opt, ref_ids).item() for _ in range(10)]
    got = [step(model, opt, ids).item() for _ in range(10)]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), atol=2e-5, rtol=2e-5)
    assert got[-1] < got[0]  # it trained
    for p, q in zip(ref_model.parameters(), model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), atol=1e-4, rtol=1e-4)
    kinds = {r["graph_name"].split("_")[-2] for r in torch.neuron.get_dynamo_metrics()}
    assert kinds == {"forward", "backward", "inference"}  # the optimizer step compiled too


def _bump(x, counts):
    for c in counts:
        c.add_(1)
    return x * counts[0] + counts[-1]


def test_cpu_scalar_inputs_updated_on_host_and_staged_in_one_copy(fresh_compile_state):  # noqa: F811
    x = torch.randn(3, 4)
    counts = [torch.tensor(float(k)) for k in range(6)]
    ref_counts = [c.clone() for c in counts]
    f = torch.compile(_bump, backend="neuron")
    with torch.no_grad():
        ref = _bump(x, ref_counts)
        xn = x.to("neuron")
        f(xn, [c.clone() for c in counts])  # compiles
        with torch.profiler.profile() as prof:
            out = f(xn, counts)
    torch.testing.assert_close(out.cpu(), ref)
    for c, r in zip(counts, ref_counts):
        assert c.device.type == "cpu"
        torch.testing.assert_close(c, r)  # the in-place updates reached the CPU tensors
    copies = [e for e in prof.events() if e.name == "aten::_copy_from"]
    # one in (the updated counts the device reads), none back: the host updated them
    # (was 6 + 6 copies, then 1 + 1 with a wait for the device)
    assert len(copies) == 1, [e.name for e in copies]
