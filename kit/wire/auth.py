"""Who may connect to a run's feed and sink: the holders of the run's secret (specs/DRIVER.md, "Who
may connect").

The feed and the sink listen beyond loopback on a cluster (`run.feed_bind`), where anyone who
reaches their ports could read the load or slip answers into the verdict. So the harness makes a
random secret for every engine run and starts both servers with it; the first frame of every
connection must then be `{"op": "auth", "secret": ...}`, or the connection is refused
(harness/server.py). The program gets the secret in its environment (`CEPKIT_SECRET`), never on
its command line (argv is readable by every user in /proc, and Flink's client logs program
arguments), reads it once and hands it to every client it makes, those it ships to executors and
TaskManagers included: inside the pickled clients, source options and functions, since those
hosts have none of our environment.

Standard library only: it ships to the engine's workers with the rest of kit's wire.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping

SECRET_ENV = "CEPKIT_SECRET"
AUTH_OP = "auth"
# A connection that has not presented the secret this long after it was accepted is refused.
AUTH_TIMEOUT_S = 10.0
# An auth frame is a few dozen bytes: the first frame of a connection is read with this cap on its
# header (and no body), so a peer without the secret never makes a server hold more than this.
AUTH_MAX_HEADER_BYTES = 4096


def new_secret() -> str:
    """A fresh run secret: 128 random bits as 32 hex digits."""
    return secrets.token_hex(16)


def secret_from_env(environ: Mapping[str, str] = os.environ) -> str | None:
    """The run's secret as the harness hands it to a program (`CEPKIT_SECRET`); None when unset or
    empty (the program then connects without one, to a server that asks for none)."""
    return environ.get(SECRET_ENV) or None


def auth_frame(secret: str) -> dict:
    """The header a client sends first on every connection."""
    return {"op": AUTH_OP, "secret": secret}


def secret_matches(expected: str, given) -> bool:
    """Whether `given` (anything a peer sent) is the secret, compared in constant time. Anything a
    peer sends is an answer here, never an exception: a str that is not valid Unicode (a lone
    surrogate, which JSON carries as an escape) cannot be the secret."""
    if not isinstance(given, str):
        return False
    try:
        given_bytes = given.encode()
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(expected.encode(), given_bytes)


class ServerHandshake:
    """The server's side of one connection's authentication, fed one frame header at a time:
    `step(header)` returns `(reply, done, why)`: a header to send back (or None), whether the peer
    is now authenticated, and, when it is refused, why (one line naming no value the peer sent).
    Pure: it reads no socket, so the server can run many at once in one thread, and a test or a
    fuzzer can drive it directly."""

    def __init__(self, secret: str):
        self._secret = secret

    def step(self, header: dict) -> tuple[dict | None, bool, str | None]:
        if header.get("op") != AUTH_OP:
            return None, False, "its first frame was not auth"
        if not secret_matches(self._secret, header.get("secret")):
            return None, False, "wrong secret"
        return {"ok": True}, True, None
