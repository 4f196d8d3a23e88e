"""A Flink cluster as the program's master (flink_runtime/remote.py), without PyFlink: the master's
address, the cluster's slots asked of a stand-in JobManager's REST API (`/overview`), the
`parallelism.default` override and the settings that send the job and the runtime zip there."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from flink_runtime.remote import (MASTER_PREFIX, cluster_slots, is_remote, parallelism_setting, remote_master,
                                  remote_settings)
from kit.errors import CepkitError
from kit.faults import FLINK_MASTER_PREFIX


@pytest.fixture
def jobmanager():
    """A stand-in JobManager on 127.0.0.1 whose /overview and /jobmanager/config say what the test sets."""
    state = {"/overview": {"taskmanagers": 2, "slots-total": 4, "slots-available": 4},
             "/jobmanager/config": [{"key": "parallelism.default", "value": "1"}]}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(state[self.path]).encode() if self.path in state else b"{}"
            self.send_response(200 if self.path in state else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"flink://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def test_the_prefix_is_the_kits():
    assert MASTER_PREFIX == FLINK_MASTER_PREFIX


@pytest.mark.parametrize("master, address", [("flink://127.0.0.1:8081", ("127.0.0.1", 8081)),
                                             ("flink://jm-1.example:65535", ("jm-1.example", 65535))])
def test_a_master_is_its_jobmanagers_rest_address(master, address):
    assert is_remote(master) and remote_master(master) == address


@pytest.mark.parametrize("master", ["flink://h", "flink://:8081", "flink://h:0", "flink://h:70000", "flink://h:x",
                                    "flink://h/p:1", "local[2]", "spark://h:7077"])
def test_a_bad_master_is_one_line(master):
    with pytest.raises(CepkitError) as e:
        remote_master(master)
    assert str(e.value).startswith("--master: a Flink cluster is flink://HOST:PORT") and "\n" not in str(e.value)


def test_the_parallelism_is_every_slot_of_the_cluster(jobmanager):
    master, state = jobmanager
    assert cluster_slots(master) == 4                    # the slots offered (a foreign cluster's default: 1)
    # A cepkit cluster's configured parallelism is all its slots: one TaskManager being brought back
    # by its keeper is waited for, not run without.
    state["/overview"] = {"taskmanagers": 1, "slots-total": 2}
    state["/jobmanager/config"] = [{"key": "rest.port", "value": "1"}, {"key": "parallelism.default", "value": "4"}]
    assert cluster_slots(master) == 4
    state["/overview"] = {"taskmanagers": 0, "slots-total": 0}
    state["/jobmanager/config"] = {"unexpected": "shape"}
    with pytest.raises(CepkitError, match=r"the Flink cluster has no task slots \(slots-total 0\)"):
        cluster_slots(master)


def test_no_jobmanager_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]              # closed again: nothing listens there
    with pytest.raises(CepkitError) as e:
        cluster_slots(f"flink://127.0.0.1:{port}")
    assert str(e.value).startswith(f"--master flink://127.0.0.1:{port}: no Flink JobManager answers there")
    assert "\n" not in str(e.value)


def test_the_parallelism_setting_overrides_and_is_checked():
    assert parallelism_setting({}) is None and parallelism_setting({"parallelism.default": " 3"}) == 3
    for bad in ("0", "two", "-1", "1.5"):
        with pytest.raises(CepkitError, match="--conf parallelism.default: must be a whole number >= 1"):
            parallelism_setting({"parallelism.default": bad})


def test_the_settings_send_the_job_and_the_runtime_to_the_cluster(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert remote_settings("flink://127.0.0.1:8081", "runtime.zip") == {
        "execution.target": "remote", "rest.address": "127.0.0.1", "rest.port": "8081",
        "python.files": str(tmp_path / "runtime.zip")}
    assert "python.files" not in remote_settings("flink://127.0.0.1:8081", None)
