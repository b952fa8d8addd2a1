"""Running a model on a device and naming its output tensors."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
from typing import Any

import torch

from .loading import Inputs


def to_device(
    inputs: Inputs, device: str | torch.device, float_dtype: torch.dtype | None = None
) -> Inputs:
    """Copy every input tensor to ``device``; floating tensors are cast to
    ``float_dtype`` when given (the fp64 golden run)."""

    def move(t: torch.Tensor) -> torch.Tensor:
        if float_dtype is not None and t.is_floating_point():
            t = t.to(float_dtype)
        return t.to(device)

    if isinstance(inputs, dict):
        return {k: move(v) for k, v in inputs.items()}
    return tuple(move(v) for v in inputs)


def model_copy(
    model: torch.nn.Module, device: str | torch.device, dtype: torch.dtype | None = None
) -> torch.nn.Module:
    """A deep copy of ``model`` on ``device`` (and cast to ``dtype``), leaving the
    original where it is."""
    m = copy.deepcopy(model)
    if dtype is not None:
        m = m.to(dtype)
    return m.to(device).eval()


def autocast_ctx(device_type: str, dtype: torch.dtype):
    """``torch.autocast(device_type, dtype)`` for bf16/fp16, nothing for float32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=dtype)


def call(model: torch.nn.Module, inputs: Inputs, device_type: str, dtype: torch.dtype) -> Any:
    """One forward pass without autograd, under autocast when ``dtype`` is not float32."""
    with torch.no_grad(), autocast_ctx(device_type, dtype):
        if isinstance(inputs, dict):
            return model(**inputs)
        return model(*inputs)


def _cache_layers(x: Any) -> list | None:
    """``[(key, value), ...]`` per layer of a transformers ``Cache`` (a KV cache), else None."""
    layers = getattr(x, "layers", None)
    if (
        isinstance(layers, (list, tuple))
        and layers
        and hasattr(layers[0], "keys")
        and hasattr(layers[0], "values")
        and isinstance(getattr(layers[0], "keys"), torch.Tensor)
    ):
        return [(layer.keys, layer.values) for layer in layers]
    k, v = getattr(x, "key_cache", None), getattr(x, "value_cache", None)
    if isinstance(k, list) and isinstance(v, list):
        return list(zip(k, v))
    return None


#: The caches an encoder-decoder cache (transformers' EncoderDecoderCache: T5, BART, Whisper) holds.
_SUB_CACHES = ("self_attention_cache", "cross_attention_cache")


def _sub_caches(x: Any) -> list | None:
    """``[(name, cache), ...]`` of an encoder-decoder cache, else None."""
    subs = [(a, getattr(x, a, None)) for a in _SUB_CACHES]
    return subs if all(c is not None for _, c in subs) else None


_NUMBER_DTYPES = (
    (bool, torch.bool),
    (int, torch.int64),
    (float, torch.float64),
    (complex, torch.complex128),
)


def flatten(
    out: Any, prefix: str = "", uncomparable: list | None = None, numbers: bool = False
) -> dict[str, torch.Tensor]:
    """Named output tensors of a model's output: a tensor (``output``), tuples and lists
    (``output[0]``), dicts, transformers' ModelOutput and dataclasses (their keys or
    fields, nested with ``.``), and transformers' ``Cache`` objects (a KV cache:
    ``past_key_values.layers[i].key`` / ``.value``; an encoder-decoder cache's two:
    ``past_key_values.self_attention_cache.layers[i].key``, ``....cross_attention_cache...``). ``None`` is skipped; with
    ``numbers``, Python bool/int/float/complex leaves become 0-dim CPU tensors (bool,
    int64, float64, complex128) so that they are compared too; any other non-tensor leaf
    is appended to ``uncomparable`` as ``{"name", "type"}`` when a list is given (nothing
    is dropped silently). Two tensors whose paths read the same (``{"a": {"b": t1}, "a.b": t2}``)
    get ``a.b`` and ``a.b#2``, in walk order."""
    res: dict[str, torch.Tensor] = {}

    def put(name: str, t: torch.Tensor) -> None:
        # {"a": {"b": t1}, "a.b": t2} both read "a.b": the later one is "a.b#2" (same walk order
        # on every device, so the names still pair up), never dropped
        key, n = name, 1
        while key in res:
            n += 1
            key = f"{name}#{n}"
        res[key] = t

    def walk(x: Any, name: str) -> None:
        if isinstance(x, torch.Tensor):
            put(name or "output", x)
        elif numbers and isinstance(x, (bool, int, float, complex)):
            dtype = next(d for t, d in _NUMBER_DTYPES if isinstance(x, t))  # bool before int
            put(name or "output", torch.tensor(x, dtype=dtype))
        elif x is None:
            return
        elif isinstance(x, dict) or hasattr(x, "items") and hasattr(x, "keys"):
            for k, v in x.items():
                walk(v, f"{name}.{k}" if name else str(k))
        elif isinstance(x, (tuple, list)):
            for i, v in enumerate(x):
                walk(v, f"{name}[{i}]" if name else f"output[{i}]")
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name), f"{name}.{f.name}" if name else f.name)
        elif (subs := _sub_caches(x)) is not None:
            for attr, c in subs:
                walk(c, f"{name or 'cache'}.{attr}")
        elif (layers := _cache_layers(x)) is not None:
            base = name or "cache"
            for i, (k, v) in enumerate(layers):
                walk(k, f"{base}.layers[{i}].key")
                walk(v, f"{base}.layers[{i}].value")
        elif uncomparable is not None:
            uncomparable.append({"name": name or "output", "type": type(x).__qualname__})

    walk(out, prefix)
    return res


def max_abs_diff(a: torch.Tensor, b: torch.Tensor, nan_to_num: bool = False) -> float | None:
    """max |a - b| in float64 (complex: the modulus of the difference, in complex128);
    0.0 for empty tensors; None when the shapes differ. ``nan_to_num``: NaN differences
    count as 0 and infinities as the largest finite float64."""
    if a.shape != b.shape:
        return None
    if a.numel() == 0:
        return 0.0
    if a.is_complex() or b.is_complex():
        d = (a.detach().to("cpu", torch.complex128) - b.detach().to("cpu", torch.complex128)).abs()
    else:
        d = (a.detach().to("cpu", torch.float64) - b.detach().to("cpu", torch.float64)).abs()
    return float((d.nan_to_num() if nan_to_num else d).max())


def to_cpu(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Detached CPU copies (a device-to-host copy synchronizes with the device)."""
    return {k: v.detach().to("cpu") for k, v in tensors.items()}


def synchronizer(device: str | torch.device):
    """A function that waits for all queued work of ``device``'s type (a no-op for the CPU)."""
    dev = torch.device(device)
    if dev.type == "neuron":
        return functools.partial(torch.neuron.synchronize, dev if dev.index is not None else None)
    if dev.type == "cuda":
        return functools.partial(torch.cuda.synchronize, dev)
    return lambda: None


def describe_outputs(tensors: dict[str, torch.Tensor]) -> list[dict]:
    """Name, shape and dtype of every output tensor."""
    return [
        {"name": k, "shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
        for k, v in tensors.items()
    ]
