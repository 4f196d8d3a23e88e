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


def test_a_csv_datasets_table_loads_as_its_parquet_twin_does(tmp_path):
    # A CSV dataset (micro.format = "csv") has T.csv: read with the spec's types (ID int32, T1..TM
    # float64), never inferred, every double back bit for bit.
    import pyarrow.csv as pacsv

    ids = np.arange(1, 301, dtype=np.int32)
    t1 = np.random.default_rng(2).uniform(1, 100, 300)
    t2 = np.full(300, 3.0)                        # integral doubles: a CSV reader would infer int64
    table = pa.table({"ID": ids, "T1": t1, "T2": t2})
    pacsv.write_csv(table, tmp_path / "T.csv")
    with PostgresServer(tmp_path / "pg") as pg:
        assert pg.load_table(tmp_path / "T.csv") == 300
        with psycopg.connect(pg.dsn) as conn:
            every = conn.execute("SELECT id, t1, t2 FROM t ORDER BY id").fetchall()
            kinds = conn.execute("SELECT data_type FROM information_schema.columns WHERE table_name = 't' "
                                 "ORDER BY ordinal_position").fetchall()
    assert [r[0] for r in every] == ids.tolist() and [r[1] for r in every] == t1.tolist()
    assert [r[2] for r in every] == t2.tolist()
    assert [k[0] for k in kinds] == ["integer", "double precision", "double precision"]


def test_refuses_an_existing_directory_and_a_bad_table(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(CepkitError, match="already exists"):
        PostgresServer(tmp_path / "taken")
    pq.write_table(pa.table({"K": [1, 2]}), tmp_path / "bad.parquet")
    with PostgresServer(tmp_path / "pg") as pg, pytest.raises(CepkitError, match="must start with column ID"):
        pg.load_table(tmp_path / "bad.parquet")


def _an_address_beyond_loopback() -> str | None:
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family.name == "AF_INET" and not a.address.startswith("127."):
                return a.address
    return None


def test_beyond_loopback_every_tcp_connection_needs_the_runs_password(tmp_path):
    """J3 across hosts (issue 45 item 3): the server listens where the workers reach it and asks
    every TCP connection, loopback's too, for this server's own password (SCRAM-SHA-256)."""
    address = _an_address_beyond_loopback()
    if address is None:
        pytest.skip("this machine has no IPv4 address beyond loopback")
    pq.write_table(pa.table({"ID": np.arange(1, 4, dtype=np.int32), "T1": [1.0, 2.0, 3.0]}), tmp_path / "T.parquet")
    with PostgresServer(tmp_path / "pg", host=address) as pg:
        assert pg.load_table(tmp_path / "T.parquet") == 3
        assert f"host={address}" in pg.dsn and pg.password in pg.dsn and pg.password not in pg.public_dsn
        assert f"password={pg.password}" in pg.jdbc_url and len(pg.password) >= 24
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 3
            assert conn.execute("SHOW listen_addresses").fetchone()[0] == address
            method = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = 'cepkit'").fetchone()[0]
            assert method.startswith("SCRAM-SHA-256$")
        for wrong in (pg.public_dsn, pg.public_dsn + " password=guess"):
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(wrong, connect_timeout=5)
        # The password file initdb read is gone; the server's files hold no copy of it.
        assert not list(pg.dir.rglob("pwfile"))
        assert pg.password not in (pg.dir / "server.log").read_text(errors="replace")
    other = PostgresServer(tmp_path / "pg2")
    assert other.password != pg.password          # one per server, i.e. per run


def test_a_users_own_database_gets_a_schema_of_the_run_and_keeps_its_own_tables(tmp_path):
    """run.database_dsn (issue 45 item 3): the user's database, its DSN from a 0600 file; the table
    goes into a fresh schema the yielded DSN searches first, dropped at the end; the user's own `t`
    is never touched; a DSN that cannot connect is one line without the DSN."""
    from harness.postgres import load_table, own_database, read_database_dsn

    pq.write_table(pa.table({"ID": np.arange(1, 4, dtype=np.int32), "T1": [1.0, 2.0, 3.0]}), tmp_path / "T.parquet")
    with PostgresServer(tmp_path / "pg") as pg:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (mine text)")
            conn.execute("INSERT INTO t VALUES ('the user''s')")
        dsn_file = tmp_path / "dsn"
        dsn_file.touch(mode=0o600)
        dsn_file.write_text(pg.dsn + "\n")
        with own_database(read_database_dsn(str(dsn_file)), "run.database_dsn") as (dsn, schema):
            assert load_table(dsn, tmp_path / "T.parquet") == 3
            with psycopg.connect(dsn) as conn:     # what the program gets: the run's schema first
                assert conn.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,), (3,)]
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("SELECT mine FROM t").fetchall() == [("the user's",)]
            assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()[0] == 0
        wrong = pg.public_dsn + " password=not-it"
        with pytest.raises(CepkitError, match=r"^run\.database_dsn: cannot connect to the database: .*password") as e:
            with own_database(wrong, "run.database_dsn"):
                pass
        assert "not-it" not in str(e.value) and "\n" not in str(e.value)
