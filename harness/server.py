"""A small threaded TCP server for the driver's frames.

One accept thread, one thread per connection: Spark may open a connection per partition, and a
reader waiting for events (long poll) must not hold up the others. Each connection handles its
requests one after the other. `stop()` closes the listener and every open connection and joins
all threads, so nothing outlives the driver.

With a `secret` (the run's, kit/wire/auth.py; specs/DRIVER.md, "Who may connect") a connection is
served only once its first frame presented it. Any other first frame, a wrong secret, nothing
within `auth_timeout_s` or a first frame larger than an auth frame can be is refused: answered
with an `unauthorized` error (best effort), closed, counted in `refused` and told to `on_refused`
in one line naming the server and the peer, never what the peer sent. The first frame is read
with a small cap and a deadline, and at most MAX_AUTHENTICATING connections wait for theirs at a
time (more are refused at once), so a peer without the secret costs the server little.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from kit.wire.auth import AUTH_MAX_HEADER_BYTES, AUTH_OP, AUTH_TIMEOUT_S, secret_matches
from kit.wire.protocol import ProtocolError, UnauthorizedError, error_header, recv_frame, send_frame

Handler = Callable[..., tuple[dict, object]]
# Connections accepted and not yet authenticated, at most (each holds a thread until it is).
MAX_AUTHENTICATING = 128


def log_to(path: Path) -> Callable[[str], None]:
    """An `on_refused` that appends each line, time-stamped (UTC), to `path`: the run's
    logs/harness.log, which the feed (its own process) and the sink (the harness's) share; one
    short write in append mode each, so their lines never interleave."""
    def write(line: str) -> None:
        stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        with open(path, "a") as f:
            f.write(f"{stamp} {line}\n")
    return write


def _peer(addr) -> str:
    host, port = addr[:2]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


class FrameServer:
    """Serves `handler(header)` per request frame, or `handler(header, body)` with `pass_body`
    (the harness sink receives Arrow data in request bodies). `name` prefixes thread names;
    `label` names the server in refusals ("feed", "sink"). `secret` None: no authentication (a
    server a library user or a test builds itself), and an auth frame is answered ok unread."""

    def __init__(self, host: str, port: int, handler: Handler, *, name: str = "driver", pass_body: bool = False,
                 secret: str | None = None, label: str | None = None,
                 on_refused: Callable[[str], None] | None = None, auth_timeout_s: float = AUTH_TIMEOUT_S):
        self._handler = handler
        self._name = name
        self._pass_body = pass_body
        self._secret = secret
        self.label = label or name
        self._on_refused = on_refused
        self.auth_timeout_s = auth_timeout_s
        self.refused = 0                    # connections refused (see the module doc)
        self._authenticating = 0
        self._listener = socket.create_server((host, port), backlog=64)
        # The accept loop wakes up this often to notice stop(); accept itself is not interruptible.
        self._listener.settimeout(0.05)
        self.host, self.port = self._listener.getsockname()[:2]
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self.connections_total = 0
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)

    def start(self) -> None:
        self._accept_thread.start()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            conn.settimeout(None)
            # Small responses (offsets, stats) must not wait for Nagle's algorithm.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = _peer(addr)
            if self._secret is not None:
                with self._lock:
                    crowded = self._authenticating >= MAX_AUTHENTICATING
                    if not crowded:
                        self._authenticating += 1
                if crowded:
                    self._refuse(conn, peer, f"{MAX_AUTHENTICATING} connections were already waiting to authenticate")
                    conn.close()
                    continue
            t = threading.Thread(target=self._serve, args=(conn, peer), name=f"{self._name}-conn", daemon=True)
            with self._lock:
                if self._stopping.is_set():
                    conn.close()
                    break
                self._conns.add(conn)
                self._threads = [x for x in self._threads if x.is_alive()] + [t]
                self.connections_total += 1
            t.start()

    def _serve(self, conn: socket.socket, peer: str) -> None:
        try:
            if self._secret is not None and not self._admit(conn, peer):
                return
            while not self._stopping.is_set():
                try:
                    frame = recv_frame(conn)
                except ProtocolError as e:
                    # Out of step with the client: say why, then hang up (best effort).
                    send_frame(conn, error_header(e))
                    break
                if frame is None:
                    break
                header, request_body = frame
                if self._secret is None and header.get("op") == AUTH_OP:
                    send_frame(conn, {"ok": True})     # a client holding a secret works here too
                    continue
                try:
                    resp, body = (self._handler(header, request_body) if self._pass_body
                                  else self._handler(header))
                except Exception as e:  # noqa: BLE001 - every failure goes back to the client as one line
                    resp, body = error_header(e), None
                send_frame(conn, resp, body)
        except OSError:
            pass    # the client went away; its reconnect starts afresh
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _admit(self, conn: socket.socket, peer: str) -> bool:
        """Whether the connection's first frame presented the secret (then answered ok); else it
        is refused. Read with a deadline and a cap, before the peer is known."""
        why = None
        try:
            frame = recv_frame(conn, max_header=AUTH_MAX_HEADER_BYTES, max_body=0,
                               deadline=time.monotonic() + self.auth_timeout_s)
            if frame is None:
                why = "it closed without authenticating"
            elif frame[0].get("op") != AUTH_OP:
                why = "its first frame was not auth"
            elif not secret_matches(self._secret, frame[0].get("secret")):
                why = "wrong secret"
        except TimeoutError:
            why = f"no auth frame within {self.auth_timeout_s:g} s"
        except ProtocolError:
            why = "its first frame was malformed or larger than an auth frame"
        except OSError:
            why = "it closed without authenticating"
        finally:
            with self._lock:
                self._authenticating -= 1
        if why is None:
            conn.settimeout(None)
            send_frame(conn, {"ok": True})
            return True
        self._refuse(conn, peer, why)
        return False

    def _refuse(self, conn: socket.socket, peer: str, why: str) -> None:
        """Report, count and answer (best effort) one refused connection, in that order: whoever
        sees it counted or refused finds its line written. The caller closes the connection."""
        if self._stopping.is_set():
            return          # cut by stop() while it authenticated: not a refusal
        if self._on_refused is not None:
            try:
                self._on_refused(f"{self.label} refused a connection from {peer}: {why}")
            except Exception:  # noqa: BLE001 - a log that cannot be written must not stop the server
                pass
        with self._lock:
            self.refused += 1
        try:
            conn.settimeout(1.0)
            send_frame(conn, {"ok": False, "error": UnauthorizedError.code,
                              "message": f"the {self.label} refused the connection: {why} (it needs the run's "
                                         f"secret: specs/DRIVER.md, \"Who may connect\")"})
        except OSError:
            pass

    def close_connections(self) -> None:
        """Cut every open connection (clients reconnect); used by stop() and by tests."""
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self._stopping.set()
        if self._accept_thread.is_alive():
            self._accept_thread.join()
        self._listener.close()
        self.close_connections()
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout=5)
