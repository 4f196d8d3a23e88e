"""A private PostgreSQL server for J3 (stream-to-table join against a database), and its table.

`PostgresServer(data_dir)` runs Debian's PostgreSQL binaries (`/usr/lib/postgresql/*/bin`):
`initdb` on a fresh private directory, then `pg_ctl start` listening on 127.0.0.1 only, on a free
port, with its socket in that directory and trust authentication (nothing else can reach it).
PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user the Debian
package creates (the directory is handed to it). `load_table` copies a dataset's join table into
the relation `t` with a primary key on `id`. `stop()` (or leaving the `with` block) shuts the
server down; the server log stays in the run directory for a post-mortem.
"""

from __future__ import annotations

import glob
import io
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kit.errors import CepkitError

DB_USER = "cepkit"
DB_NAME = "cepkit"
TABLE = "t"
START_TIMEOUT_S = 60
COPY_ROWS = 100_000


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        return Path(pg_ctl).parent
    raise CepkitError("PostgreSQL server binaries not found (install Debian's postgresql package: "
                      "apt-get install postgresql)")


def jdbc_driver_jar() -> Path:
    """Debian's PostgreSQL JDBC driver (package libpostgresql-jdbc-java), for J3's JDBC plan."""
    for candidate in ("/usr/share/java/postgresql.jar", *sorted(glob.glob("/usr/share/java/postgresql-*.jar"))):
        if Path(candidate).is_file():
            return Path(candidate)
    raise CepkitError("the PostgreSQL JDBC driver is not installed (run.database_join = \"jdbc\" needs "
                      "Debian's libpostgresql-jdbc-java: apt-get install libpostgresql-jdbc-java)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """`log_dir` (must not exist) receives the server log. As root the cluster itself lives in a
    fresh private temporary directory owned by `postgres` (a run directory under a root-only
    parent such as pytest's is not reachable for that user) and is removed on stop."""

    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        if self.log_dir.exists():
            raise CepkitError(f"{self.log_dir}: already exists; the database gets a fresh directory")
        self.bin = _bin_dir()
        self.port = _free_port()
        self.host = "127.0.0.1"
        self._as = None
        if os.geteuid() == 0:
            try:
                self._as = pwd.getpwnam("postgres")
            except KeyError:
                raise CepkitError("PostgreSQL refuses to run as root and there is no 'postgres' user "
                                  "(install Debian's postgresql package)") from None
        self.dir = self.log_dir
        self.started = False

    @property
    def dsn(self) -> str:
        return f"host={self.host} port={self.port} user={DB_USER} dbname={DB_NAME}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{DB_NAME}?user={DB_USER}"

    def _run(self, *args: str, timeout: float = 120) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self._as is not None:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise CepkitError(f"postgres: {args[0]} failed: {lines[-1] if lines else f'exit {proc.returncode}'}")

    def start(self) -> "PostgresServer":
        self.log_dir.mkdir(parents=True)
        if self._as is not None:
            self.dir = Path(tempfile.mkdtemp(prefix="cepkit-pg-"))
            os.chown(self.dir, self._as.pw_uid, self._as.pw_gid)
        try:
            self._run("initdb", "-D", str(self.dir / "data"), "-U", DB_USER, "--auth=trust", "-E", "UTF8",
                      "--no-sync")
            # Durability is not what J3 measures: a benchmark table is reloaded for every run.
            opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
                    f"-c synchronous_commit=off -c full_page_writes=off")
            self.started = True
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "server.log"), "-o", opts,
                      "-w", "-t", str(START_TIMEOUT_S), "start", timeout=START_TIMEOUT_S + 10)
            self._run("createdb", "-h", self.host, "-p", str(self.port), "-U", DB_USER, DB_NAME)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            if self.started and (self.dir / "data" / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")
            self.started = False
        finally:
            if self.dir != self.log_dir:
                if (self.dir / "server.log").exists():
                    shutil.copyfile(self.dir / "server.log", self.log_dir / "server.log")
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = self.log_dir

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def load_table(self, table_path: Path) -> int:
        """Copy the dataset's join table (Parquet: ID, T1..TM) into `t(id, t1..tm)`; returns rows."""
        import psycopg

        pf = pq.ParquetFile(table_path)
        columns = pf.schema_arrow.names
        if not columns or columns[0] != "ID":
            raise CepkitError(f"{table_path}: a join table must start with column ID, has {columns}")
        ddl = ", ".join(["id integer primary key"] + [f"{c.lower()} double precision" for c in columns[1:]])
        rows = 0
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {TABLE} ({ddl})")
            # CSV blocks written by Arrow's C++ writer (shortest round-trip doubles): J3's tables
            # reach 100 M rows, far too many to hand to psycopg one Python row at a time.
            options = pacsv.WriteOptions(include_header=False, batch_size=COPY_ROWS)
            with conn.cursor() as cur, cur.copy(f"COPY {TABLE} ({', '.join(c.lower() for c in columns)}) "
                                                f"FROM STDIN (FORMAT csv)") as copy:
                for batch in pf.iter_batches(batch_size=COPY_ROWS):
                    block = io.BytesIO()
                    pacsv.write_csv(batch, block, write_options=options)
                    copy.write(block.getvalue())
                    rows += batch.num_rows
            conn.execute(f"ANALYZE {TABLE}")
        return rows

