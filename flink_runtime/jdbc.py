"""J3's connection from the JVM: the PostgreSQL JDBC driver's jar and the JDBC URL and properties of
the run's libpq connection string (CEPKIT_PG_DSN), for the JDBC lookup in Flink's async I/O
operator (java/cepkit/flink/MicroLookup.java; flink_runtime/micro.py builds it)."""

from __future__ import annotations

import glob
import os

from kit.errors import CepkitError

# libpq connection keywords and the PostgreSQL JDBC driver's names for them.
JDBC_PROPERTIES = {"user": "user", "password": "password", "options": "options", "sslmode": "sslmode",
                   "sslcert": "sslcert", "sslkey": "sslkey", "sslrootcert": "sslrootcert",
                   "connect_timeout": "connectTimeout", "application_name": "ApplicationName"}


def jdbc_target(dsn: str) -> tuple[str, dict[str, str]]:
    """The JDBC URL and connection properties of a libpq DSN (CEPKIT_PG_DSN: the harness's private
    server's, or run.database_dsn's with its schema in `options`); a one-line error naming the
    keyword it cannot carry, never the DSN (it holds a password)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    except Exception:  # noqa: BLE001 - psycopg's message may quote the DSN
        raise CepkitError("CEPKIT_PG_DSN: not a PostgreSQL connection string") from None
    host, port, dbname = given.pop("host", "localhost"), given.pop("port", "5432"), given.pop("dbname", "")
    if "," in host or host.startswith("/") or "," in port:
        raise CepkitError("CEPKIT_PG_DSN: J3's JVM lookup connects over TCP to one host (its host is a socket "
                          "directory or a list)")
    props = {}
    for key, value in given.items():
        if key not in JDBC_PROPERTIES:
            raise CepkitError(f"CEPKIT_PG_DSN: J3's JVM lookup cannot pass the connection keyword {key!r} to the "
                              "JDBC driver")
        props[JDBC_PROPERTIES[key]] = value
    return f"jdbc:postgresql://{host}:{port}/{dbname or given.get('user', '')}", props


def jdbc_driver_jar() -> str:
    """Debian's PostgreSQL JDBC driver (package libpostgresql-jdbc-java), the jar J3's JVM lookup
    loads; a one-line error saying how to install it."""
    for candidate in ("/usr/share/java/postgresql.jar", *sorted(glob.glob("/usr/share/java/postgresql-*.jar"))):
        if os.path.isfile(candidate):
            return candidate
    raise CepkitError("J3's JVM lookup needs the PostgreSQL JDBC driver: apt-get install libpostgresql-jdbc-java "
                      "(or run.work = \"python\" for the Python lookup)")
