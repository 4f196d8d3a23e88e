"""A private PostgreSQL server for J3 (stream-to-table join against a database), and its table.

`PostgresServer(data_dir)` runs Debian's PostgreSQL binaries (`/usr/lib/postgresql/*/bin`):
`initdb` on a fresh private directory, then `pg_ctl start` listening on one address (127.0.0.1 by
default; the harness's address that a cluster's workers reach for J3 across hosts), on a free port,
with its socket in that directory. Connections over TCP authenticate with a password made for this
server alone (SCRAM-SHA-256, `password`; initdb reads it from a 0600 file that is removed at once),
from any address when the server listens beyond loopback; only the socket, in the private
directory, is trusted (the kit's own `createdb`). The password is in `dsn` and `jdbc_url`, which
the engine program gets in its environment and nothing records (harness/run_spec.py
`secret_env`); `public_dsn` is the same without it, for words.
PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user the Debian
package creates (the directory is handed to it). `load_table` copies a dataset's join table into
the relation `t` with a primary key on `id`. `stop()` (or leaving the `with` block) shuts the
server down; the server log stays in the run directory for a post-mortem.
"""

from __future__ import annotations

import contextlib
import glob
import io
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kit.datafiles import csv_header, first_line
from kit.errors import CepkitError
from kit.inputs import read_input_bytes

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


def _free_port(host: str) -> int:
    with socket.socket() as s:
        try:
            s.bind((host, 0))
        except OSError as e:
            raise CepkitError(f"postgres: cannot listen on {host}: {e.strerror or e}") from None
        return s.getsockname()[1]


class PostgresServer:
    """`log_dir` (must not exist) receives the server log. As root the cluster itself lives in a
    fresh private temporary directory owned by `postgres` (a run directory under a root-only
    parent such as pytest's is not reachable for that user) and is removed on stop."""

    def __init__(self, log_dir: Path, host: str = "127.0.0.1", advertised: str | None = None):
        self.log_dir = Path(log_dir)
        if self.log_dir.exists():
            raise CepkitError(f"{self.log_dir}: already exists; the database gets a fresh directory")
        self.bin = _bin_dir()
        self.listen = host
        self.port = _free_port(host)
        # Where clients connect: the advertised address (workers on other hosts), else the bound one.
        self.host = advertised or ("127.0.0.1" if host == "0.0.0.0" else host)
        self.password = secrets.token_urlsafe(24)
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
    def public_dsn(self) -> str:
        return f"host={self.host} port={self.port} user={DB_USER} dbname={DB_NAME}"

    @property
    def dsn(self) -> str:
        return f"{self.public_dsn} password={self.password}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{DB_NAME}?user={DB_USER}&password={self.password}"

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
            pwfile = self.dir / "pwfile"
            fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.password + "\n")
            if self._as is not None:
                os.chown(pwfile, self._as.pw_uid, self._as.pw_gid)
            try:
                self._run("initdb", "-D", str(self.dir / "data"), "-U", DB_USER, "--auth-local=trust",
                          "--auth-host=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync")
            finally:
                pwfile.unlink(missing_ok=True)
            if self.listen not in ("127.0.0.1", "localhost"):
                # Beyond loopback: any address, with the password (initdb's lines cover loopback only).
                with open(self.dir / "data" / "pg_hba.conf", "a") as f:
                    f.write("host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n")
            # Durability is not what J3 measures: a benchmark table is reloaded for every run.
            opts = (f"-c listen_addresses={self.listen} -p {self.port} -k {self.dir} -c fsync=off "
                    f"-c synchronous_commit=off -c full_page_writes=off -c password_encryption=scram-sha-256")
            self.started = True
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "server.log"), "-o", opts,
                      "-w", "-t", str(START_TIMEOUT_S), "start", timeout=START_TIMEOUT_S + 10)
            self._run("createdb", "-h", str(self.dir), "-p", str(self.port), "-U", DB_USER, DB_NAME)
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
        return load_table(self.dsn, table_path)


def read_database_dsn(setting: str) -> str:
    """The DSN of a user's own database (run.database_dsn): `env:NAME` reads the environment
    variable NAME, anything else is a file (mode 0600: it holds a password) whose first line is
    the DSN. One line naming the variable or the file when it cannot be had; never the DSN."""
    if setting.startswith("env:"):
        name = setting[4:]
        value = os.environ.get(name, "").strip()
        if not value:
            raise CepkitError(f"run.database_dsn: the environment variable {name} is not set or empty")
        return value
    path = Path(setting).expanduser()
    try:
        # kit.inputs: a regular file only (a FIFO would block, /dev/zero never end), read capped.
        raw = read_input_bytes(path, "secret", what="a DSN file", missing="No such file or directory")
        st = path.stat()
    except CepkitError as e:
        raise CepkitError(f"run.database_dsn: {e}") from None
    except OSError as e:
        raise CepkitError(f"run.database_dsn: {path}: {e.strerror or e}") from None
    if st.st_mode & 0o077:
        raise CepkitError(f"run.database_dsn: {path}: holds a password but is mode {st.st_mode & 0o777:04o}: "
                          "make it 0600 (chmod 600)")
    try:
        lines = raw.decode("utf-8").strip().splitlines()
    except UnicodeDecodeError:
        raise CepkitError(f"run.database_dsn: {path}: not UTF-8 text") from None
    if not lines or not lines[0].strip():
        raise CepkitError(f"run.database_dsn: {path}: empty (its first line is the database's DSN)")
    return lines[0].strip()


@contextlib.contextmanager
def own_database(dsn: str, where: str):
    """A user's own database for one run: a fresh schema `cepkit_<random>` (dropped at the end) that
    the yielded DSN searches first, so the kit's table `t` never meets the user's tables. `where`
    names the setting in errors (the DSN itself never appears in one)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"cepkit_{secrets.token_hex(6)}"
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except (psycopg.Error, psycopg.ProgrammingError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CepkitError(f"{where}: cannot connect to the database: {first.replace(dsn, '<dsn>')}") from None
    with conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            yield make_conninfo(dsn, options=f"-c search_path={schema}"), schema
        finally:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _table_batches(table_path: Path):
    """(column names, an iterator of its record batches) of a join table: Parquet, or a CSV
    dataset's T.csv read as the spec types it (ID int32, T1..TM float64; datagen-micro.md),
    block by block (J3's tables reach 100 M rows)."""
    if Path(table_path).suffix.lower() == ".csv":
        import pyarrow as pa

        names = csv_header(Path(table_path))
        types = {n: pa.int32() if n == "ID" else pa.float64() for n in names}
        try:
            reader = pacsv.open_csv(table_path, read_options=pacsv.ReadOptions(block_size=1 << 24),
                                    convert_options=pacsv.ConvertOptions(column_types=types))
        except (pa.ArrowException, OSError) as e:
            raise CepkitError(f"{table_path}: cannot read as CSV: {first_line(e)}") from None
        return names, iter(reader)
    pf = pq.ParquetFile(table_path)
    return pf.schema_arrow.names, pf.iter_batches(batch_size=COPY_ROWS)


def load_table(dsn: str, table_path: Path) -> int:
    """Copy the dataset's join table (Parquet or CSV: ID, T1..TM) into `t(id, t1..tm)` of the
    database `dsn` names (its search path's first schema); returns rows."""
    import psycopg

    columns, batches = _table_batches(table_path)
    if not columns or columns[0] != "ID":
        raise CepkitError(f"{table_path}: a join table must start with column ID, has {columns}")
    ddl = ", ".join(["id integer primary key"] + [f"{c.lower()} double precision" for c in columns[1:]])
    rows = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {TABLE} ({ddl})")
        # CSV blocks written by Arrow's C++ writer (shortest round-trip doubles): J3's tables
        # reach 100 M rows, far too many to hand to psycopg one Python row at a time.
        options = pacsv.WriteOptions(include_header=False, batch_size=COPY_ROWS)
        with conn.cursor() as cur, cur.copy(f"COPY {TABLE} ({', '.join(c.lower() for c in columns)}) "
                                            f"FROM STDIN (FORMAT csv)") as copy:
            for batch in batches:
                block = io.BytesIO()
                pacsv.write_csv(batch, block, write_options=options)
                copy.write(block.getvalue())
                rows += batch.num_rows
        conn.execute(f"ANALYZE {TABLE}")
    return rows

