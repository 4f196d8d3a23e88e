"""The arguments every engine program takes from the harness, read the same way by every runtime
(specs/ENGINES.md, "The program"): `--driver` / `--sink` addresses and `--conf` settings, and the
run's secret, which comes in the environment instead (`program_secret`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from kit.errors import CepkitError
from kit.wire.auth import SECRET_ENV, secret_from_env


def program_secret() -> str | None:
    """The run's secret (kit/wire/auth.py), read once at the program's start from `CEPKIT_SECRET`:
    the program hands it to every feed and sink client it makes, those it ships to executors and
    TaskManagers included, since their hosts do not have the program's environment. Never an
    argument (argv is world-readable, and Flink's client logs it). None: the program connects
    without one, as to a feed started by hand without a secret.

    It is also taken out of the program's environment, before the engine's JVM starts: the
    processes the program starts (the JVM, the engine's Python workers) have no use for it, and
    PyFlink's workers write their whole environment into Flink's log."""
    secret = secret_from_env()
    os.environ.pop(SECRET_ENV, None)
    return secret


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
