"""torchneuron check, --html: one self-contained page, opened in headless Chromium."""

import re
import shutil
import subprocess

import pytest
from check_support import FAST, MINILM, cli, fixture, needs_fallback_op


def _html(tmp_path, model, *extra):
    page = tmp_path / "report.html"
    code, out, err = cli("check", model, *extra, "--html", page)
    return code, page.read_text(), page, out + err


def _self_contained(text):
    assert "<script" not in text  # nothing runs
    assert not re.search(r"<(link|img|iframe)\b", text)  # nothing fetched
    assert not re.search(r'\b(src|href)\s*=\s*"(https?:)?//', text)
    assert "@import" not in text
    assert not re.search(r"url\((?!#)", text)  # only in-page references (SVG clip paths)


def test_pass_report(tmp_path):
    code, text, _, log = _html(tmp_path, "mlp", *FAST)
    assert code == 0, log
    _self_contained(text)
    assert 'class="verdict v-pass"' in text and "PASS" in text
    for section in (
        'id="phase1"',
        'id="phase2"',
        'id="phase3"',
        'id="cost"',
        'id="baseline"',
        'id="manifest"',
    ):
        assert section in text
    assert text.count("<svg") == 3  # warm-up, histogram, op time
    assert "warm (cache hit)" in text and "not Trainium" in text  # compiled mode checked
    assert "Host dispatch time per op" in text


def test_failure_report_shows_op_and_traceback(tmp_path):
    op = needs_fallback_op()
    code, text, _, log = _html(tmp_path, fixture("falls_back"), *FAST, "--fallback", "error")
    assert code == 1, log
    _self_contained(text)
    assert 'class="verdict v-fail"' in text
    assert f"aten::{op}" in text and "Traceback" in text
    assert text.count("skipped") >= 2 or text.count("SKIPPED") >= 2


def test_fallback_ops_highlighted(tmp_path):
    op = needs_fallback_op()
    code, text, _, log = _html(tmp_path, fixture("falls_back"), *FAST)
    assert code == 0, log
    assert "CPU fallback ops" in text and f"aten::{op}" in text
    assert "#c0392b" in text  # the red bars


CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)


@pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)"
)
def test_opens_in_headless_chromium(tmp_path):
    code, text, page, log = _html(tmp_path, "minilm", *MINILM)
    assert code == 0, log
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "torchneuron check — minilm" in dom.stdout and "v-pass" in dom.stdout
    assert dom.stdout.count("<svg") == 3
    png = tmp_path / "report.png"
    shot = subprocess.run(
        [CHROMIUM, *flags, "--window-size=1280,3800", f"--screenshot={png}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a real, non-blank page
