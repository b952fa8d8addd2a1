"""The result as JSON (``--json FILE``): strict JSON, non-finite floats written as null."""

from __future__ import annotations

import json
import math
from typing import Any


def jsonable(x: Any) -> Any:
    """A copy of ``x`` that ``json.dumps(allow_nan=False)`` accepts: NaN and infinities
    become None, tuples lists, other objects (dtypes, devices) their ``str``. Keys
    starting with ``_`` are private and left out."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items() if not str(k).startswith("_")}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return str(x)


def dumps(result: dict) -> str:
    """The result as strict, indented JSON."""
    return json.dumps(jsonable(result), indent=2, allow_nan=False) + "\n"


def write_json(result: dict, path: str) -> None:
    """Write ``dumps(result)`` to ``path``."""
    with open(path, "w") as f:
        f.write(dumps(result))
