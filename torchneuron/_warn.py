"""Warnings raised inside the library, attributed to the user's line (the first frame
outside torch, torchneuron, torch_neuronx and installed packages such as transformers),
as ``stacklevel`` would for a direct call."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable

import torch

# this package's folder from this file, not by importing torchneuron (an import cycle)
_HERE = os.path.dirname(os.path.abspath(__file__))
_LIB_DIRS = (
    os.path.dirname(torch.__file__) + os.sep,
    _HERE + os.sep,
    os.path.join(os.path.dirname(_HERE), "torch_neuronx") + os.sep,
)


def _is_library(filename: str) -> bool:
    # "<frozen importlib._bootstrap>": the import machinery between an import and its module
    return filename.startswith(_LIB_DIRS + ("<frozen importlib",)) or (
        f"{os.sep}site-packages{os.sep}" in filename or f"{os.sep}dist-packages{os.sep}" in filename
    )


def _user_frame():
    f = sys._getframe(1)
    while f is not None and _is_library(f.f_code.co_filename):
        f = f.f_back
    return f


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` at the user's line (the first frame outside the libraries)."""
    f = _user_frame()
    if f is None:
        warnings.warn(message, category, stacklevel=2)
        return
    g = f.f_globals
    warnings.warn_explicit(
        message,
        category,
        f.f_code.co_filename,
        f.f_lineno,
        module=g.get("__name__"),
        registry=g.setdefault("__warningregistry__", {}),
    )


def at_user_line(fn: Callable, *args) -> None:
    """Call ``fn(*args)``; the warnings it raises (e.g. the C++ narrowing warning) are
    re-issued at the user's line, through the user's warning filters."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(*args)
    if not caught:
        return
    for w in caught:
        warn(w.message, w.category)
