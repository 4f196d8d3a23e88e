"""A small TOML writer for resolved configs (the standard library only reads TOML)."""

from __future__ import annotations

import json
from typing import Any


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps(data: dict, _prefix: str = "") -> str:
    """Serialize nested dicts of scalars/lists; `None` values are left out (TOML has no null)."""
    lines = [f"{k} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict) and v is not None]
    out = "\n".join(lines) + ("\n" if lines else "")
    for k, v in data.items():
        if isinstance(v, dict):
            name = f"{_prefix}{k}"
            body = dumps(v, name + ".")
            out += f"\n[{name}]\n" + body
    return out
