"""``torchneuron run [-m module | script.py] [args...]``: run a CUDA program on neuron.

Activates :mod:`torchneuron.cuda_compat` and then runs the script (or module) as
``__main__`` with ``sys.argv`` set as Python would set it. The exit code is the program's.
"""

from __future__ import annotations

import os
import runpy
import sys
import warnings

USAGE = "usage: torchneuron run [-m module | script.py] [args...]"


def main(argv: list[str]) -> int:
    """Run the program named by ``argv`` (``[script, *args]`` or ``["-m", module, *args]``)."""
    if not argv or argv[0] in ("-h", "--help"):
        print(
            USAGE + "\n\nRuns a CUDA program unchanged on the neuron device: 'cuda' devices, "
            ".cuda(), torch.cuda.*, torch.amp 'cuda' and nccl process groups act on neuron "
            "(see torchneuron.cuda_compat).",
            file=sys.stderr if not argv else sys.stdout,
        )
        return 2 if not argv else 0
    if argv[0] == "-m":
        if len(argv) < 2:
            print(f"torchneuron run: error: -m needs a module name\n{USAGE}", file=sys.stderr)
            return 2
        target, module = argv[1], True
        sys.argv = [argv[1]] + argv[2:]
        sys.path.insert(0, os.getcwd())
    else:
        target, module = argv[0], False
        if not os.path.isfile(target):
            print(f"torchneuron run: error: no such script: {target}", file=sys.stderr)
            return 2
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    # Importing cuda_compat activates it and warns at the importer's line, runpy's frame
    # here: the warning is given at the program's first line instead.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torchneuron.cuda_compat: ")
        from . import cuda_compat

        cuda_compat.activate(quiet=True)
    warnings.warn_explicit(cuda_compat.notice(), UserWarning, target, 1)
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return int(e.code or 0)
        print(e.code, file=sys.stderr)
        return 1
    return 0
