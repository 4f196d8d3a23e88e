"""The credentials of a cluster that listens beyond loopback (issue 45, specs/ENGINE_RUN.md,
"Authentication"): whoever reaches a Spark master's port can otherwise run a program on every
worker.

A Spark cluster started on an address that is not loopback (`cepkit cluster start --host ...`,
scripts/netns-cluster.sh) gets a directory of client credentials, `<cluster dir>/credentials/`
(mode 0700), holding `spark-defaults.conf` (mode 0600, created so): `spark.authenticate`, a secret
of 256 random bits (`spark.authenticate.secret`), encrypted RPC (`spark.network.crypto.enabled`,
AES) and encrypted scratch files (`spark.io.encryption.enabled`). The master, the workers and every
program's driver read it as their `SPARK_CONF_DIR`'s defaults file: Spark 4.3's standalone mode
takes the secret from its configuration only (`spark.authenticate.secret.file` is refused outside
Kubernetes: "Secret keys provided via files is only allowed in Kubernetes mode"), and a file read
as the defaults keeps it off every command line (PySpark hands a SparkConf's settings to
spark-submit as `--conf` arguments). The workers give it to their executors in the environment
(`_SPARK_AUTH_SECRET`), Spark's own way. Spark redacts it (`spark.redaction.regex`) wherever it
shows settings. A run uses the directory through `run.cluster_credentials`.

A Flink cluster beyond loopback gets the same directory with a key pair and a self-signed
certificate made by `keytool` (`flink.p12`, PKCS12, a fresh password of its own, its subject
alternative names every address of the cluster's hosts), and `flink-ssl.yaml` (0600): internal SSL
(`security.ssl.internal.*`: the RPC, the data exchange and the blob server between the JobManager
and the TaskManagers, always mutually authenticated) and REST SSL with mutual authentication
(`security.ssl.rest.enabled`, `security.ssl.rest.authentication-enabled`), both with this one
certificate as the only one trusted. Every daemon's config.yaml (mode 0600) has these lines; the
program adds them to its client's configuration (read from the file, never passed on a command
line); the kit's Python REST clients (flink_runtime/rest.py, the harness, the netns script's
waits) present `client.pem` (the key and the certificate, 0600) and trust `ca.pem`
(kit/tls.py).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

from kit.errors import CepkitError
from kit.inputs import read_input_bytes

CREDENTIALS_DIR = "credentials"
SPARK_DEFAULTS = "spark-defaults.conf"
FLINK_KEYSTORE, FLINK_SSL, CLIENT_PEM, CA_PEM = "flink.p12", "flink-ssl.yaml", "client.pem", "ca.pem"
CERT_DAYS = 30
# What every process of an authenticated Spark cluster sets (the secret is added per cluster).
SPARK_AUTH_SETTINGS = (("spark.authenticate", "true"), ("spark.network.crypto.enabled", "true"),
                       ("spark.io.encryption.enabled", "true"))


def is_loopback(host: str) -> bool:
    """True for an address (or `localhost`) that only this machine reaches."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False                # a host name: other machines may resolve it


def write_private(path: Path, text: str) -> Path:
    """`text` in a new file created mode 0600 (never wider, not even for a moment)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def spark_defaults_text(secret: str) -> str:
    lines = ["# A cepkit cluster's authentication (harness/cluster_auth.py). Keep this file private: it holds",
             "# the cluster's secret; every host and every program's driver needs it as SPARK_CONF_DIR's defaults."]
    lines += [f"{k} {v}" for k, v in (*SPARK_AUTH_SETTINGS, ("spark.authenticate.secret", secret))]
    return "\n".join(lines) + "\n"


def _fresh_dir(cluster_dir: Path) -> Path:
    directory = cluster_dir / CREDENTIALS_DIR
    if directory.exists():
        for child in directory.iterdir():
            child.unlink()
        directory.rmdir()
    directory.mkdir(mode=0o700)
    os.chmod(directory, 0o700)
    return directory


def make_spark_credentials(cluster_dir: Path) -> Path:
    """A new `credentials/` directory in `cluster_dir` with a fresh secret; its path."""
    directory = _fresh_dir(cluster_dir)
    write_private(directory / SPARK_DEFAULTS, spark_defaults_text(secrets.token_hex(32)))
    return directory


def _run(cmd: list[str], what: str, env: dict | None = None) -> bytes:
    try:
        done = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    except OSError as e:
        raise CepkitError(f"cluster credentials: cannot run {cmd[0]} ({what}): {e.strerror or e}") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise CepkitError(f"cluster credentials: {what} failed: {tail[0]}")
    return done.stdout


def flink_ssl_settings(directory: Path, password: str) -> dict[str, str]:
    """The Flink settings of internal and REST SSL with mutual authentication (one keystore, one
    trusted certificate: itself)."""
    store = str(directory / FLINK_KEYSTORE)
    out = {}
    for part in ("internal", "rest"):
        out[f"security.ssl.{part}.enabled"] = "true"
        for kind in ("keystore", "truststore"):
            out[f"security.ssl.{part}.{kind}"] = store
            out[f"security.ssl.{part}.{kind}-password"] = password
        out[f"security.ssl.{part}.key-password"] = password
    out["security.ssl.rest.authentication-enabled"] = "true"
    return out


def make_flink_credentials(cluster_dir: Path, hosts: list[str], keytool: str = "keytool") -> Path:
    """A new `credentials/` directory in `cluster_dir`: a key pair and certificate for `hosts`
    (their addresses or names), the SSL settings, and the Python clients' PEM files; its path."""
    directory = _fresh_dir(cluster_dir)
    password = secrets.token_urlsafe(24)
    env = {**os.environ, "CEPKIT_STORE_PASSWORD": password}       # to keytool and openssl: never argv
    sans = ",".join(f"ip:{h}" if _is_ip(h) else f"dns:{h}" for h in dict.fromkeys([*hosts, "127.0.0.1"]))
    store = directory / FLINK_KEYSTORE
    old = os.umask(0o077)
    try:
        _run([keytool, "-genkeypair", "-alias", "cepkit", "-keyalg", "RSA", "-keysize", "2048", "-validity",
              str(CERT_DAYS), "-dname", "CN=cepkit-flink-cluster", "-ext", f"SAN={sans}", "-storetype", "PKCS12",
              "-keystore", str(store), "-storepass:env", "CEPKIT_STORE_PASSWORD", "-keypass:env",
              "CEPKIT_STORE_PASSWORD", "-noprompt"], "keytool -genkeypair", env)
        os.chmod(store, 0o600)
        pem = _run(["openssl", "pkcs12", "-in", str(store), "-passin", "env:CEPKIT_STORE_PASSWORD", "-nodes"],
                   "openssl pkcs12 (the Python clients' key)", env)
        cert = _run([keytool, "-exportcert", "-rfc", "-alias", "cepkit", "-keystore", str(store),
                     "-storepass:env", "CEPKIT_STORE_PASSWORD"], "keytool -exportcert", env)
    finally:
        os.umask(old)
    write_private(directory / CLIENT_PEM, pem.decode())
    write_private(directory / CA_PEM, cert.decode())
    lines = ["# A cepkit cluster's SSL (harness/cluster_auth.py): it holds the keystore's password; keep it private."]
    lines += [f"{k}: {v}" for k, v in flink_ssl_settings(directory, password).items()]
    write_private(directory / FLINK_SSL, "\n".join(lines) + "\n")
    return directory


def read_flink_ssl(directory: str | os.PathLike) -> dict[str, str]:
    """The settings of `flink-ssl.yaml` in `directory` (flat `key: value` lines)."""
    out = {}
    for line in (Path(directory) / FLINK_SSL).read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition(": ")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def check_credentials(directory: str | os.PathLike, engine: str) -> Path:
    """`directory` (run.cluster_credentials) as a run can use it: one line naming what is wrong."""
    path = Path(directory).expanduser().absolute()
    needs = {"spark": (SPARK_DEFAULTS,), "flink": (FLINK_SSL, CLIENT_PEM, CA_PEM, FLINK_KEYSTORE)}[engine]
    for need in needs:
        file = path / need
        try:
            st = file.stat()
        except OSError as e:
            raise CepkitError(f"run.cluster_credentials: {file}: {e.strerror or e}") from None
        if not stat.S_ISREG(st.st_mode):
            raise CepkitError(f"run.cluster_credentials: {file}: not a regular file")
        if st.st_mode & 0o077:
            raise CepkitError(f"run.cluster_credentials: {file}: holds a secret but is mode "
                              f"{stat.S_IMODE(st.st_mode):04o}: make it 0600 (chmod 600)")
    key = "spark.authenticate.secret" if engine == "spark" else "security.ssl.rest.keystore-password"
    try:
        settings = read_input_bytes(path / needs[0], "secret", what="a settings file").decode("utf-8", "replace")
    except CepkitError as e:
        raise CepkitError(f"run.cluster_credentials: {e}") from None
    if key not in settings:
        raise CepkitError(f"run.cluster_credentials: {path / needs[0]}: sets no {key}")
    return path


if __name__ == "__main__":          # scripts/netns-cluster.sh: python -m harness.cluster_auth flink DIR HOST...
    engine, where, *addresses = sys.argv[1:]
    made = make_spark_credentials(Path(where)) if engine == "spark" else make_flink_credentials(Path(where), addresses)
    print(made)
