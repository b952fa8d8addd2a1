"""`make test` on a machine without GoogleTest must not pass without running the runtime's
GoogleTest suite (issue 7, section 5): .ci/ensure-gtest installs it where it may, else
fails naming what to install; ctest fails when no test was built."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess

import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)  # the repository


def _shim(dir_, name, body):
    p = dir_ / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def test_ensure_gtest_fails_loudly_when_it_cannot_install(tmp_path):
    # A machine without libgtest-dev, without root and without sudo.
    for name, body in (
        ("dpkg", "exit 1"),
        ("c++", "exit 1"),
        ("sudo", "exit 1"),
        ("id", "echo 1000"),
    ):
        _shim(tmp_path, name, body)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "CXX": str(tmp_path / "c++")}
    r = subprocess.run(
        [os.path.join(ROOT, ".ci", "ensure-gtest")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert "apt-get install libgtest-dev" in r.stderr and "GoogleTest" in r.stderr


def test_ensure_gtest_passes_where_gtest_is_found():
    if subprocess.run(["sh", "-c", "dpkg -s libgtest-dev"], capture_output=True).returncode:
        pytest.skip("libgtest-dev is not installed here")
    r = subprocess.run(
        [os.path.join(ROOT, ".ci", "ensure-gtest")], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr


def test_make_test_runtime_fails_when_no_test_was_built(tmp_path):
    makefile = open(os.path.join(ROOT, "Makefile")).read()
    recipe = re.search(r"^test-runtime:(.*)\n\t(.*ctest.*)$", makefile, re.M)
    assert recipe and "ensure-gtest" in recipe.group(1)
    flags = [f for f in recipe.group(2).split() if f.startswith("--no-tests")]
    assert flags == ["--no-tests=error"]
    ctest = shutil.which("ctest", path=os.path.join(ROOT, ".venv", "bin")) or shutil.which("ctest")
    if ctest is None:
        pytest.skip("no ctest")
    # A build directory with no test in it (GoogleTest not found): ctest with the
    # Makefile's flags fails instead of passing with "No tests were found".
    (tmp_path / "CTestTestfile.cmake").write_text("# no tests\n")
    r = subprocess.run(
        [ctest, "--test-dir", str(tmp_path), *flags], capture_output=True, text=True, timeout=60
    )
    assert r.returncode != 0 and "No tests were found" in (r.stdout + r.stderr)
