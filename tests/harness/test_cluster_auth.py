"""A cluster beyond loopback requires authentication (issue 45 item 1, harness/cluster_auth.py): the
credentials' files and modes, how a run reaches them, and a bad credentials setting in one line.
The engines' side (a stranger refused, nothing on the wire) is in tests/multihost."""

from __future__ import annotations

import os
import re
import ssl
import stat

import pytest

from harness.cluster_auth import (check_credentials, is_loopback, make_flink_credentials, make_spark_credentials,
                                  read_flink_ssl)
from harness.config import DriverConfig
from harness.launch import by_hand_script, program_env
from harness.run_spec import EngineRunSpec
from kit.config import load_config
from kit.errors import CepkitError
from kit.tls import CREDENTIALS_ENV, client_context, rest_base


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True),
                                        ("::1", True), ("10.213.0.2", False), ("192.0.2.2", False),
                                        ("node-1.example", False)])
def test_only_loopback_is_left_without_authentication(host, loop):
    assert is_loopback(host) is loop


def test_spark_credentials_are_a_private_defaults_file_with_a_fresh_secret(tmp_path):
    first = make_spark_credentials(tmp_path)
    conf = first / "spark-defaults.conf"
    assert _mode(first) == 0o700 and _mode(conf) == 0o600
    text = conf.read_text()
    for line in ("spark.authenticate true", "spark.network.crypto.enabled true", "spark.io.encryption.enabled true"):
        assert line in text.splitlines()
    (secret,) = re.findall(r"^spark\.authenticate\.secret ([0-9a-f]{64})$", text, re.M)
    again = make_spark_credentials(tmp_path)          # a cluster started again gets a new secret
    assert again == first and secret not in conf.read_text()
    assert check_credentials(first, "spark") == first


def test_flink_credentials_hold_a_keystore_made_by_keytool_and_the_clients_pems(tmp_path):
    creds = make_flink_credentials(tmp_path, ["10.213.0.2", "node-1.example"])
    for name in ("flink.p12", "flink-ssl.yaml", "client.pem", "ca.pem"):
        assert _mode(creds / name) == 0o600, name
    ssl_settings = read_flink_ssl(creds)
    passwords = {v for k, v in ssl_settings.items() if k.endswith("-password")}
    assert len(passwords) == 1 and len(passwords.pop()) >= 24
    for key in ("security.ssl.internal.enabled", "security.ssl.rest.enabled", "security.ssl.rest.authentication-enabled"):
        assert ssl_settings[key] == "true"
    assert ssl_settings["security.ssl.rest.truststore"] == str(creds / "flink.p12")
    cert = ssl._ssl._test_decode_cert(str(creds / "ca.pem"))
    assert ("IP Address", "10.213.0.2") in cert["subjectAltName"] and ("DNS", "node-1.example") in cert["subjectAltName"]
    assert "PRIVATE KEY" in (creds / "client.pem").read_text() and "PRIVATE KEY" not in (creds / "ca.pem").read_text()
    client_context(str(creds))                     # the kit's REST client loads them
    assert rest_base("h", 1, str(creds)) == "https://h:1" and check_credentials(creds, "flink") == creds


@pytest.mark.parametrize("engine, damage, message", [
    ("spark", "missing", r"spark-defaults.conf: No such file"),
    ("spark", "open", r"spark-defaults.conf: holds a secret but is mode 0644: make it 0600"),
    ("spark", "empty", r"spark-defaults.conf: sets no spark.authenticate.secret"),
    ("flink", "missing", r"flink-ssl.yaml: No such file"),
])
def test_bad_credentials_are_one_line_naming_the_file(tmp_path, engine, damage, message):
    creds = make_spark_credentials(tmp_path) if engine == "spark" else tmp_path / "nothing"
    conf = creds / "spark-defaults.conf"
    if damage == "missing" and engine == "spark":
        conf.unlink()
    elif damage == "open":
        os.chmod(conf, 0o644)
    elif damage == "empty":
        conf.write_text("spark.authenticate true\n")
    with pytest.raises(CepkitError, match=r"^run\.cluster_credentials: .*" + message) as e:
        check_credentials(creds, engine)
    assert "\n" not in str(e.value)


def _spec(tmp_path, engine, creds) -> EngineRunSpec:
    return EngineRunSpec(program=tmp_path / "p.py", run_dir=tmp_path / "run", driver=DriverConfig(tmp_path), engine=engine,
                         master="spark://10.0.0.1:7077" if engine == "spark" else "flink://10.0.0.1:8081",
                         cluster_credentials=str(creds))


def test_a_run_gives_the_program_the_credentials_path_never_their_content(tmp_path):
    creds = make_spark_credentials(tmp_path)
    secret = re.search(r"secret (\S+)", (creds / "spark-defaults.conf").read_text())[1]
    spec = _spec(tmp_path, "spark", creds)
    env = program_env(spec)
    assert env["SPARK_CONF_DIR"] == str(creds) and CREDENTIALS_ENV not in env
    script = by_hand_script([], env, ["spark-submit", "--master", spec.master], tmp_path / "secret")
    assert f"export SPARK_CONF_DIR={creds}" in script and secret not in script
    assert spec.to_dict()["cluster_credentials"] == str(creds) and secret not in repr(spec.to_dict())
    (tmp_path / "f").mkdir()
    fl = make_flink_credentials(tmp_path / "f", ["10.0.0.1"])
    env = program_env(_spec(tmp_path, "flink", fl))
    assert env[CREDENTIALS_ENV] == str(fl) and "SPARK_CONF_DIR" not in env


def test_the_run_setting_is_checked_when_the_run_is_made(tmp_path):
    with pytest.raises(CepkitError, match=r"^run\.cluster_credentials: .*/absent/spark-defaults.conf: No such file"):
        _spec(tmp_path, "spark", tmp_path / "absent")
    assert load_config(None, [f"run.cluster_credentials={tmp_path}"]).run.cluster_credentials == str(tmp_path)
    assert load_config(None, []).run.cluster_credentials == ""


# ---- J3's database (issue 45 item 3): the user's own, its DSN never in the setting or a message ----

from harness.postgres import read_database_dsn  # noqa: E402


@pytest.mark.parametrize("value, message", [
    ("host=db password=x", "names where the DSN is"),
    ("postgresql://u:p@db/x", "names where the DSN is"),
    ("env:1BAD", "env:NAME needs an environment variable's name"),
])
def test_database_dsn_names_where_the_dsn_is_never_the_dsn(value, message):
    with pytest.raises(CepkitError, match=r"run\.database_dsn.*" + message) as e:
        load_config(None, [f"run.database_dsn={value!r}".replace("'", '"')])
    assert "password=x" not in str(e.value) and ":p@" not in str(e.value)


def test_database_dsn_is_read_from_the_environment_or_a_private_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_DSN", "host=db user=u password=s3cret")
    assert read_database_dsn("env:MY_DSN") == "host=db user=u password=s3cret"
    monkeypatch.delenv("MY_DSN")
    with pytest.raises(CepkitError, match=r"^run\.database_dsn: the environment variable MY_DSN is not set"):
        read_database_dsn("env:MY_DSN")
    f = tmp_path / "dsn"
    f.write_text("host=db user=u password=s3cret\n")
    os.chmod(f, 0o644)
    with pytest.raises(CepkitError, match=rf"^run\.database_dsn: {f}: holds a password but is mode 0644") as e:
        read_database_dsn(str(f))
    assert "s3cret" not in str(e.value)
    os.chmod(f, 0o600)
    assert read_database_dsn(str(f)) == "host=db user=u password=s3cret"
    with pytest.raises(CepkitError, match=rf"^run\.database_dsn: {tmp_path / 'absent'}: No such file"):
        read_database_dsn(str(tmp_path / "absent"))
    f.write_text("\n")
    with pytest.raises(CepkitError, match=r": empty"):
        read_database_dsn(str(f))


def test_a_secret_environment_is_recorded_by_name_only(tmp_path):
    spec = EngineRunSpec(program=tmp_path / "p.py", run_dir=tmp_path / "run", driver=DriverConfig(tmp_path),
                         env=(("A", "1"),), secret_env=(("CEPKIT_PG_DSN", "host=h password=s3cret"),))
    doc = spec.to_dict()
    assert doc["secret_env"] == ["CEPKIT_PG_DSN"] and doc["env"] == {"A": "1"} and "s3cret" not in repr(doc)
    assert "CEPKIT_PG_DSN" not in program_env(spec)      # nor in the by-hand scripts, made of it


# ---- the kit's own clusters (cepkit cluster start --host): real daemons, beyond loopback ----

def _address_beyond_loopback() -> str | None:
    import psutil

    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family.name == "AF_INET" and not a.address.startswith("127."):
                return a.address
    return None


@pytest.mark.parametrize("engine", [pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.cluster]),
                                    pytest.param("flink", marks=[pytest.mark.cluster])])
def test_a_cluster_started_beyond_loopback_requires_its_credentials(engine, tmp_path):
    """`cepkit cluster start --host ADDR`: credentials made at start (0700/0600), every daemon with
    them and none with the secret on its command line; Flink's REST API answers the kit's client
    certificate only (`cluster status` uses it; a client without one gets no TLS session)."""
    import urllib.request

    import psutil

    from harness.cluster import cluster_status, start_cluster, stop_cluster
    from harness.cluster_spec import ClusterSpec

    address = _address_beyond_loopback()
    if address is None:
        pytest.skip("this machine has no IPv4 address beyond loopback")
    directory = tmp_path / "c"
    info = start_cluster(ClusterSpec(directory, host=address, workers=1, engine=engine,
                                     memory_per_worker="1g" if engine == "spark" else "1536m"))
    try:
        creds = directory / "credentials"
        assert _mode(creds) == 0o700 and all(_mode(f) == 0o600 for f in creds.iterdir())
        check_credentials(creds, engine)
        if engine == "spark":
            secret = re.search(r"secret (\S+)", (creds / "spark-defaults.conf").read_text())[1]
        else:
            secret = next(v for k, v in read_flink_ssl(creds).items() if k.endswith("-password"))
            assert _mode(directory / "conf" / "config.yaml") == 0o600
            assert info.webui_url.startswith("https://")
            ctx = ssl.create_default_context(cafile=str(creds / "ca.pem"))      # trusts it, presents nothing
            with pytest.raises(OSError):
                urllib.request.urlopen(info.webui_url + "/overview", timeout=5, context=ctx)
        status = cluster_status(directory)
        assert status["state"] == "running", status
        daemons = [psutil.Process(pid) for pid in info.pids]
        every = daemons + [c for d in daemons for c in d.children(recursive=True)]
        lines = []
        for p in every:
            try:
                lines.append(" ".join(p.cmdline()))
            except psutil.Error:
                continue            # gone, or a zombie (spark-class's exited launcher)
        assert len(lines) >= 2 and not [line for line in lines if secret in line]
        for log in directory.rglob("*.log"):
            assert secret not in log.read_text(errors="replace"), log
    finally:
        stop_cluster(directory)
