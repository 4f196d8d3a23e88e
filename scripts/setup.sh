#!/usr/bin/env bash
# Set up cepkit on a fresh Debian-like machine: Python >= 3.11 with venv, the package and its
# dev dependencies in ./.venv, and a Java 17 runtime (Spark needs it). Safe to run repeatedly.
# With --test it also installs what only the tests need: Chromium (to check the HTML report renders),
# PostgreSQL with its JDBC driver (the J3 join runs against a private server) and the Flink engine's
# environment. With --engine flink it makes only that environment (.venv-flink: PyFlink and its pins,
# scripts/flink-requirements.txt); cepkit does this by itself the first time a Flink run is asked for.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_install() {
  command -v apt-get >/dev/null || return 1
  say "apt-get install $*"
  if [ ! -f /tmp/.cepkit-apt-updated ]; then as_root apt-get update -qq && touch /tmp/.cepkit-apt-updated; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

find_python() {
  for py in python3.11 python3.12 python3.13 python3; do
    if command -v "$py" >/dev/null && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      echo "$py"; return 0
    fi
  done
  return 1
}

# The Flink engine's own virtual environment (PyFlink's pins clash with PySpark's).
flink_env() {
  local want
  want=$(sha256sum scripts/flink-requirements.txt | cut -d' ' -f1)
  if [ "$(cat .venv-flink/.cepkit-installed 2>/dev/null)" = "$want" ]; then return 0; fi
  say "creating .venv-flink for the Flink engine (apache-flink, ~350 MB; once)"
  rm -rf .venv-flink
  "$PY" -m venv .venv-flink
  .venv-flink/bin/python -m pip install -q --upgrade pip
  .venv-flink/bin/python -m pip install -q -r scripts/flink-requirements.txt
  echo "$want" > .venv-flink/.cepkit-installed
  say "flink: $(.venv-flink/bin/python -c 'import importlib.metadata as m; print(m.version("apache-flink"))')"
}

# cepkit's Flink runtime jar: the JVM feed source and sink of the Flink SQL queries (harness/flink_jar.py).
flink_jar() {
  .venv/bin/python -m harness.flink_jar || say "continuing without the Flink runtime jar (no Flink SQL queries)"
}

PY=$(find_python) || { apt_install python3 python3-venv python3-pip && PY=$(find_python); } || {
  say "error: Python >= 3.11 not found and could not be installed"; exit 1; }

if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($PY --version)"
  if ! "$PY" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    apt_install python3-venv || { say "error: '$PY -m venv' failed; install python3-venv"; exit 1; }
    "$PY" -m venv .venv
  fi
fi

if [ "${1:-}" = "--engine" ]; then
  case "${2:-}" in
    flink) flink_env; flink_jar; exit 0 ;;
    spark) ;;   # the main environment, below
    *) say "error: --engine: spark or flink, got '${2:-}'"; exit 2 ;;
  esac
fi

stamp=.venv/.cepkit-installed
want=$(cat setup.cfg pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing cepkit and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  echo "$want" > "$stamp"
fi

java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  apt_install openjdk-17-jdk-headless || { say "error: Java 17 is required (install openjdk-17-jdk-headless)"; exit 1; }
fi
# javac compiles the engines' quiet local file system (harness/local_fs.py); runs work without it, slower.
if ! command -v javac >/dev/null; then
  apt_install openjdk-17-jdk-headless || say "no javac: Spark runs will spawn a process per checkpoint file"
fi
if [ "${1:-}" = "--test" ] && ! command -v chromium >/dev/null; then
  apt_install chromium || { say "error: the tests need Debian's chromium package"; exit 1; }
fi
# J3 (stream-to-table join against a database) runs a private PostgreSQL from Debian's package.
if [ "${1:-}" = "--test" ] && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  apt_install postgresql || { say "error: the tests need Debian's postgresql package (J3)"; exit 1; }
fi
# ... and J3's JDBC plan reads it through Debian's JDBC driver.
if [ "${1:-}" = "--test" ] && ! ls /usr/share/java/postgresql*.jar >/dev/null 2>&1; then
  apt_install libpostgresql-jdbc-java || { say "error: the tests need Debian's libpostgresql-jdbc-java (J3)"; exit 1; }
fi
if [ "${1:-}" = "--test" ]; then flink_env; fi
# Hadoop's local file system without a child process per checkpoint file (harness/local_fs.py); optional.
.venv/bin/python -m harness.local_fs || say "continuing without the quiet local file system"
# cepkit's Spark runtime jar: the JVM feed source and sink writer of Spark's real-time mode (harness/runtime_jar.py).
.venv/bin/python -m harness.runtime_jar || say "continuing without the Spark runtime jar (no real-time mode)"
if [ -x .venv-flink/bin/python ]; then flink_jar; fi
# Spark's classes, archived once for faster engine start-up (harness/jvm_archive.py); optional.
.venv/bin/python -m harness.jvm_archive || say "continuing without a JVM class archive"
say "ready: $(.venv/bin/python --version), java $(java_major), cepkit $(.venv/bin/cepkit --version | cut -d' ' -f2)"
