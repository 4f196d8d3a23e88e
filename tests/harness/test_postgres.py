"""The private PostgreSQL server of J3: started on 127.0.0.1 only, the join table loaded with a
primary key, stopped with nothing left running, its log kept in the run directory."""

from __future__ import annotations

import contextlib

import numpy as np
import psutil
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.postgres import PostgresServer
from kit.errors import CepkitError

pytestmark = pytest.mark.postgres


def _server_pids(directory) -> set[int]:
    """The running processes of the server whose files are in `directory`: its postmaster (which
    names its data directory on its command line) and the processes it forked. Other PostgreSQL
    servers on the machine (another test's, run beside this one) are not this test's to judge. An
    exited process can linger as a zombie until its parent reaps it."""
    found = set()
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] == psutil.STATUS_ZOMBIE or str(directory) not in " ".join(p.info["cmdline"] or []):
            continue
        found.add(p.pid)
        with contextlib.suppress(psutil.NoSuchProcess):
            found |= {c.pid for c in p.children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE}
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_table_loaded_queried_and_server_gone_after_stop(tmp_path):
    ids = np.arange(1, 501, dtype=np.int32)
    t1 = np.random.default_rng(1).uniform(1, 100, 500)
    pq.write_table(pa.table({"ID": ids, "T1": t1, "T2": t1 * 2}), tmp_path / "T.parquet")
    with PostgresServer(tmp_path / "pg") as pg:
        server_dir = pg.dir
        assert "host=127.0.0.1" in pg.dsn
        assert pg.load_table(tmp_path / "T.parquet") == 500
        with psycopg.connect(pg.dsn) as conn:
            rows = conn.execute("SELECT id, t1, t2 FROM t WHERE id = ANY(%s) ORDER BY id", ([3, 7, 999],)).fetchall()
            pk = conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 't'").fetchone()[0]
            listen = conn.execute("SHOW listen_addresses").fetchone()[0]
            every = conn.execute("SELECT id, t1, t2 FROM t ORDER BY id").fetchall()
        assert [r[0] for r in rows] == [3, 7] and rows[0][1] == t1[2] and rows[1][2] == 2 * t1[6]
        # Loaded as CSV text: every double must come back bit for bit.
        assert [r[0] for r in every] == ids.tolist()
        assert [r[1] for r in every] == t1.tolist() and [r[2] for r in every] == (t1 * 2).tolist()
        assert pk == 1 and listen == "127.0.0.1"
        running = _server_pids(server_dir)
        assert len(running) >= 2         # the postmaster and its background processes
    assert not _server_pids(server_dir) and not [pid for pid in running if _alive(pid)]
    assert "database system is ready" in (tmp_path / "pg" / "server.log").read_text()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(pg.dsn, connect_timeout=2)


def test_refuses_an_existing_directory_and_a_bad_table(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(CepkitError, match="already exists"):
        PostgresServer(tmp_path / "taken")
    pq.write_table(pa.table({"K": [1, 2]}), tmp_path / "bad.parquet")
    with PostgresServer(tmp_path / "pg") as pg, pytest.raises(CepkitError, match="must start with column ID"):
        pg.load_table(tmp_path / "bad.parquet")
