"""The result as JSON (``--json FILE``): strict JSON, non-finite floats written as null."""

from __future__ import annotations

import json
from typing import Any

from ..result import jsonable

__all__ = ["dumps", "jsonable", "write_json"]


def dumps(result: Any) -> str:
    """The result (a ``CheckResult`` or a plain dict) as strict, indented JSON."""
    return json.dumps(jsonable(result), indent=2, allow_nan=False) + "\n"


def write_json(result: Any, path: str) -> None:
    """Write ``dumps(result)`` to ``path``."""
    with open(path, "w") as f:
        f.write(dumps(result))
