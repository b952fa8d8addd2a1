"""Exit codes of ``torchneuron check`` and the error that means "bad usage or input"."""

from __future__ import annotations

#: Every phase passed, no regression against the baseline, within the cost budget.
EXIT_PASS = 0
#: A phase failed, a regression against the baseline was found, or the cost budget was exceeded.
EXIT_FAIL = 1
#: Bad usage or input: unknown option or model, a factory that is missing, raises or
#: returns the wrong thing, a model that fails on the reference device too, a baseline
#: folder that is missing, partial or from another model.
EXIT_USAGE = 2
#: Inconclusive (``--gate-host-latency`` only): the host was too noisy to decide a latency
#: comparison with the baseline within ``--max-rounds`` rounds (the interval of the change straddles the threshold);
#: nothing failed. CI may treat it as a pass, a retry or a failure.
EXIT_INCONCLUSIVE = 3


class CheckUsageError(Exception):
    """Bad usage or input (exit code 2). The message is shown to the user as is,
    so it says what was wrong and, where it helps, what to do instead."""
