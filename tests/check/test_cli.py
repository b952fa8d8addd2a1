"""torchneuron check, command line: built-in and user models, bad input (exit code 2), the
console script and ``python -m torchneuron``."""

import json
import os
import subprocess
import sys

import pytest
from check_support import FAST, FIXTURES, USAGE, cli, fixture, needs_fallback_op

VENV_BIN = os.path.dirname(sys.executable)


def test_list_shows_builtins():
    code, out, _ = cli("check", "--list")
    assert code == 0
    for name in ("minilm", "gpt2-tiny", "resnet-tiny", "mlp"):
        assert name in out
    assert "all-MiniLM-L6-v2" in out and "file.py:factory" in out


def test_help_and_version():
    code, out, _ = cli("check", "--help")
    assert code == 0 and "exit codes" in out and "--save-baseline" in out
    code, out, _ = cli("--version")
    assert code == 0 and "torchneuron" in out


def test_pass_prints_the_first_screen_then_with_details_the_tables():
    code, out, err = cli("check", "mlp", *FAST, "--details")
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines[0].startswith("PASS torchneuron check mlp · exit code 0"), lines[0]
    first = out[: out.index("Phase 1 — does it run")]  # the first screen, before the tables
    for part in ("Phases", "Findings", "Details", "the full tables are below"):
        assert part in first
    for title in ("Phase 1", "Phase 2", "Phase 3", "Cost per million", "verdict: PASS"):
        assert title in out[len(first) :]
    assert "torch.compile" in out and "warm (cache hit)" in out  # compiled mode checked
    assert "not Trainium" in out


def test_user_factory_with_tuple_inputs():
    code, out, err = cli("check", fixture("positional"), *FAST, "--quiet")
    assert code == 0, out + err
    assert "PASS" in out


def test_user_factory_default_batch_from_first_input():
    code, out, err = cli("check", fixture("takes_nothing"), *FAST, "--quiet")
    assert code == 0, out + err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["check"], "MODEL is required"),
        (["check", "no-such-model"], "unknown model 'no-such-model'"),
        (["check", "missing.py:factory"], "file 'missing.py' not found"),
        (["check", f"{USAGE}:nope"], "has no attribute 'nope'"),
        (["check", f"{USAGE}:NOT_CALLABLE"], "not a callable factory"),
        (["check", f"{USAGE}:factory_raises"], "the factory raised ValueError: no weights found"),
        (
            ["check", f"{USAGE}:returns_model_only"],
            "must return (model, example_inputs), got a Small",
        ),
        (["check", f"{USAGE}:returns_not_a_module"], "expected a torch.nn.Module"),
        (["check", f"{USAGE}:returns_bad_inputs"], "'x' is a list"),
        (
            ["check", f"{USAGE}:takes_nothing", "--batch-size", "4"],
            "takes no batch_size parameter",
        ),
        (
            ["check", f"{os.path.join(FIXTURES, 'check_broken_import.py')}:factory"],
            "raised ModuleNotFoundError",
        ),
        (["check", "mlp", "--dtype", "float64"], "invalid choice"),
        (["check", "mlp", "--iterations", "0"], "--iterations must be >= 1"),
        (["check", "mlp", "--device", "cpu"], "must be a neuron device"),
        (["check", "mlp", "--device", "neuron:99"], "NeuronCore(s) visible"),
        (["check", "mlp", "--reference", "cuda"], "CUDA is not available"),
        (["check", "mlp", "--bogus-option"], "unrecognized arguments"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(argv, message):
    code, out, err = cli(*argv)
    assert code == 2
    assert message in err, err
    assert "Traceback" not in out


def test_factory_traceback_is_shown():
    code, _, err = cli("check", f"{USAGE}:factory_raises")
    assert code == 2 and "check_usage.py" in err and "in factory_raises" in err


# ------------------------------------------------------------------ real entry points


def _run(args, **env):
    e = dict(os.environ, **env)
    return subprocess.run(args, capture_output=True, text=True, env=e, timeout=300)


def test_console_script(tmp_path):
    exe = os.path.join(VENV_BIN, "torchneuron")
    if not os.path.exists(exe):
        pytest.skip("the torchneuron console script is not installed (pip install -e .)")
    out = tmp_path / "r.json"
    p = _run([exe, "check", "mlp", *FAST, "--quiet", "--json", str(out)])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS" in p.stdout
    assert json.loads(out.read_text())["verdict"] == "pass"


def test_columns_sets_the_width_of_piped_output():
    # piped output is 140 wide unless COLUMNS says otherwise (a CI log at COLUMNS=80)
    p = _run([sys.executable, "-m", "torchneuron", "check", "mlp", *FAST], COLUMNS="80")
    assert p.returncode == 0, p.stdout + p.stderr
    long = [ln for ln in p.stdout.splitlines() if len(ln) > 80]
    assert not long, long
    assert "Phases" in p.stdout and "Findings" in p.stdout


def test_python_m_torchneuron_strict_fallback_from_environment():
    # TORCHNEURON_FALLBACK=error makes the CPU fallback an error: phase 1 fails
    op = needs_fallback_op()
    p = _run(
        [sys.executable, "-m", "torchneuron", "check", fixture("falls_back"), *FAST],
        TORCHNEURON_FALLBACK="error",
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"aten::{op}" in p.stdout and "TORCHNEURON_FALLBACK=error" in p.stdout
    assert "phase 1 failed" in p.stdout


# ------------------------------------------------------------------ options checked before anything runs

FLOAT_OPTIONS = [
    "--seconds",
    "--tol",
    "--cv-threshold",
    "--price-per-hour",
    "--reference-price-per-hour",
    "--max-cost-per-million",
    "--max-latency-regression",
    "--max-memory-regression",
]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("option", FLOAT_OPTIONS)
def test_non_finite_float_options_are_bad_usage(option, value):
    # NaN compares false with everything: --seconds nan measured forever, --tol nan raised in
    # phase 2, a NaN price or budget passed the budget gate
    extra = [] if option == "--seconds" else ["--iterations", "3"]
    code, out, err = cli(
        "check", "mlp", f"{option}={value}", *extra, "--max-warmup", "2", "--cv-window", "2"
    )
    assert code == 2, out + err
    assert f"{option} must be a finite number, got {float(value)!r}" in err
    assert "Phase 1" not in out and "Traceback" not in out + err


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("--seconds", "-1", "--seconds must be > 0"),
        ("--tol", "0", "--tol must be > 0"),
        ("--price-per-hour", "-2", "--price-per-hour must be > 0"),
        ("--reference-price-per-hour", "0", "--reference-price-per-hour must be > 0"),
        ("--max-cost-per-million", "-1", "--max-cost-per-million must be > 0"),
        ("--max-latency-regression", "-0.1", "--max-latency-regression must be >= 0"),
        ("--batch-size", "0", "--batch-size must be >= 1"),
        ("--amortize-samples", "0", "--amortize-samples must be >= 1"),
    ],
)
def test_meaningless_values_are_bad_usage(option, value, message):
    code, out, err = cli("check", "mlp", option, value)
    assert code == 2 and message in err, out + err


@pytest.mark.parametrize(
    "argv",
    [
        ["--price-per-hour", "nan", "--max-cost-per-million", "0.0000001"],
        ["--max-cost-per-million", "nan"],
    ],
)
def test_nan_price_or_budget_does_not_pass_the_budget_gate(argv):
    code, out, err = cli("check", "mlp", *FAST, *argv)
    assert code == 2, out + err
    assert "must be a finite number" in err


def test_library_rejects_nan_too():
    from torchneuron.check import CheckConfig, CheckUsageError, run

    with pytest.raises(CheckUsageError, match="--tol must be a finite number"):
        run(CheckConfig(model="mlp", tol=float("nan")))
    with pytest.raises(CheckUsageError, match="--amortize-samples must be an integer"):
        run(CheckConfig(model="mlp", amortize_samples=float("nan")))


def test_cv_window_longer_than_max_warmup_is_bad_usage():
    code, out, err = cli("check", "mlp", "--cv-window", "50", "--max-warmup", "3")
    assert code == 2, out + err
    assert "--cv-window 50 is longer than --max-warmup 3" in err


def test_save_baseline_onto_a_file_is_rejected_before_running(tmp_path):
    f = tmp_path / "afile"
    f.write_text("not a folder")
    code, out, err = cli("check", "mlp", *FAST, "--save-baseline", f)
    assert code == 2, out + err
    assert "is an existing file, not a folder" in err
    assert "Phase 1" not in out and "Traceback" not in out + err
    assert f.read_text() == "not a folder"
    code, out, err = cli("check", "mlp", *FAST, "--save-baseline", f / "sub")
    assert code == 2 and "is a file, not a folder" in err, out + err


@pytest.mark.parametrize("option", ["--json", "--junit", "--html"])
def test_report_in_a_missing_folder_is_rejected_before_running(tmp_path, option):
    code, out, err = cli("check", "mlp", *FAST, option, tmp_path / "nope" / "r.out")
    assert code == 2, out + err
    assert f"{option} " in err and "does not exist" in err
    assert "Phase 1" not in out
    code, out, err = cli("check", "mlp", *FAST, option, tmp_path)
    assert code == 2 and "is a folder" in err, out + err


def test_batch_of_zero_samples_is_bad_input():
    code, out, err = cli("check", fixture("empty_batch"), *FAST)
    assert code == 2, out + err
    assert "a batch of 0 samples" in err and "[0, 16]" in err
