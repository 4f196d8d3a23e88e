"""Who may connect to a run's feed and sink: the holders of the run's secret (specs/DRIVER.md, "Who
may connect"), proven without the secret ever crossing the wire.

The feed and the sink listen beyond loopback on a cluster (`run.feed_bind`), where anyone who
reaches their ports could read the load or slip answers into the verdict. So the harness makes a
random secret for every engine run and starts both servers with it; every connection then begins
with a challenge-response in which each side proves it holds the secret by an HMAC-SHA256 of
both sides' fresh nonces, keyed by the secret, or the connection is refused (harness/server.py):

    client -> {"op": "auth", "nonce": CN}
    server -> {"ok": true, "nonce": SN, "proof": HMAC(secret, "cepkit-auth server CN SN")}
    client -> {"op": "auth", "proof": HMAC(secret, "cepkit-auth client CN SN")}
    server -> {"ok": true}

(nonces: 128 random bits as 32 lowercase hex digits; proofs: 64 lowercase hex digits). Someone
who sees the traffic learns two nonces and two proofs that no later connection accepts (each
server nonce is new); the client checks the server's proof too, so a program never hands its
load's answers to a server that does not hold the secret. The program gets the secret in its
environment (`CEPKIT_SECRET`), never on its command line (argv is readable by every user in
/proc, and Flink's client logs program arguments), reads it once and hands it to every client it
makes, those it ships to executors and TaskManagers included: inside the pickled clients, source
options and functions, since those hosts have none of our environment.

Standard library only: it ships to the engine's workers with the rest of kit's wire.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping

SECRET_ENV = "CEPKIT_SECRET"
AUTH_OP = "auth"
# A connection that has not completed the handshake this long after it was accepted is refused.
AUTH_TIMEOUT_S = 10.0
# An auth frame is a few dozen bytes: the handshake's frames are read with this cap on their header
# (and no body), so a peer without the secret never makes a server hold more than this.
AUTH_MAX_HEADER_BYTES = 4096


def new_secret() -> str:
    """A fresh run secret: 128 random bits as 32 hex digits."""
    return secrets.token_hex(16)


def secret_from_env(environ: Mapping[str, str] = os.environ) -> str | None:
    """The run's secret as the harness hands it to a program (`CEPKIT_SECRET`); None when unset or
    empty (the program then connects without one, to a server that asks for none)."""
    return environ.get(SECRET_ENV) or None


AUTH_CONTEXT = "cepkit-auth"
_NONCE = re.compile(r"[0-9a-f]{32}")
_PROOF = re.compile(r"[0-9a-f]{64}")


def new_nonce() -> str:
    """128 random bits as 32 lowercase hex digits."""
    return secrets.token_hex(16)


def is_nonce(value) -> bool:
    return isinstance(value, str) and _NONCE.fullmatch(value) is not None


def is_proof(value) -> bool:
    return isinstance(value, str) and _PROOF.fullmatch(value) is not None


def proof(secret: str, role: str, client_nonce: str, server_nonce: str) -> str:
    """HMAC-SHA256 keyed by the secret of `cepkit-auth ROLE CN SN` (role: "client" or "server"),
    as 64 lowercase hex digits. The role keeps one side's proof from serving as the other's."""
    message = f"{AUTH_CONTEXT} {role} {client_nonce} {server_nonce}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def proofs_match(expected: str, given) -> bool:
    """Whether `given` (anything a peer sent) is the expected proof, compared in constant time."""
    return is_proof(given) and hmac.compare_digest(expected.encode(), given.encode())


def hello_frame(client_nonce: str) -> dict:
    """The header a client sends first on every connection."""
    return {"op": AUTH_OP, "nonce": client_nonce}


def answer_frame(secret: str, client_nonce: str, server_nonce: str) -> dict:
    """The client's second header: its proof, once the server proved itself."""
    return {"op": AUTH_OP, "proof": proof(secret, "client", client_nonce, server_nonce)}


def check_server(secret: str, client_nonce: str, answer: dict) -> str | None:
    """The server's nonce from its answer to the hello, or None when the answer does not prove the
    server holds the secret (no nonce, no proof, a wrong one)."""
    server_nonce = answer.get("nonce")
    if not is_nonce(server_nonce):
        return None
    if not proofs_match(proof(secret, "server", client_nonce, server_nonce), answer.get("proof")):
        return None
    return server_nonce


class ServerHandshake:
    """The server's side of one connection's authentication, fed one frame header at a time:
    `step(header)` returns `(reply, done, why)`: a header to send back (or None), whether the peer
    is now authenticated, and, when it is refused, why (one line naming no value the peer sent).
    Pure: it reads no socket, so the server can run many at once in one thread, and a test or a
    fuzzer can drive it directly."""

    def __init__(self, secret: str):
        self._secret = secret
        self._client_nonce: str | None = None
        self._server_nonce: str | None = None

    def step(self, header: dict) -> tuple[dict | None, bool, str | None]:
        if header.get("op") != AUTH_OP:
            return None, False, ("its first frame was not auth" if self._client_nonce is None
                                 else "its second frame was not auth")
        if self._client_nonce is None:
            if "secret" in header:
                return None, False, "it sent a secret in clear (a client of an older cepkit): never accepted"
            if not is_nonce(header.get("nonce")):
                return None, False, "its auth frame carried no nonce of 32 hex digits"
            self._client_nonce, self._server_nonce = header["nonce"], new_nonce()
            return {"ok": True, "nonce": self._server_nonce,
                    "proof": proof(self._secret, "server", self._client_nonce, self._server_nonce)}, False, None
        expected = proof(self._secret, "client", self._client_nonce, self._server_nonce)
        if not proofs_match(expected, header.get("proof")):
            return None, False, "wrong secret"
        return {"ok": True}, True, None
