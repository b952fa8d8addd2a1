"""Fixtures shared by the tests/check/ files."""

import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def burners(request):
    """One busy-looping process per core, for the module's duration. Each ends itself after
    the module's ``BURN_SECONDS``, even if the test process dies."""
    seconds = request.module.BURN_SECONDS
    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]
    yield procs
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()
