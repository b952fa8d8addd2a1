"""The child process of ``--baseline-runs`` (``baseline/runs.py`` starts it): one check of the
config on stdin, its phase 3 figures on stdout after ``baseline.runs._TAG``."""

from __future__ import annotations

import json
import sys

from .baseline.runs import _TAG, estimates
from .config import CheckConfig
from .runner import run


def main() -> None:
    """One extra process of a baseline: the check of the config on stdin, its phase 3 figures
    on stdout (after ``_TAG``)."""
    cfg = CheckConfig(**json.loads(sys.stdin.read()))
    r = run(cfg)
    p3 = r.phase3
    res = (
        estimates(p3)
        if p3 is not None and p3.status == "pass"
        else {"error": (p3 and p3.reason) or "phase 3 did not run"}
    )
    print(_TAG + json.dumps(res), flush=True)
