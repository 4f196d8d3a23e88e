"""A small threaded TCP server for the driver's frames.

One gate thread, one thread per authenticated connection: Spark may open a connection per
partition, and a reader waiting for events (long poll) must not hold up the others. Each connection
handles its requests one after the other. `stop()` closes the listener and every open connection
and joins all threads, so nothing outlives the driver.

With a `secret` (the run's, kit/wire/auth.py; specs/DRIVER.md, "Who may connect") a connection is
served only once it has authenticated. Until then it is the gate's: one thread accepts every
connection and runs every handshake at once (non-blocking sockets and a selector), each with its
own deadline (`auth_timeout_s` from its accept) and a small cap on what it may send. No thread
and no shared queue of a fixed size waits on a stranger: when MAX_PENDING connections are
waiting (a flood), the oldest one of the peer host that holds the most of them is dropped to make
room, so a flood from one host pushes out its own connections, never the run's clients that
connect from elsewhere. Anything else the first frames carry (another secret, another op, a
malformed, truncated, oversized or slow frame) is refused: answered with an `unauthorized` error
(best effort), closed, counted in `refused` and told to `on_refused` in one line naming the server
and the peer, never what the peer sent. A malformed frame from an authenticated connection is
answered with a `protocol` error, closed, counted and told the same way. At most
LOG_LINES_PER_WINDOW refusals are told one by one per LOG_WINDOW_S; the rest are counted and told
in one line after the window (or at stop), so a flood cannot fill the disk with its log.
"""

from __future__ import annotations

import collections
import json
import resource
import selectors
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from kit.wire.auth import AUTH_MAX_HEADER_BYTES, AUTH_OP, AUTH_TIMEOUT_S, ServerHandshake
from kit.wire.protocol import (MAX_BODY_BYTES, PREFIX, ProtocolError, UnauthorizedError, encode_frame,
                               error_header, recv_frame, send_frame)

Handler = Callable[..., tuple[dict, object]]
# Connections accepted and not yet authenticated, at most; a newcomer beyond pushes out the oldest
# waiting connection of the peer host that holds the most (see the module doc). Each costs a file
# descriptor and a few KiB, never a thread; fewer when the descriptor limit is low.
MAX_PENDING = 1024
# Refusals told one by one per window, at most; the rest in one line per window.
LOG_WINDOW_S = 10.0
LOG_LINES_PER_WINDOW = 100
# Connections accepted per wake of the gate, at most: handshakes in progress are not starved.
_ACCEPTS_PER_WAKE = 64


def _max_pending() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_PENDING
    return max(8, min(MAX_PENDING, soft // 4))


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


class _Pending:
    """One connection in the gate: its socket, its deadline, the frame it is sending so far."""

    __slots__ = ("sock", "peer", "host", "deadline", "buf", "need", "head_len", "handshake")

    def __init__(self, sock: socket.socket, addr, deadline: float, handshake: ServerHandshake):
        self.sock, self.peer, self.host = sock, _peer(addr), addr[0]
        self.deadline = deadline
        self.handshake = handshake
        self.buf = bytearray()
        self.need = PREFIX.size         # bytes still missing from the current part of the frame
        self.head_len: int | None = None


class FrameServer:
    """Serves `handler(header)` per request frame, or `handler(header, body)` with `pass_body`
    (the harness sink receives Arrow data in request bodies; the feed's requests carry none, so
    a body sent to it is a malformed frame). `name` prefixes thread names; `label` names the
    server in refusals ("feed", "sink"). `secret` None: no authentication (a server a library user
    or a test builds itself), and an auth frame is answered ok unread."""

    def __init__(self, host: str, port: int, handler: Handler, *, name: str = "driver", pass_body: bool = False,
                 secret: str | None = None, label: str | None = None,
                 on_refused: Callable[[str], None] | None = None, auth_timeout_s: float = AUTH_TIMEOUT_S,
                 max_body: int = MAX_BODY_BYTES):
        self._handler = handler
        self._name = name
        self._pass_body = pass_body
        self._max_body = max_body if pass_body else 0
        self._secret = secret
        self.label = label or name
        self._on_refused = on_refused
        self.auth_timeout_s = auth_timeout_s
        self.max_pending = _max_pending()
        self.refused = 0                    # connections refused (see the module doc)
        self._listener = socket.create_server((host, port), backlog=1024)
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self.connections_total = 0
        # The gate's: every connection waiting to authenticate, oldest first, overall and per host.
        self._pending: dict[socket.socket, _Pending] = {}
        self._by_host: dict[str, collections.OrderedDict] = {}
        self._log_lock = threading.Lock()
        self._log_window_start = time.monotonic()
        self._log_told = 0
        self._log_untold = 0
        self._gate_thread = threading.Thread(target=self._gate_loop, name=f"{name}-accept", daemon=True)

    def start(self) -> None:
        self._gate_thread.start()

    @property
    def open_connections(self) -> int:
        """Connections open now: served ones and those waiting to authenticate."""
        with self._lock:
            return len(self._conns) + len(self._pending)

    # ---- the gate ----------------------------------------------------------------------------

    def _gate_loop(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        try:
            while not self._stopping.is_set():
                timeout = 0.05
                if self._pending:
                    soonest = min(p.deadline for p in self._pending.values())
                    timeout = max(0.0, min(timeout, soonest - time.monotonic()))
                for key, _ in sel.select(timeout):
                    if key.data is None:
                        self._accept_some(sel)
                    elif key.fileobj in self._pending:
                        self._read_pending(sel, key.data)
                now = time.monotonic()
                for p in [p for p in self._pending.values() if p.deadline <= now]:
                    self._drop_pending(sel, p, f"no whole auth handshake within {self.auth_timeout_s:g} s")
                self._flush_untold(now)
        finally:
            for p in list(self._pending.values()):      # cut by stop(): not refusals
                self._forget(sel, p)
                p.sock.close()
            sel.close()

    def _accept_some(self, sel: selectors.BaseSelector) -> None:
        for _ in range(_ACCEPTS_PER_WAKE):
            try:
                conn, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return          # out of descriptors, or the listener is closing: the next wake tries again
            # Small responses (offsets, stats) must not wait for Nagle's algorithm.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections_total += 1
            if self._secret is None:
                conn.setblocking(True)
                self._serve_in_thread(conn, _peer(addr))
                continue
            conn.setblocking(False)
            if len(self._pending) >= self.max_pending:
                self._make_room(sel)
            p = _Pending(conn, addr, time.monotonic() + self.auth_timeout_s, ServerHandshake(self._secret))
            with self._lock:
                self._pending[conn] = p
            self._by_host.setdefault(p.host, collections.OrderedDict())[conn] = p
            sel.register(conn, selectors.EVENT_READ, p)

    def _make_room(self, sel: selectors.BaseSelector) -> None:
        """Drop the oldest waiting connection of the host that holds the most waiting ones."""
        host = max(self._by_host, key=lambda h: len(self._by_host[h]))
        oldest = next(iter(self._by_host[host].values()))
        self._drop_pending(sel, oldest, f"{len(self._pending)} connections were waiting to authenticate, "
                                        f"the most from its host: the oldest of them made room")

    def _read_pending(self, sel: selectors.BaseSelector, p: _Pending) -> None:
        """Take what the peer sent so far; act on each whole frame. Never reads beyond the frame
        (what follows the handshake belongs to the serving thread)."""
        try:
            data = p.sock.recv(p.need)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop_pending(sel, p, "it closed without authenticating")
            return
        p.buf += data
        p.need -= len(data)
        if p.need:
            return
        if p.head_len is None:
            head_len, body_len = PREFIX.unpack(p.buf)
            if head_len > AUTH_MAX_HEADER_BYTES or body_len:
                self._drop_pending(sel, p, "its first frame was malformed or larger than an auth frame")
                return
            p.buf.clear()
            p.head_len, p.need = head_len, head_len
            if head_len:
                return
        try:
            header = json.loads(bytes(p.buf))
        except (ValueError, RecursionError, MemoryError):   # not UTF-8, not JSON, nested too deep
            header = None
        p.buf.clear()
        p.head_len, p.need = None, PREFIX.size
        if not isinstance(header, dict):
            self._drop_pending(sel, p, "its first frame was malformed or larger than an auth frame")
            return
        try:
            reply, done, why = p.handshake.step(header)
        except Exception as e:  # noqa: BLE001 - whatever a peer sends, it is refused, never a traceback
            reply, done, why = None, False, f"its auth frame could not be checked ({type(e).__name__})"
        if why is not None:
            self._drop_pending(sel, p, why)
            return
        if reply is not None and not self._send_nowait(p.sock, reply):
            self._drop_pending(sel, p, "it did not take the server's answer")
            return
        if done:
            self._forget(sel, p)
            p.sock.setblocking(True)
            self._serve_in_thread(p.sock, p.peer)

    @staticmethod
    def _send_nowait(sock: socket.socket, header: dict) -> bool:
        """Send a small frame on a non-blocking socket; False when it did not all go at once (a
        fresh connection's send buffer takes a handshake frame whole)."""
        data = encode_frame(header)
        try:
            return sock.send(data) == len(data)
        except OSError:
            return False

    def _forget(self, sel: selectors.BaseSelector, p: _Pending) -> None:
        with self._lock:
            self._pending.pop(p.sock, None)
        same = self._by_host.get(p.host)
        if same is not None:
            same.pop(p.sock, None)
            if not same:
                del self._by_host[p.host]
        try:
            sel.unregister(p.sock)
        except (KeyError, ValueError):
            pass

    def _drop_pending(self, sel: selectors.BaseSelector, p: _Pending, why: str) -> None:
        self._forget(sel, p)
        self._refuse(p.sock, p.peer, why)
        p.sock.close()

    # ---- serving -----------------------------------------------------------------------------

    def _serve_in_thread(self, conn: socket.socket, peer: str) -> None:
        conn.settimeout(None)
        t = threading.Thread(target=self._serve, args=(conn, peer), name=f"{self._name}-conn", daemon=True)
        with self._lock:
            if self._stopping.is_set():
                conn.close()
                return
            self._conns.add(conn)
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()

    def _serve(self, conn: socket.socket, peer: str) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    frame = recv_frame(conn, max_body=self._max_body)
                except ProtocolError as e:
                    # Out of step with the client: say why, then hang up (best effort).
                    self._refuse(conn, peer, f"malformed frame: {e}", answer=error_header(e))
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
        except Exception as e:  # noqa: BLE001 - a connection's end, never a traceback on the server's stderr
            self._refuse(conn, peer, f"internal error serving it: {type(e).__name__}: {e}", answer=error_header(e))
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    # ---- refusals ----------------------------------------------------------------------------

    def _refuse(self, conn: socket.socket, peer: str, why: str, answer: dict | None = None) -> None:
        """Report, count and answer (best effort) one refused connection, in that order: whoever
        sees it counted or refused finds its line written (unless a flood's lines are being
        summed up). The caller closes the connection."""
        if self._stopping.is_set():
            return          # cut by stop() while it authenticated: not a refusal
        self._tell(f"{self.label} refused a connection from {peer}: {why}")
        with self._lock:
            self.refused += 1
        if answer is None:
            answer = {"ok": False, "error": UnauthorizedError.code,
                      "message": f"the {self.label} refused the connection: {why} (it needs the run's "
                                 f"secret: specs/DRIVER.md, \"Who may connect\")"}
        try:
            if conn.getblocking():
                conn.settimeout(1.0)
                send_frame(conn, answer)
            else:
                self._send_nowait(conn, answer)
        except OSError:
            pass

    def _tell(self, line: str) -> None:
        if self._on_refused is None:
            return
        with self._log_lock:
            now = time.monotonic()
            self._flush_untold_locked(now)
            if self._log_told >= LOG_LINES_PER_WINDOW:
                self._log_untold += 1
                return
            self._log_told += 1
        self._write(line)

    def _flush_untold(self, now: float, force: bool = False) -> None:
        if self._on_refused is None:
            return
        with self._log_lock:
            self._flush_untold_locked(now, force)

    def _flush_untold_locked(self, now: float, force: bool = False) -> None:
        if not force and now - self._log_window_start < LOG_WINDOW_S:
            return
        if self._log_untold:
            self._write(f"{self.label} refused {self._log_untold} more connections in "
                        f"{now - self._log_window_start:.0f} s, not told one by one "
                        f"(at most {LOG_LINES_PER_WINDOW} lines per {LOG_WINDOW_S:g} s)")
        self._log_window_start, self._log_told, self._log_untold = now, 0, 0

    def _write(self, line: str) -> None:
        try:
            self._on_refused(line)
        except Exception:  # noqa: BLE001 - a log that cannot be written must not stop the server
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
        if self._gate_thread.is_alive():
            self._gate_thread.join()
        self._listener.close()
        if self._log_untold:
            self._flush_untold(time.monotonic(), force=True)
        self.close_connections()
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout=5)
