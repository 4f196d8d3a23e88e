"""The arguments every engine program takes from the harness, read the same way by every runtime
(specs/ENGINES.md, "The program"): `--driver` / `--sink` addresses and `--conf` settings."""

from __future__ import annotations

from collections.abc import Sequence

from kit.errors import CepkitError


def host_port(flag: str, value: str) -> tuple[str, int]:
    """`HOST:PORT` of a flag; CepkitError naming the flag otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CepkitError(f"{flag}: expected HOST:PORT, got {value!r}")
    return host, int(port)


def conf_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """`--conf KEY=VALUE` settings as a dict (later ones win)."""
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise CepkitError(f"--conf: expected KEY=VALUE, got {p!r}")
        out[key.strip()] = value
    return out
