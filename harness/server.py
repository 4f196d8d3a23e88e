"""A small threaded TCP server for the driver's frames.

One accept thread, one thread per connection: Spark may open a connection per partition, and a
reader waiting for events (long poll) must not hold up the others. Each connection handles its
requests one after the other. `stop()` closes the listener and every open connection and joins
all threads, so nothing outlives the driver.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

from kit.wire.protocol import ProtocolError, error_header, recv_frame, send_frame

Handler = Callable[..., tuple[dict, object]]


class FrameServer:
    """Serves `handler(header)` per request frame, or `handler(header, body)` with `pass_body`
    (the harness sink receives Arrow data in request bodies). `name` prefixes thread names."""

    def __init__(self, host: str, port: int, handler: Handler, *, name: str = "driver", pass_body: bool = False):
        self._handler = handler
        self._name = name
        self._pass_body = pass_body
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
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            conn.settimeout(None)
            # Small responses (offsets, stats) must not wait for Nagle's algorithm.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = threading.Thread(target=self._serve, args=(conn,), name=f"{self._name}-conn", daemon=True)
            with self._lock:
                if self._stopping.is_set():
                    conn.close()
                    break
                self._conns.add(conn)
                self._threads = [x for x in self._threads if x.is_alive()] + [t]
                self.connections_total += 1
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
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
