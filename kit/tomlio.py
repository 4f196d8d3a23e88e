"""A small TOML writer for resolved configs (the standard library only reads TOML)."""

from __future__ import annotations

from typing import Any


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(s: str) -> str:
    """A TOML basic string: quote, backslash and control characters (DEL too) escaped, everything
    else literal (JSON's escapes would write non-BMP characters as surrogate pairs, invalid TOML)."""
    out = []
    for ch in s:
        o = ord(ch)
        if 0xD800 <= o <= 0xDFFF:
            raise ValueError(f"cannot write the lone surrogate U+{o:04X} to TOML")
        out.append(_ESCAPES.get(ch) or (f"\\u{o:04X}" if o < 0x20 or o == 0x7F else ch))
    return '"' + "".join(out) + '"'


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return _string(v)
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
