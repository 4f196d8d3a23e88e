#!/usr/bin/env bash
# Four hosts on one machine, in network namespaces, for runs across a real network
# (specs/ENGINE_RUN.md, "On several machines"). Needs root and iproute2. Each host has its own
# network stack and address on a private bridge; they share this machine's files (DIR/shared stands
# in for the shared storage real machines mount) and its clock.
#
#   harness  10.213.0.1  cepkit: the feed, the sink, the validator, the engine's client/driver
#   master   10.213.0.2  the Spark master (7077, web UI 8080) or the Flink JobManager (REST 8081, RPC 6123)
#   worker-1 10.213.0.3  a Spark worker or a Flink TaskManager
#   worker-2 10.213.0.4  a Spark worker or a Flink TaskManager
#
# The master and the workers run the engine's own launchers (pyspark's spark-class, PyFlink's
# jobmanager.sh and taskmanager.sh) from a Python environment that has the engine's packages and
# not cepkit (made once in $CEPKIT_WORKER_ENVS, outside the checkout), with a clean environment
# and a working directory in DIR: they know nothing of cepkit. Each daemon runs under a restart
# loop, as a service manager (systemd's Restart=always) would keep it on a real host.
#
#   scripts/netns-cluster.sh up DIR spark|flink   the hosts and the engine's daemons; prints, as
#                                                 KEY=VALUE lines (also in DIR/cluster.env), the
#                                                 master URL, the addresses, the workers' Python,
#                                                 and CREDENTIALS: DIR/credentials, which the
#                                                 cluster requires (Spark's secret, Flink's mutual
#                                                 TLS: specs/ENGINE_RUN.md, "Authentication"); a
#                                                 run sets run.cluster_credentials to it
#   scripts/netns-cluster.sh exec DIR HOST CMD... CMD on HOST (harness, master, worker-1, worker-2)
#   scripts/netns-cluster.sh fault DIR cut-link|kill-worker
#                                                 cut worker-1's link for $CUT_SECONDS (20) s, then
#                                                 mend it; or SIGKILL every engine process of
#                                                 worker-1 (its restart loop starts it again)
#   scripts/netns-cluster.sh down DIR             stop every process on the hosts, remove them
#
# Namespaces are named $CEPKIT_NETNS-<host> (default prefix "ck"); `up` removes stale ones first.
set -euo pipefail

PREFIX=${CEPKIT_NETNS:-ck}
SUBNET=10.213.0
HOSTS=(harness master worker-1 worker-2)
declare -A ADDR=([harness]=$SUBNET.1 [master]=$SUBNET.2 [worker-1]=$SUBNET.3 [worker-2]=$SUBNET.4)
SWITCH=$PREFIX-switch
REPO=$(cd "$(dirname "$0")/.." && pwd)
ENVS=${CEPKIT_WORKER_ENVS:-/var/tmp/cepkit-worker-envs}
CUT_SECONDS=${CUT_SECONDS:-20}
SPARK_PORT=7077 SPARK_UI_PORT=8080 FLINK_REST_PORT=8081 FLINK_RPC_PORT=6123

say() { printf '[netns] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }
ns() { echo "$PREFIX-$1"; }
# Each host's link: "v-<host>" on the switch's side (the bridge port), eth0 on the host's side.
port() { echo "v-${1}"; }

need_root() {
  [ "$(id -u)" = 0 ] || die "network namespaces need root"
  command -v ip >/dev/null || die "iproute2's ip is not installed"
}

# ---- the workers' Python environments (outside the checkout, no cepkit) -----------------------

# The packages each engine's workers need, pinned as the harness's environments have them: pickled
# pandas and Arrow data cross between the driver and the workers. Spark's transformWithStateInPandas
# speaks protobuf to its state server, which pyspark's "sql" extra does not list; J3's lookups
# query PostgreSQL through psycopg.
worker_requirements() {
  case "$1" in
    spark) "$REPO/.venv/bin/python" - <<'EOF'
import importlib.metadata as m
for p in ("pyspark", "pandas", "pyarrow", "numpy", "protobuf", "psycopg", "psycopg-binary"):
    print(f"{p}=={m.version(p)}")
EOF
    ;;
    flink) grep -vE '^\s*(#|$)' "$REPO/scripts/flink-requirements.txt" ;;
  esac
}

worker_env() {   # the environment's directory, made once per set of pins
  local engine=$1 reqs hash dir
  reqs=$(worker_requirements "$engine")
  hash=$(printf '%s\n' "$reqs" | sha256sum | cut -c1-12)
  dir=$ENVS/$engine-$hash
  if [ ! -x "$dir/bin/python" ] || [ ! -f "$dir/.complete" ]; then
    say "making the $engine workers' Python environment in $dir (once; $(echo "$reqs" | tr '\n' ' '))"
    rm -rf "$dir"
    mkdir -p "$ENVS"
    python3 -m venv "$dir"
    printf '%s\n' "$reqs" > "$dir/requirements.txt"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$dir/requirements.txt" \
      2> >(grep -v 'is ignored' >&2)
    touch "$dir/.complete"
  fi
  echo "$dir"
}

java_home() {
  local java
  if [ -n "${JAVA_HOME:-}" ]; then echo "$JAVA_HOME"; return; fi
  java=$(command -v java) || die "no java on PATH: install a JDK 17"
  dirname "$(dirname "$(readlink -f "$java")")"
}

# ---- the hosts ---------------------------------------------------------------------------------

topology_up() {
  ip netns add "$SWITCH"
  ip -n "$SWITCH" link add br0 type bridge
  ip -n "$SWITCH" link set br0 up
  ip -n "$SWITCH" link set lo up
  for host in "${HOSTS[@]}"; do
    ip netns add "$(ns "$host")"
    ip link add "$(port "$host")" netns "$SWITCH" type veth peer name eth0 netns "$(ns "$host")"
    ip -n "$SWITCH" link set "$(port "$host")" master br0 up
    ip -n "$(ns "$host")" addr add "${ADDR[$host]}/24" dev eth0
    ip -n "$(ns "$host")" link set eth0 up
    ip -n "$(ns "$host")" link set lo up
  done
}

topology_down() {
  local name pids
  for name in "${HOSTS[@]/#/$PREFIX-}" "$SWITCH"; do
    ip netns list | grep -qw "^$name" || continue
    for sig in TERM KILL; do
      pids=$(ip netns pids "$name" 2>/dev/null || true)
      [ -n "$pids" ] || break
      # shellcheck disable=SC2086
      kill -s "$sig" $pids 2>/dev/null || true
      for _ in $(seq 50); do [ -z "$(ip netns pids "$name" 2>/dev/null)" ] && break; sleep 0.1; done
    done
    ip netns delete "$name"
  done
}

# A daemon on a host: a clean environment (none of this shell's variables, no PYTHONPATH), its
# working directory in DIR, restarted 2 s after it exits, its console in DIR/<host>/<name>.log.
run_daemon() {
  local host=$1 name=$2 dir=$3; shift 3
  mkdir -p "$dir"
  printf '#!/bin/sh\n# %s on %s (scripts/netns-cluster.sh)\nwhile :; do\n  %s\n  echo "[restart loop] exited with $?; starting again in 2 s"\n  sleep 2\ndone\n' \
    "$name" "$host" "$*" > "$dir/$name.sh"
  # Detached (its own session, none of this script's descriptors): `up` returns, the daemon stays.
  ( cd "$dir" && exec ip netns exec "$(ns "$host")" setsid -f env -i PATH=/usr/bin:/bin HOME="$dir" \
      LANG=C.UTF-8 "${DAEMON_ENV[@]}" sh "$dir/$name.sh" ) > "$dir/$name.log" 2>&1 < /dev/null
}

wait_for() {   # wait_for WHAT SECONDS CMD...: until CMD succeeds
  local what=$1 limit=$2; shift 2
  for _ in $(seq $((limit * 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  die "$what did not come up in ${limit} s (logs in $DIR)"
}

# The cluster's credentials (specs/ENGINE_RUN.md, "Authentication"): DIR/credentials (0700), made
# at `up`. Spark: spark-defaults.conf (0600, created so) with spark.authenticate, a fresh 256-bit
# secret and encrypted RPC, every daemon's and driver's SPARK_CONF_DIR: never on a command line.
# On real hosts each machine holds its own copy; here the hosts share the files, and a stranger is
# a process that does not use them.
spark_credentials() {
  local creds=$DIR/credentials secret
  mkdir -m 700 "$creds"
  secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  ( umask 077
    printf '%s\n' "# scripts/netns-cluster.sh: this cluster's authentication; keep it private" \
      "spark.authenticate true" "spark.network.crypto.enabled true" "spark.io.encryption.enabled true" \
      "spark.authenticate.secret $secret" > "$creds/spark-defaults.conf" )
  CREDENTIALS=$creds
}

up_spark() {
  local wenv=$1 home spark_class
  home=$("$wenv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
  spark_class="$home/bin/spark-class"
  spark_credentials
  local common=(JAVA_HOME="$(java_home)" SPARK_HOME="$home" SPARK_NO_DAEMONIZE=1 SPARK_CONF_DIR="$CREDENTIALS")
  DAEMON_ENV=("${common[@]}" SPARK_LOCAL_IP="${ADDR[master]}"
              SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false -Dspark.port.maxRetries=0")
  run_daemon master spark-master "$DIR/master" "$spark_class" org.apache.spark.deploy.master.Master \
    --host "${ADDR[master]}" --port "$SPARK_PORT" --webui-port "$SPARK_UI_PORT"
  wait_for "the Spark master" 60 ip netns exec "$(ns harness)" \
    "$wenv/bin/python" -c "import urllib.request as u; u.urlopen('http://${ADDR[master]}:$SPARK_UI_PORT/json/', timeout=2)"
  for w in worker-1 worker-2; do
    DAEMON_ENV=("${common[@]}" SPARK_LOCAL_IP="${ADDR[$w]}" SPARK_LOCAL_DIRS="$DIR/$w/local"
                SPARK_WORKER_OPTS="-Dspark.port.maxRetries=0")
    run_daemon "$w" spark-worker "$DIR/$w" "$spark_class" org.apache.spark.deploy.worker.Worker \
      --host "${ADDR[$w]}" --cores 1 --memory 2g --webui-port 8081 --work-dir "$DIR/$w/work" \
      "spark://${ADDR[master]}:$SPARK_PORT"
  done
  wait_for "two Spark workers" 90 ip netns exec "$(ns harness)" "$wenv/bin/python" -c "
import json, sys, urllib.request as u
doc = json.load(u.urlopen('http://${ADDR[master]}:$SPARK_UI_PORT/json/', timeout=2))
sys.exit(sum(w.get('state') == 'ALIVE' for w in doc['workers']) < 2)"
  MASTER_URL="spark://${ADDR[master]}:$SPARK_PORT"
  UI_URL="http://${ADDR[master]}:$SPARK_UI_PORT"
}

# A host's Flink configuration (flat config.yaml): the distribution's JVM options, then where the
# JobManager is, what this host binds, memory, slots, restarts and heartbeats, and the Python
# workers' interpreter.
flink_conf() {
  local host=$1 home=$2 wenv=$3 conf=$DIR/$1/conf
  mkdir -p "$conf"
  cp "$home"/conf/log4j*.properties "$home"/conf/logback*.xml "$conf"/ 2>/dev/null || true
  local opts
  opts=$(sed -n 's/^ *all: //p' "$home/conf/config.yaml" | head -1)
  ( umask 077; : > "$conf/config.yaml" )
  cat >> "$conf/config.yaml" <<EOF
env.java.opts.all: "$opts"
jobmanager.rpc.address: "${ADDR[master]}"
jobmanager.rpc.port: $FLINK_RPC_PORT
jobmanager.bind-host: "${ADDR[master]}"
jobmanager.memory.process.size: "1024m"
rest.address: "${ADDR[master]}"
rest.bind-address: "${ADDR[master]}"
rest.port: $FLINK_REST_PORT
web.submit.enable: false
taskmanager.host: "${ADDR[$host]}"
taskmanager.bind-host: "${ADDR[$host]}"
taskmanager.numberOfTaskSlots: 1
taskmanager.memory.process.size: "2048m"
parallelism.default: 2
cluster.evenly-spread-out-slots: true
restart-strategy.type: "fixed-delay"
restart-strategy.fixed-delay.attempts: 20
restart-strategy.fixed-delay.delay: "2 s"
heartbeat.interval: "2 s"
heartbeat.timeout: "20 s"
metrics.fetcher.update-interval: "1 s"
io.tmp.dirs: "$DIR/$host/tmp"
python.executable: "$wenv/bin/python"
python.client.executable: "$wenv/bin/python"
EOF
  # Internal and REST SSL with mutual authentication (the credentials' settings): the file holds
  # the keystore's password, so it is the owner's alone.
  chmod 600 "$conf/config.yaml"
  grep -v '^#' "$CREDENTIALS/flink-ssl.yaml" >> "$conf/config.yaml"
  mkdir -p "$DIR/$host/tmp" "$DIR/$host/log" "$DIR/$host/lib"
  # The distribution's jars, and opt/flink-python: a cluster running Python jobs needs it in lib/.
  ln -sf "$home"/lib/*.jar "$home"/opt/flink-python*.jar "$DIR/$host/lib/"
}

# Python that GETs the JobManager's REST PATH over mutual TLS (the credentials' client certificate): r.
rest_get() {
  printf '%s\n' "import json, ssl, sys, urllib.request as u" \
    "c = ssl.create_default_context(cafile='$CREDENTIALS/ca.pem'); c.load_cert_chain('$CREDENTIALS/client.pem')" \
    "r = u.urlopen('https://${ADDR[master]}:$FLINK_REST_PORT$1', timeout=2, context=c)"
}

up_flink() {
  local wenv=$1 home
  home=$("$wenv/bin/python" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')
  # The cluster's key pair and certificate (keytool), for every host's address.
  CREDENTIALS=$(JAVA_HOME="$(java_home)" PATH="$(java_home)/bin:$PATH" PYTHONPATH="$REPO" \
    "$REPO/.venv/bin/python" -m harness.cluster_auth flink "$DIR" "${ADDR[@]}")
  for host in master worker-1 worker-2; do flink_conf "$host" "$home" "$wenv"; done
  local common=(JAVA_HOME="$(java_home)" FLINK_HOME="$home")
  DAEMON_ENV=("${common[@]}" FLINK_CONF_DIR="$DIR/master/conf" FLINK_LIB_DIR="$DIR/master/lib"
              FLINK_LOG_DIR="$DIR/master/log")
  run_daemon master jobmanager "$DIR/master" "$home/bin/jobmanager.sh" start-foreground
  wait_for "the Flink JobManager" 90 ip netns exec "$(ns harness)" \
    "$wenv/bin/python" -c "$(rest_get "/overview")"
  for w in worker-1 worker-2; do
    DAEMON_ENV=("${common[@]}" FLINK_CONF_DIR="$DIR/$w/conf" FLINK_LIB_DIR="$DIR/$w/lib" FLINK_LOG_DIR="$DIR/$w/log")
    run_daemon "$w" taskmanager "$DIR/$w" "$home/bin/taskmanager.sh" start-foreground
  done
  wait_for "two Flink TaskManagers" 120 ip netns exec "$(ns harness)" "$wenv/bin/python" -c "$(rest_get /overview)
sys.exit(json.load(r)['taskmanagers'] < 2)"
  MASTER_URL="flink://${ADDR[master]}:$FLINK_REST_PORT"
  UI_URL="https://${ADDR[master]}:$FLINK_REST_PORT"
}

cmd_up() {
  local engine=$1 wenv
  case "$engine" in spark|flink) ;; *) die "up: the engine is spark or flink, got '$engine'" ;; esac
  case "$DIR/" in "$REPO"/*) die "up: DIR must lie outside the checkout ($REPO): the hosts must not see it" ;; esac
  need_root
  CREDENTIALS=
  wenv=$(worker_env "$engine")
  topology_down
  rm -rf "$DIR"
  mkdir -p "$DIR/shared"
  topology_up
  say "hosts up: $(for h in "${HOSTS[@]}"; do printf '%s %s (netns %s)  ' "$h" "${ADDR[$h]}" "$(ns "$h")"; done)"
  "up_$engine" "$wenv"
  cat > "$DIR/cluster.env" <<EOF
ENGINE=$engine
MASTER_URL=$MASTER_URL
UI_URL=$UI_URL
HARNESS_ADDR=${ADDR[harness]}
MASTER_ADDR=${ADDR[master]}
WORKER_ADDRS=${ADDR[worker-1]},${ADDR[worker-2]}
WORKER_PYTHON=$wenv/bin/python
SHARED_DIR=$DIR/shared
NETNS_PREFIX=$PREFIX
CREDENTIALS=$CREDENTIALS
EOF
  say "$engine cluster up: $MASTER_URL (logs in $DIR/<host>/)"
  cat "$DIR/cluster.env"
}

cmd_fault() {
  local kind=$1 pids
  case "$kind" in
    cut-link)
      say "cutting worker-1's link for $CUT_SECONDS s"
      ip -n "$SWITCH" link set "$(port worker-1)" down
      sleep "$CUT_SECONDS"
      ip -n "$SWITCH" link set "$(port worker-1)" up
      say "worker-1's link is up again" ;;
    kill-worker)
      # The engine's processes on worker-1 (the daemon's JVM, executors, Python workers), not its
      # restart loop: that starts the daemon again, as a service manager would.
      pids=$(for p in $(ip netns pids "$(ns worker-1)"); do
               [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sh ] || echo "$p"; done)
      say "killing worker-1's engine processes: $(echo $pids)"
      # shellcheck disable=SC2086
      [ -z "$pids" ] || kill -9 $pids ;;
    *) die "fault: cut-link or kill-worker, got '$kind'" ;;
  esac
}

action=${1:-}
DIR=${2:-}
[ -n "$action" ] && [ -n "$DIR" ] || { sed -n '2,34p' "$0" >&2; exit 2; }
DIR=$(realpath -m "$DIR")
case "$action" in
  up) cmd_up "${3:-}" ;;
  exec)
    host=${3:-}
    [ -n "${ADDR[$host]:-}" ] || die "exec: HOST is one of ${HOSTS[*]}, got '$host'"
    shift 3
    exec ip netns exec "$(ns "$host")" "$@" ;;
  fault) need_root; cmd_fault "${3:-}" ;;
  down) need_root; topology_down; say "hosts removed (files stay in $DIR)" ;;
  *) die "unknown action '$action' (up, exec, fault, down)" ;;
esac
