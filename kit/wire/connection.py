"""One reconnecting request/response connection speaking the frame protocol (kit/wire/protocol.py).

Used by the driver's client (kit/wire/feed_client.py) and the sink's client (harness/sink.py). Every
request the harness makes is idempotent (reads address offsets; the sink writes each
(stream, batch) once), so a request cut by a lost connection is sent again on a new one until
`reconnect_s` passes. One connection serves one thread at a time (a lock makes concurrent use
safe but serial). It pickles without its socket and lock, so a client can be shipped to Spark's
Python workers and connects on first use there.

With the run's secret (kit/wire/auth.py) every new connection, the first and each one after a
reconnect, begins with the challenge-response (`handshake`): the secret itself never crosses the
wire. The secret pickles with the client: the executors and TaskManagers it is shipped to have
none of the program's environment.
"""

from __future__ import annotations

import socket
import threading
import time

from kit.wire.auth import AUTH_MAX_HEADER_BYTES, answer_frame, check_server, hello_frame, new_nonce
from kit.wire.protocol import ProtocolError, UnauthorizedError, recv_frame, send_frame


def handshake(sock: socket.socket, secret: str, *, where: str,
              refused: type[Exception] = UnauthorizedError) -> None:
    """Prove on `sock` that this side holds `secret`, once the server proved it does
    (kit/wire/auth.py). A refusal, or a server that does not prove itself, raises `refused`
    (never retried: a wrong secret stays wrong); a connection lost meanwhile raises OSError."""
    client_nonce = new_nonce()
    send_frame(sock, hello_frame(client_nonce))
    answer = _handshake_answer(sock, where)
    if not answer.get("ok"):
        raise refused(f"{where}: {answer.get('message', 'the connection was refused')}")
    server_nonce = check_server(secret, client_nonce, answer)
    if server_nonce is None:
        raise refused(f"{where}: the server's proof does not match this client's secret (a wrong secret here, "
                      f"a server started without one, or not the run's server: specs/DRIVER.md, \"Who may "
                      f"connect\")")
    send_frame(sock, answer_frame(secret, client_nonce, server_nonce))
    answer = _handshake_answer(sock, where)
    if not answer.get("ok"):
        raise refused(f"{where}: {answer.get('message', 'the connection was refused')}")


def _handshake_answer(sock: socket.socket, where: str) -> dict:
    frame = recv_frame(sock, max_header=AUTH_MAX_HEADER_BYTES, max_body=0)
    if frame is None:
        raise ConnectionResetError(f"connection closed by the {where} during the auth handshake")
    return frame[0]


class FrameConnection:
    def __init__(self, host: str, port: int, *, peer: str, unreachable: type[Exception], timeout_s: float,
                 reconnect_s: float, secret: str | None = None, refused: type[Exception] | None = None):
        self.host, self.port = host, int(port)
        self.peer = peer
        self.where = f"{peer} at {self.host}:{self.port}"
        self._unreachable = unreachable
        # Raised, at once, when the peer refuses the secret: trying again cannot help.
        self._refused = refused or unreachable
        self._secret = secret
        self.timeout_s, self.reconnect_s = timeout_s, reconnect_s
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self.reconnects = 0

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_sock"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def request(self, header: dict, body=None, *, wait_s: float = 0.0) -> tuple[dict, memoryview]:
        """Send one frame, return the answer's (header, body). `wait_s`: the peer may legitimately
        take this long before it starts answering (a long-polling request). A ProtocolError (a
        malformed answer) drops the connection and propagates; a connection that stays lost for
        `reconnect_s` raises `unreachable`."""
        deadline = None
        with self._lock:
            while True:
                try:
                    if self._sock is None:
                        self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
                        # Small requests and answers must not wait for Nagle's algorithm.
                        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        if self._secret is not None:
                            self._authenticate()
                    self._sock.settimeout(self.timeout_s + wait_s)
                    send_frame(self._sock, header, body)
                    frame = recv_frame(self._sock)
                    if frame is None:
                        raise ConnectionResetError(f"connection closed by the {self.peer}")
                    return frame
                except ProtocolError:
                    self._drop()
                    raise
                except OSError as e:
                    self._drop()
                    now = time.monotonic()
                    deadline = deadline or now + self.reconnect_s
                    if now >= deadline:
                        raise self._unreachable(f"{self.where}: unreachable: {e}") from None
                    self.reconnects += 1
                    time.sleep(0.05)

    def _authenticate(self) -> None:
        """The handshake on the new connection; a refusal raises `refused` (never retried)."""
        try:
            handshake(self._sock, self._secret, where=self.where, refused=self._refused)
        except ProtocolError as e:
            self._drop()
            raise self._refused(f"{self.where}: a malformed answer to the auth handshake: {e}") from None
        except self._refused:
            self._drop()
            raise

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def close(self) -> None:
        with self._lock:
            self._drop()


class FrameClient:
    """What the driver's and the sink's clients share: one FrameConnection in `_conn`, closed by
    `close()` or by leaving a `with` block."""

    _conn: FrameConnection

    @property
    def reconnects(self) -> int:
        return self._conn.reconnects

    def close(self) -> None:
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
