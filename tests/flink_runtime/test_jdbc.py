"""J3's JDBC connection for the Flink JVM lookup (flink_runtime/jdbc.py): the run's libpq connection
string becomes a JDBC URL and the driver's properties (a user's own database keeps its schema in
`options`); what the driver cannot carry is refused in one line that never holds the DSN."""

from __future__ import annotations

import pytest

from flink_runtime.jdbc import jdbc_driver_jar, jdbc_target
from kit.errors import CepkitError

SECRET = "s3cr3t-pw"


def test_a_private_server_s_dsn_becomes_a_jdbc_url_and_properties():
    url, props = jdbc_target(f"host=127.0.0.1 port=41234 user=cepkit dbname=cepkit password={SECRET}")
    assert url == "jdbc:postgresql://127.0.0.1:41234/cepkit"
    assert props == {"user": "cepkit", "password": SECRET}
    assert SECRET not in url


def test_an_own_database_keeps_its_schema_and_ssl_settings():
    url, props = jdbc_target("postgresql://me:pw@db.example:6543/bench?sslmode=require&connect_timeout=10"
                             "&options=-c%20search_path%3Dcepkit_abc")
    assert url == "jdbc:postgresql://db.example:6543/bench"
    assert props == {"user": "me", "password": "pw", "sslmode": "require", "connectTimeout": "10",
                     "options": "-c search_path=cepkit_abc"}
    # No dbname: libpq's default, the user's name.
    assert jdbc_target("host=h user=alice")[0] == "jdbc:postgresql://h:5432/alice"


@pytest.mark.parametrize("dsn, says", [
    (f"host=/var/run/postgresql user=u password={SECRET}", "over TCP to one host"),
    (f"host=a,b user=u password={SECRET}", "over TCP to one host"),
    (f"host=h user=u password={SECRET} target_session_attrs=read-write", "'target_session_attrs'"),
    (f"host=h user=u password={SECRET} 'unclosed", "not a PostgreSQL connection string"),
])
def test_what_the_driver_cannot_carry_is_refused_without_the_dsn(dsn, says):
    with pytest.raises(CepkitError, match=says) as e:
        jdbc_target(dsn)
    assert SECRET not in str(e.value) and "\n" not in str(e.value)


def test_debian_s_driver_jar_is_found_or_named():
    try:
        path = jdbc_driver_jar()
    except CepkitError as e:
        assert "libpostgresql-jdbc-java" in str(e)
    else:
        assert path.startswith("/usr/share/java/postgresql") and path.endswith(".jar")
