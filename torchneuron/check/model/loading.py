"""Models to check: the built-in names and users' factories (``file.py:factory``).

A factory returns ``(model, example_inputs)``: ``model`` a ``torch.nn.Module`` on the
CPU, ``example_inputs`` a tuple (or list) of tensors passed positionally, or a dict of
tensors passed as keywords. A factory may take ``batch_size`` and ``seed`` keyword
parameters; they receive ``--batch-size`` and ``--seed``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ... import models
from ..errors import CheckUsageError
from . import train_models

Inputs = tuple | dict


@dataclass
class LoadedModel:
    """A model ready to check. ``inputs`` stay on the CPU; ``name`` identifies the
    model in baselines (the built-in name, or ``file.py:factory`` without folders)."""

    name: str
    spec: str
    source: str  # "builtin" | "file"
    description: str
    model: torch.nn.Module
    inputs: Inputs
    batch_size: int  # samples per iteration
    batch_size_source: str  # "factory parameter" | "first input's first dimension"
    loss_fn: Callable | None = None  # training factories: loss_fn(output) -> scalar tensor
    train_step: Callable | None = None  # or step(model, inputs) -> scalar loss (forward and loss)

    @property
    def path(self) -> str | None:
        """The absolute path of a user factory's file (None for a built-in)."""
        return os.path.abspath(self.spec.rpartition(":")[0]) if self.source == "file" else None

    def describe(self) -> dict:
        """JSON-ready description: inputs, parameter count and architecture fingerprint."""
        return {
            "name": self.name,
            "spec": self.spec,
            "source": self.source,
            "description": self.description,
            "batch_size": self.batch_size,
            "batch_size_source": self.batch_size_source,
            "inputs": describe_inputs(self.inputs),
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "fingerprint": fingerprint(self.model),
        }


def builtin_models() -> dict[str, tuple[Callable, str]]:
    """``{name: (factory, one-line description)}`` of the built-in models."""
    return dict(models.BUILTIN) | dict(train_models.BUILTIN)


def fingerprint(model: torch.nn.Module) -> str:
    """Short SHA-256 of the state dict's names, shapes and dtypes (not the values): the
    same architecture gives the same fingerprint, whatever its weights."""
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(f"{k}:{tuple(v.shape)}:{v.dtype};".encode())
    return h.hexdigest()[:16]


def describe_inputs(inputs: Inputs) -> list[dict]:
    """Name, shape and dtype of every input (positional inputs are named 0, 1, ...)."""
    items = inputs.items() if isinstance(inputs, dict) else enumerate(inputs)
    return [
        {"name": str(k), "shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
        for k, v in items
    ]


def _import_file(path: str):
    name = "torchneuron_check_user_" + hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CheckUsageError(f"cannot import {path!r}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = os.path.dirname(os.path.abspath(path))
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)  # the factory's file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(name, None)
        raise CheckUsageError(
            f"importing {path!r} raised {type(e).__name__}: {e}\n{_short_tb(e)}"
        ) from e
    finally:
        if added:
            sys.path.remove(folder)
    return module


def _short_tb(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-6)).rstrip()


def resolve(spec: str) -> tuple[Callable, str, str, str]:
    """``(factory, name, source, description)`` of a model spec: a built-in name or
    ``path/to/file.py:factory``. Raises CheckUsageError naming what is missing."""
    builtins = builtin_models()
    if spec in builtins:
        fn, desc = builtins[spec]
        return fn, spec, "builtin", desc
    if ":" not in spec:
        raise CheckUsageError(
            f"unknown model {spec!r}: not a built-in ({', '.join(builtins)}) and not "
            "'path/to/file.py:factory' (see `torchneuron check --list`)"
        )
    path, _, attr = spec.rpartition(":")
    if not path or not attr:
        raise CheckUsageError(f"model {spec!r}: expected 'path/to/file.py:factory'")
    if not os.path.isfile(path):
        raise CheckUsageError(f"model {spec!r}: file {path!r} not found")
    module = _import_file(path)
    fn = getattr(module, attr, None)
    if fn is None:
        found = sorted(
            n
            for n, v in vars(module).items()
            if callable(v)
            and not n.startswith("_")
            and getattr(v, "__module__", None) == module.__name__
        )
        raise CheckUsageError(
            f"model {spec!r}: {path!r} has no attribute {attr!r}"
            + (f" (callables defined there: {', '.join(found)})" if found else "")
        )
    if not callable(fn):
        raise CheckUsageError(
            f"model {spec!r}: {attr!r} in {path!r} is a {type(fn).__name__}, not a callable factory"
        )
    doc = (inspect.getdoc(fn) or "").strip().splitlines()
    return fn, f"{os.path.basename(path)}:{attr}", "file", (doc[0] if doc else "user factory")


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def training_kind(where: str, fn: Any) -> str:
    """What the third element of a training factory's return is: ``"loss_fn"`` (a callable
    with one required positional parameter, ``loss_fn(output) -> loss``) or ``"step"`` (two,
    ``step(model, inputs) -> loss``). Raises CheckUsageError for anything else."""
    if not callable(fn):
        raise CheckUsageError(
            f"{where} returned a {type(fn).__name__} as loss_fn; expected a callable "
            "loss_fn(output) -> scalar tensor or step(model, inputs) -> scalar tensor"
        )
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return "loss_fn"  # a builtin without a signature: called with the output
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in pos if p.default is p.empty]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or len(required) == 1:
        return "loss_fn"
    if len(required) == 2:
        return "step"
    raise CheckUsageError(
        f"{where} returned a training callable {getattr(fn, '__name__', fn)!r} with "
        f"{len(required)} required positional parameter(s); expected loss_fn(output) "
        "(one) or step(model, inputs) (two)"
    )


def _validate(spec: str, ret: Any) -> tuple[torch.nn.Module, Inputs]:
    where = f"model {spec!r}: the factory"
    if not isinstance(ret, (tuple, list)) or len(ret) not in (2, 3):
        got = f"a {type(ret).__name__}" + (
            f" of length {len(ret)}" if isinstance(ret, (tuple, list)) else ""
        )
        raise CheckUsageError(
            f"{where} must return (model, example_inputs), got {got} (a training factory "
            "returns (model, example_inputs, loss_fn))"
        )
    if len(ret) == 3:
        training_kind(where, ret[2])
    model, inputs = ret[0], ret[1]
    if not isinstance(model, torch.nn.Module):
        raise CheckUsageError(
            f"{where} returned a {type(model).__name__} as the model; expected a torch.nn.Module"
        )
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    if isinstance(inputs, dict):
        bad = {
            k: type(v).__name__
            for k, v in inputs.items()
            if not isinstance(k, str) or not isinstance(v, torch.Tensor)
        }
    elif isinstance(inputs, tuple):
        bad = {i: type(v).__name__ for i, v in enumerate(inputs) if not isinstance(v, torch.Tensor)}
    else:
        raise CheckUsageError(
            f"{where} returned a {type(inputs).__name__} as example_inputs; "
            "expected a tuple of tensors or a dict of keyword tensors"
        )
    if bad:
        raise CheckUsageError(
            f"{where} returned example_inputs that are not all tensors: "
            + ", ".join(f"{k!r} is a {t}" for k, t in bad.items())
        )
    if not inputs:
        raise CheckUsageError(f"{where} returned no example inputs")
    on = {str(v.device) for v in (inputs.values() if isinstance(inputs, dict) else inputs)}
    on |= {str(p.device) for p in model.parameters()}
    if on - {"cpu"}:
        raise CheckUsageError(
            f"{where} must return the model and inputs on the CPU; found {sorted(on)}"
        )
    return model, inputs


def load(spec: str, batch_size: int | None = None, seed: int = 0) -> LoadedModel:
    """Build the model of ``spec`` on the CPU, in eval mode, with the RNGs seeded by
    ``seed``. Raises CheckUsageError when the factory is missing, raises or returns the
    wrong thing, or when ``batch_size`` is given to a factory that cannot take it."""
    fn, name, source, desc = resolve(spec)
    kwargs: dict[str, Any] = {}
    if batch_size is not None:
        if batch_size < 1:
            raise CheckUsageError(f"--batch-size must be >= 1, got {batch_size}")
        if not _accepts(fn, "batch_size"):
            raise CheckUsageError(
                f"model {spec!r}: --batch-size given, but the factory takes no batch_size parameter"
            )
        kwargs["batch_size"] = batch_size
    if _accepts(fn, "seed"):
        kwargs["seed"] = seed
    torch.manual_seed(seed)
    quiet = _quiet_transformers() if source == "builtin" else None
    try:
        ret = fn(**kwargs)
    except CheckUsageError:
        raise
    except Exception as e:
        raise CheckUsageError(
            f"model {spec!r}: the factory raised {type(e).__name__}: {e}\n{_short_tb(e)}"
        ) from e
    finally:
        if quiet:
            quiet()
    model, inputs = _validate(spec, ret)
    loss_fn = train_step = None
    if len(ret) == 3:
        if training_kind("", ret[2]) == "step":
            train_step = ret[2]
        else:
            loss_fn = ret[2]
    model.eval()
    first = next(iter(inputs.values())) if isinstance(inputs, dict) else inputs[0]
    if first.dim() and first.shape[0] == 0:  # nothing to time or price: the cost would be infinite
        raise CheckUsageError(
            f"model {spec!r}: the factory returned a first input of shape "
            f"{list(first.shape)}: a batch of 0 samples (give at least one sample)"
        )
    if batch_size is not None:
        bs, how = batch_size, "factory parameter"
    else:
        bs, how = (int(first.shape[0]) if first.dim() else 1), "first input's first dimension"
    return LoadedModel(
        name=name,
        spec=spec,
        source=source,
        description=desc,
        model=model,
        inputs=inputs,
        batch_size=bs,
        batch_size_source=how,
        loss_fn=loss_fn,
        train_step=train_step,
    )


def _quiet_transformers():
    """Silence transformers' weight-loading progress bar; returns the undo."""
    try:
        from transformers.utils import logging as tlog
    except Exception:  # transformers missing: nothing to silence
        return None
    was = tlog.is_progress_bar_enabled()
    tlog.disable_progress_bar()
    return (lambda: tlog.enable_progress_bar()) if was else None
