"""Who may connect to a run's feed and sink (kit/wire/auth.py, harness/server.py; specs/DRIVER.md,
"Who may connect"): a client that proves it holds the secret (the challenge-response) is served, a
missing or wrong one, a silent peer and an oversized first frame are refused, each refusal counted
and logged once, and the secret itself is never on the wire, in a log line, an error message or
the driver's command line. Clients authenticate on every connection, after a reconnect and after
being pickled (as they are shipped to executors), and refuse a server that does not prove itself.

Real sockets on 127.0.0.1, real servers (the driver in process and as its own process, the sink).
"""

from __future__ import annotations

import json
import pickle
import socket
import threading
import time

import numpy as np
import psutil
import pyarrow as pa
import pytest

import harness.server
from harness.config import DriverConfig
from harness.playback import Driver
from harness.process import DriverProcess
from harness.server import FrameServer, log_to
from harness.sink import SinkServer
from kit.wire.auth import SECRET_ENV, answer_frame, hello_frame, new_nonce, new_secret, proof
from kit.wire.connection import handshake
from kit.wire.feed_client import DriverClient
from kit.wire.protocol import PREFIX, UnauthorizedError, recv_frame, send_frame
from kit.wire.sink_client import SinkClient, SinkError
from spark_runtime.source import SourceOptions
from tests.helpers import FAST

SECRET = "0123456789abcdef0123456789abcdef"
WRONG = "wrong-secret-the-peer-guessed"
SHORT_S = 0.3       # how long a connection may take to authenticate, in these tests

pytestmark = pytest.mark.usefixtures("no_leaked_threads")


def rows(n: int) -> pa.Table:
    return pa.table({"key": pa.array(np.arange(n)), "inputTS": pa.array(np.full(n, time.time_ns() // 10**6))})


def echo(header: dict):
    return {"ok": True, "echo": header.get("op")}, None


class Lines(list):
    """An on_refused that keeps the lines (thread-safe enough: list.append)."""

    def __call__(self, line: str) -> None:
        self.append(line)


def authenticate(sock: socket.socket, secret: str = SECRET) -> dict:
    """The client's side of the handshake, by hand: the server's last answer."""
    client_nonce = new_nonce()
    first = answer(sock, hello_frame(client_nonce))
    if not first.get("ok"):
        return first
    assert first["proof"] == proof(SECRET, "server", client_nonce, first["nonce"])   # the server proved itself
    return answer(sock, answer_frame(secret, client_nonce, first["nonce"]))


def raw(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def answer(sock: socket.socket, header: dict | None) -> dict | None:
    """Send `header` (None: send nothing) and read the answer; None when the server just closed."""
    if header is not None:
        send_frame(sock, header)
    try:
        frame = recv_frame(sock)
    except ConnectionResetError:
        return None
    return None if frame is None else frame[0]


def closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def wait_for(predicate, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def server():
    lines = Lines()
    srv = FrameServer("127.0.0.1", 0, echo, name="test", label="feed", secret=SECRET, on_refused=lines,
                      auth_timeout_s=SHORT_S)
    srv.start()
    srv.lines = lines
    yield srv
    srv.stop()


# ---- the server ---------------------------------------------------------------------------------

def test_the_right_secret_is_served(server):
    with raw(server.port) as s:
        assert authenticate(s) == {"ok": True}
        assert answer(s, {"op": "hello"}) == {"ok": True, "echo": "hello"}
        assert answer(s, {"op": "stats"}) == {"ok": True, "echo": "stats"}
    assert server.refused == 0 and server.lines == []


@pytest.mark.parametrize("first, why", [
    ({"op": "hello"}, "its first frame was not auth"),
    ({"op": "auth"}, "its auth frame carried no nonce of 32 hex digits"),
    ({"op": "auth", "nonce": "0" * 31}, "its auth frame carried no nonce of 32 hex digits"),
    ({"op": "auth", "nonce": "A" * 32}, "its auth frame carried no nonce of 32 hex digits"),
    ({"op": "auth", "nonce": 12345}, "its auth frame carried no nonce of 32 hex digits"),
    # A client of an older cepkit sent the secret itself: refused, whatever the secret.
    ({"op": "auth", "secret": WRONG}, "it sent a secret in clear (a client of an older cepkit): never accepted"),
    ({"op": "auth", "secret": SECRET}, "it sent a secret in clear (a client of an older cepkit): never accepted"),
])
def test_a_missing_or_wrong_secret_is_refused_counted_and_logged_once(server, first, why):
    with raw(server.port) as s:
        refusal = answer(s, first)
        assert refusal["ok"] is False and refusal["error"] == "unauthorized" and why in refusal["message"]
        assert closed(s)             # never served: the connection is gone
        port = s.getsockname()[1]
    assert wait_for(lambda: server.lines)
    assert server.refused == 1 and server.lines == [f"feed refused a connection from 127.0.0.1:{port}: {why}"]
    for text in (server.lines[0], refusal["message"]):
        assert SECRET not in text and WRONG not in text


def test_a_silent_peer_is_refused_after_the_timeout(server):
    with raw(server.port) as s:
        t0 = time.monotonic()
        refusal = answer(s, None)
        waited = time.monotonic() - t0
    assert refusal["error"] == "unauthorized" and f"no whole auth handshake within {SHORT_S:g} s" in refusal["message"]
    assert SHORT_S * 0.9 <= waited < SHORT_S + 2
    assert wait_for(lambda: server.refused == 1) and len(server.lines) == 1


def test_a_trickling_peer_does_not_stretch_the_timeout(server):
    """One byte now and then resets no clock: the whole first frame must come within the timeout."""
    frame = json.dumps(hello_frame(new_nonce())).encode()
    data = PREFIX.pack(len(frame), 0) + frame
    with raw(server.port) as s:
        t0 = time.monotonic()
        try:
            for byte in data:
                s.sendall(bytes([byte]))
                time.sleep(SHORT_S / 4)
        except OSError:
            pass            # the server hung up mid-frame
        assert time.monotonic() - t0 < len(data) * SHORT_S / 4 / 2      # cut long before the frame was whole
    assert wait_for(lambda: server.refused == 1)
    assert "no whole auth handshake within" in server.lines[0]


@pytest.mark.parametrize("prefix", [PREFIX.pack(1 << 20, 0), PREFIX.pack(20, 1 << 31), PREFIX.pack(4097, 0)])
def test_an_oversized_first_frame_is_refused_before_it_is_read(server, prefix):
    """A peer without the secret never makes the server allocate or read more than an auth frame."""
    with raw(server.port) as s:
        s.sendall(prefix)
        refusal = answer(s, None)
    assert refusal["error"] == "unauthorized" and "larger than an auth frame" in refusal["message"]
    assert wait_for(lambda: server.refused == 1) and len(server.lines) == 1


def test_a_peer_that_hangs_up_unauthenticated_counts_once(server):
    socket.create_connection(("127.0.0.1", server.port)).close()
    assert wait_for(lambda: server.refused == 1)
    assert len(server.lines) == 1 and "closed without authenticating" in server.lines[0]


def raw_from(port: int, source: str) -> socket.socket:
    """A connection from another loopback address: another host, as the server sees it."""
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


@pytest.mark.parametrize("client_host", ["127.0.0.2", "127.0.0.1"])
def test_a_flood_of_silent_strangers_does_not_keep_the_runs_client_out(client_host):
    """Regression (issue 45): 128 connections that never authenticated filled the queue of those
    waiting, and the run's own client, holding the right secret, was refused. Now no queue a
    stranger can fill: the waiting connections are bounded, and a newcomer beyond the bound pushes
    out the oldest waiting one of the host that holds the most, so the client is served, from
    another host or from the flood's own."""
    lines = Lines()
    srv = FrameServer("127.0.0.1", 0, echo, name="test", secret=SECRET, on_refused=lines, auth_timeout_s=30)
    srv.max_pending = 16
    srv.start()
    flood = []
    try:
        for _ in range(200):
            flood.append(raw(srv.port))
        assert wait_for(lambda: srv.connections_total == 200)
        assert srv.open_connections <= 16
        with (raw_from(srv.port, client_host) if client_host != "127.0.0.1" else raw(srv.port)) as s:
            assert authenticate(s) == {"ok": True}
            assert answer(s, {"op": "stats"}) == {"ok": True, "echo": "stats"}
        # Each stranger pushed out is refused, counted and told; no thread waits on any of them.
        assert wait_for(lambda: srv.refused >= 200 - 16)
        assert "connections were waiting to authenticate, the most from its host" in lines[0]
        assert sum(t.name == "test-conn" for t in threading.enumerate()) <= 1
    finally:
        for w in flood:
            w.close()
        srv.stop()


def test_a_flood_of_refusals_is_told_in_bounded_lines(monkeypatch):
    """Every refusal counts; at most LOG_LINES_PER_WINDOW are told one by one per window, the rest
    in one line (at the window's end or at stop): a flood cannot fill the disk with the log."""
    monkeypatch.setattr(harness.server, "LOG_LINES_PER_WINDOW", 3)
    lines = Lines()
    srv = FrameServer("127.0.0.1", 0, echo, name="test", label="sink", secret=SECRET, on_refused=lines)
    srv.start()
    try:
        for _ in range(10):
            with raw(srv.port) as s:
                assert answer(s, {"op": "hello"})["error"] == "unauthorized"
        assert wait_for(lambda: srv.refused == 10)
    finally:
        srv.stop()
    assert len(lines) == 4 and all("its first frame was not auth" in ln for ln in lines[:3])
    assert lines[3].startswith("sink refused 7 more connections in ") and "not told one by one" in lines[3]


@pytest.mark.parametrize("head", [
    b'{"op": "auth", "secret": "\\ud800"}',               # a secret that is not valid Unicode
    b'{"op": "auth", "secret": "\\udcff' + b'x' * 31 + b'"}',
    b"[" * 2000 + b"]" * 2000,                             # nested beyond Python's stack, under 4 KiB
    b'{"op": "auth", "secret": ' + b"[" * 2000 + b"]" * 2000 + b"}",
    b'{"op": "auth", "secret": "\xff\xfe"}',                # not UTF-8
    b"",                                                    # an empty header
    b"null",
])
def test_a_malformed_first_frame_is_refused_logged_and_counted(server, head):
    """Regression (issue 45): such a first frame killed the connection's thread with a traceback
    on the server's stderr; it was neither answered, nor logged, nor counted."""
    with raw(server.port) as s:
        s.sendall(PREFIX.pack(len(head), 0) + head)
        refusal = answer(s, None)
    assert refusal is not None and refusal["error"] == "unauthorized"
    assert wait_for(lambda: server.refused == 1) and len(server.lines) == 1
    assert "feed refused a connection from 127.0.0.1:" in server.lines[0]


@pytest.mark.parametrize("prefix, head", [
    (None, b"[" * 100_000 + b"]" * 100_000),                # nested deep, under the 1 MiB cap
    (None, b"\xff" * 10),
    (PREFIX.pack(2, 1 << 30), b"{}"),                       # a body, to the feed, which takes none
    (PREFIX.pack((1 << 20) + 1, 0), b""),
])
def test_a_malformed_frame_after_authenticating_is_answered_logged_and_counted(server, prefix, head):
    with raw(server.port) as s:
        assert authenticate(s) == {"ok": True}
        s.sendall((prefix or PREFIX.pack(len(head), 0)) + head)
        refusal = answer(s, None)
        assert refusal is not None and refusal["error"] == "protocol"
        assert closed(s)
    assert wait_for(lambda: server.refused == 1) and len(server.lines) == 1
    assert ": malformed frame: " in server.lines[0]


def test_a_server_without_a_secret_serves_anyone_and_answers_an_auth_frame():
    """Library users and tests build servers without a secret; a client holding one works there."""
    srv = FrameServer("127.0.0.1", 0, echo, name="test")
    srv.start()
    try:
        with raw(srv.port) as s:
            assert answer(s, {"op": "hello"}) == {"ok": True, "echo": "hello"}
            assert answer(s, hello_frame(new_nonce())) == {"ok": True}
        # A client holding a secret refuses such a server: it cannot prove it holds the run's.
        with raw(srv.port) as s, pytest.raises(UnauthorizedError, match="the server's proof does not match this client's secret"):
            handshake(s, SECRET, where="test")
        assert srv.refused == 0
    finally:
        srv.stop()


def test_a_connection_cut_by_stop_is_no_refusal():
    lines = Lines()
    srv = FrameServer("127.0.0.1", 0, echo, name="test", secret=SECRET, on_refused=lines, auth_timeout_s=30)
    srv.start()
    with raw(srv.port) as s:
        assert wait_for(lambda: srv.open_connections == 1)
        srv.stop()
        assert closed(s)
    assert srv.refused == 0 and lines == []


# ---- the driver and the sink, with their clients ------------------------------------------------

def test_the_driver_serves_its_clients_and_refuses_the_rest(ticks, tmp_path):
    log = tmp_path / "harness.log"
    with Driver(DriverConfig(ticks, hold=True, **FAST), secret=SECRET, on_refused=log_to(log),
                auth_timeout_s=SHORT_S) as drv:
        with DriverClient(port=drv.port, secret=SECRET) as c:
            assert c.info()["total_events"] > 0 and c.latest_offset() == 0
        t0 = time.monotonic()
        for secret in (None, WRONG):
            with pytest.raises(UnauthorizedError) as refused:
                DriverClient(port=drv.port, secret=secret).stats()
            assert SECRET not in str(refused.value) and WRONG not in str(refused.value)
        assert time.monotonic() - t0 < 5          # refused at once: a wrong secret is not retried
        # A wrong secret is found out by the client first: the server's proof does not match it, so
        # it hangs up before it gives a proof of its own (the server counts a hang-up).
        assert str(refused.value).startswith(f"driver at 127.0.0.1:{drv.port}: the server's proof does not match "
                                             "this client's secret")
        with DriverClient(port=drv.port, secret=SECRET) as c:
            assert wait_for(lambda: c.stats()["refused_connections"] == 2)
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and "feed refused a connection from 127.0.0.1:" in lines[0]
    assert lines[0].endswith("its first frame was not auth") and lines[1].endswith("it closed without authenticating")
    assert SECRET not in log.read_text() and WRONG not in log.read_text()


def test_the_sink_takes_batches_only_from_holders_of_the_secret(tmp_path):
    lines = Lines()
    with SinkServer(tmp_path / "out", secret=SECRET, on_refused=lines, auth_timeout_s=SHORT_S) as sink:
        with SinkClient(port=sink.port, secret=SECRET) as client:
            assert client.emit("S", 0, rows(3)) == 3
        with raw(sink.port) as s:
            assert answer(s, {"op": "stats"})["error"] == "unauthorized"
        with pytest.raises(SinkError, match="the server's proof does not match this client's secret") as refused:
            SinkClient(port=sink.port, secret=WRONG).emit("S", 1, rows(2))
        assert SECRET not in str(refused.value) and WRONG not in str(refused.value)
        with raw(sink.port) as s:         # silent
            assert answer(s, None)["error"] == "unauthorized"
        assert wait_for(lambda: len(lines) == 3)
        assert [ln.split(": ", 1)[1] for ln in lines] == ["its first frame was not auth",
                                                          "it closed without authenticating",
                                                          f"no whole auth handshake within {SHORT_S:g} s"]
        # A client without the secret sends a batch first: refused unread (it has a body), every try.
        with pytest.raises(SinkError):
            SinkClient(port=sink.port, reconnect_s=0.3).emit("S", 2, rows(2))
        assert wait_for(lambda: len(lines) == sink.stats()["refused_connections"] > 3)
        assert sink.stats()["total_rows"] == 3
    assert all(ln.startswith("sink refused a connection from 127.0.0.1:") for ln in lines)


def test_a_client_authenticates_again_after_a_reconnect(ticks):
    with Driver(DriverConfig(ticks, hold=True, **FAST), secret=SECRET) as drv:
        with DriverClient(port=drv.port, secret=SECRET) as c:
            assert c.latest_offset() == 0
            drv._server.close_connections()       # the connection is lost; the client reconnects
            assert wait_for(lambda: drv._server.open_connections == 0)
            assert c.latest_offset() == 0 and c.reconnects >= 1
            assert c.stats()["refused_connections"] == 0 and c.stats()["connections_total"] == 2


def test_a_pickled_client_still_authenticates(ticks, tmp_path):
    """Clients, and the Spark source's options, reach executors and TaskManagers pickled: the secret
    travels inside them (those hosts have none of the program's environment)."""
    with Driver(DriverConfig(ticks, hold=True, **FAST), secret=SECRET) as drv, \
            SinkServer(tmp_path / "out", secret=SECRET) as sink:
        feed = DriverClient(port=drv.port, secret=SECRET)
        assert feed.latest_offset() == 0            # connected before it was pickled
        shipped = pickle.loads(pickle.dumps(feed))
        assert shipped.latest_offset() == 0 and shipped.stats()["refused_connections"] == 0
        feed.close()
        shipped.close()
        out = pickle.loads(pickle.dumps(SinkClient(port=sink.port, secret=SECRET, epoch="1.0")))
        assert out.emit("S", 0, rows(2)) == 2
        out.close()
        opts = pickle.loads(pickle.dumps(SourceOptions.parse({"port": str(drv.port), "secret": SECRET})))
        assert SECRET not in repr(opts)
        with opts.client() as c:
            assert c.latest_offset() == 0
        assert sink.stats()["refused_connections"] == 0


def test_the_driver_process_takes_its_secret_from_the_environment_not_its_command_line(ticks, tmp_path,
                                                                                         monkeypatch):
    """DriverProcess hands the driver exactly its secret (a CEPKIT_SECRET of this process's own is
    not inherited), never as an argument; its clients present it; refusals go to the log file."""
    monkeypatch.setenv(SECRET_ENV, "not-the-drivers")
    secret, log = new_secret(), tmp_path / "harness.log"
    assert len(secret) == 32 and secret != new_secret()
    with DriverProcess(DriverConfig(ticks, hold=True, **FAST), secret=secret, log=log) as proc:
        assert secret not in " ".join(psutil.Process(proc.proc.pid).cmdline())
        with proc.client() as c:
            assert c.latest_offset() == 0
        with raw(proc.port) as s:
            assert answer(s, {"op": "stats"})["error"] == "unauthorized"
        with pytest.raises(UnauthorizedError):
            DriverClient(port=proc.port, secret="not-the-drivers").stats()
        with proc.client() as c:
            assert wait_for(lambda: c.stats()["refused_connections"] == 2)
        stats = proc.stop()
    assert stats["refused_connections"] == 2
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and all(" feed refused a connection from 127.0.0.1:" in ln for ln in lines)
    assert secret not in log.read_text() and "not-the-drivers" not in log.read_text()
    # Without a secret the driver serves anyone, whatever this process's environment holds.
    with DriverProcess(DriverConfig(ticks, hold=True, **FAST)) as proc:
        with DriverClient(port=proc.port) as c:
            assert c.latest_offset() == 0


def test_secrets_and_proofs_are_compared_whole(server):
    """Other secrets (prefixes, padding, case) make other proofs; a proof is compared whole
    (hmac.compare_digest over 64 hex digits), and one proof never serves twice: each connection's
    server nonce is new, so a proof seen on the wire is no use to whoever saw it."""
    for guess in (SECRET[:16], SECRET + "0", SECRET.upper(), " " + SECRET, ""):
        with raw(server.port) as s:
            assert authenticate(s, guess)["error"] == "unauthorized"
    with raw(server.port) as s:
        client_nonce = new_nonce()
        first = answer(s, hello_frame(client_nonce))
        good = answer_frame(SECRET, client_nonce, first["nonce"])
        assert answer(s, {"op": "auth", "proof": good["proof"].upper()})["error"] == "unauthorized"
    with raw(server.port) as s:                 # a replay of `good` on a new connection
        answer(s, hello_frame(client_nonce))
        assert answer(s, good)["message"].startswith("the feed refused the connection: wrong secret")
    assert wait_for(lambda: server.refused == 7)


def test_concurrent_clients_authenticate_independently(server):
    results = []

    def client(secret):
        with raw(server.port) as s:
            results.append(authenticate(s, secret).get("ok"))

    threads = [threading.Thread(target=client, args=(SECRET if i % 2 else WRONG,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 5 + [True] * 5
    assert wait_for(lambda: server.refused == 5) and len(server.lines) == 5


def test_the_run_summary_names_refused_connections_only_when_there_were_some(tmp_path):
    """`cepkit pairs` / `cepkit micro` print this line after a run whose feed or sink refused any."""
    from cepkit_app.pipelines.engine import refused_line
    from harness.run_spec import EngineRunResult

    def result(**refused) -> EngineRunResult:
        return EngineRunResult("completed", "", tmp_path / "engine", None, 1, 1, 1, {}, None, None, None, None, 1.0,
                               **({"refused_connections": refused} if refused else {}))

    assert result().refused_connections == {"feed": 0, "sink": 0}
    assert refused_line(result()) is None and refused_line(result(feed=0, sink=0)) is None
    assert refused_line(result(feed=2, sink=0)) == (f"refused connections without the run's secret: 2 by the feed "
                                                   f"(each in {tmp_path / 'engine' / 'logs' / 'harness.log'})")
    assert "3 by the feed, 1 by the sink" in refused_line(result(feed=3, sink=1))
