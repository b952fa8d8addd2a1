"""The 64-bit narrowing and CPU fallback warnings: one line per process each, pointing
to torch.neuron.narrowing_stats()/fallback_stats(); TORCHNEURON_WARN_PER_OP=1 gives the
per-operator lines; strict mode still raises; a compiled graph's warning points at the
user's line, not at the library's executable.py."""

from conftest import run_python

# Three different operators narrowed, one op without a native kernel (twice).
EAGER = r"""
import warnings, torch, torchneuron
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as w:
    x = torch.arange(6, device="neuron")          # int64
    y = (x + 1) * 2
    z = y.cumsum(0).sum()
    f = torch.ones(4, dtype=torch.float64, device="neuron").exp()
    a = torch.ones(3, 3, device="neuron")
    torch.linalg.matrix_exp(a); torch.linalg.matrix_exp(a)
    torch.neuron.synchronize()
narrow = [str(m.message) for m in w if "64-bit" in str(m.message)]
fall = [str(m.message) for m in w if "CPU" in str(m.message) and "64-bit" not in str(m.message)]
print("NARROW", len(narrow), len(torch.neuron.narrowing_stats()))
print("FALL", len(fall), sorted(torch.neuron.fallback_stats()))
for m in narrow + fall:
    print("MSG", m)
"""


def _lines(out: str, tag: str) -> list[str]:
    return [ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith(tag + " ")]


def test_one_line_per_process_with_counters():
    out = run_python(EAGER).stdout
    n_warn, n_ops = map(int, _lines(out, "NARROW")[0].split())
    assert n_ops >= 3  # several operators narrowed ...
    assert n_warn == 1  # ... one warning line
    fall = _lines(out, "FALL")[0]
    assert fall.startswith("1 ") and "matrix_exp" in fall
    msgs = _lines(out, "MSG")
    assert any("torch.neuron.narrowing_stats()" in m for m in msgs)
    assert any("torch.neuron.fallback_stats()" in m for m in msgs)


def test_per_op_detail_env():
    out = run_python(EAGER, env={"TORCHNEURON_WARN_PER_OP": "1"}).stdout
    n_warn, n_ops = map(int, _lines(out, "NARROW")[0].split())
    assert n_warn == n_ops >= 3


def test_strict_mode_still_raises():
    code = r"""
import torch, torchneuron
a = torch.ones(3, 3, device="neuron")
try:
    torch.linalg.matrix_exp(a)
except NotImplementedError as e:
    print("RAISED", "matrix_exp" in str(e))
"""
    out = run_python(code, env={"TORCHNEURON_FALLBACK": "error"}).stdout
    assert "RAISED True" in out


def test_compiled_warning_points_at_user_line():
    code = r"""
import warnings, torch, torchneuron
def f(x):
    return (x * 3).sum()
g = torch.compile(f, backend="neuron")
x = torch.arange(8, device="neuron")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    g(x)  # USER LINE
    torch.neuron.synchronize()
for m in w:
    if "64-bit" in str(m.message):
        print("AT", m.filename, m.lineno)
"""
    out = run_python(code, timeout=240).stdout
    at = _lines(out, "AT")
    assert at, out
    fn, line = at[0].rsplit(" ", 1)
    # the user's code: the compiled function's line (its frame runs the graph) or the call
    assert fn == "<string>" and int(line) in (3, 9), at


def test_backend_mode_warning_points_at_user_line():
    code = r"""
import warnings, torch, torchneuron
f = torch.compile(lambda x: x + 1, backend="neuron", mode="reduce-overhead")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    f(torch.ones(3, device="neuron"))  # USER LINE
for m in w:
    if "does not support mode" in str(m.message):
        print("AT", m.filename, m.lineno)
"""
    at = _lines(run_python(code, timeout=240).stdout, "AT")
    assert at and at[0] == "<string> 6", at
