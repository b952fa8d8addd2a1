"""What the typed results of a check share (``result*.py``): ``fields_dict`` writes a
dataclass's fields as the JSON's dict, ``known`` checks a dict read back names only fields.
Imports nothing of the package, so every result module can use it."""

from __future__ import annotations

import dataclasses
from typing import Any


def known(cls, d: dict, what: str) -> dict:
    """``d`` (a copy) when every key is a field of ``cls`` (private fields, ``_``-prefixed,
    are never keys); else ``ValueError`` naming the unknown keys, ``what`` the object."""
    names = {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(
            f"check {what}: unknown key(s) {unknown} (written by another torchneuron version?); "
            f"known: {sorted(names)}"
        )
    return dict(d)


def fields_dict(obj: Any, omit_if_none: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of ``obj`` in declaration order (nested results as dicts: their
    ``to_dict``); the fields in ``omit_if_none`` only when set (the JSON had no such key
    then)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if v is None and f.name in omit_if_none:
            continue
        out[f.name] = v.to_dict() if hasattr(v, "to_dict") else v
    return out
