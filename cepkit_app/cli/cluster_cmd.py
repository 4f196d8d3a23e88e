"""`cepkit cluster start|status|stop`: a standalone cluster on this machine, for runs with a cluster
master instead of `local[*]`: Spark's (one master, N workers; `--master spark://...`,
harness/cluster.py) or, with `start --engine flink`, Flink's (one JobManager, N TaskManagers;
`--master flink://...`, harness/flink_cluster.py).

`start` prints the master URL as its last stdout line, so a script can capture it; the state, the
logs and the workers' directories live in `--dir` (default `cluster/` here), where `status` and
`stop` find the cluster again (cluster.json says which engine's it is).
"""

from __future__ import annotations

import argparse

DEFAULT_DIR = "cluster"
# The spec's fields as the options that set them, so a bad value is reported by its option.
_OPTIONS = {"workers": "--workers", "cores_per_worker": "--cores", "memory_per_worker": "--memory",
            "host": "--host", "master_port": "--port", "directory": "--dir", "engine": "--engine"}
# What the engines call a cluster's parts, for the start line.
_PARTS = {"spark": ("Spark standalone cluster", "master", "worker(s)", "core(s)"),
          "flink": ("Flink standalone cluster", "JobManager", "TaskManager(s)", "task slot(s)")}


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    start = actions.add_parser("start", help="start a master and workers; print the master URL",
                               description="Start a standalone cluster on this machine: a Spark master and "
                                           "workers (wait until every worker is ALIVE) or, with --engine flink, "
                                           "a Flink JobManager and TaskManagers (wait until every TaskManager "
                                           "is registered); print the master URL.")
    start.add_argument("--engine", default="spark", metavar="ENGINE",
                       help="spark (default): a master and workers, spark://HOST:PORT; flink: a JobManager and "
                            "TaskManagers (each restarted if it dies), flink://HOST:RESTPORT")
    start.add_argument("--workers", type=int, default=2, metavar="N",
                       help="number of workers (Flink: TaskManagers; default 2)")
    start.add_argument("--cores", type=int, default=1, metavar="C",
                       help="cores each worker offers (Flink: task slots per TaskManager; default 1)")
    start.add_argument("--memory", default="2g", metavar="SIZE",
                       help="memory each worker offers (Flink: each TaskManager's process size; default 2g)")
    start.add_argument("--host", default="127.0.0.1", help="address every daemon binds (default 127.0.0.1)")
    start.add_argument("--port", type=int, default=0, metavar="P",
                       help="master port (Flink: the JobManager's REST port; default: a free port)")
    start.set_defaults(handler=_start)
    status = actions.add_parser("status", help="is it running: processes, workers, cores, memory, applications")
    status.set_defaults(handler=_status)
    stop = actions.add_parser("stop", help="stop the workers (and their executors), then the master "
                                           "(Flink: the TaskManagers and the JobManager)")
    stop.set_defaults(handler=_stop)
    for action in (start, status, stop):
        action.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                            help=f"the cluster's state and logs (default: ./{DEFAULT_DIR})")


def _dir(args: argparse.Namespace) -> str:
    """--dir as given; an empty one (an unset shell variable) is refused, not read as "."."""
    from kit.paths import path_option

    return path_option(args.dir, "--dir")


def _spec(args: argparse.Namespace):
    from harness.cluster_spec import CLUSTER_ENGINES, ClusterSpec
    from kit.engines import engine_name
    from kit.errors import CepkitError

    try:
        engine = engine_name(args.engine)
    except CepkitError as e:
        raise CepkitError(f"--engine: {e}") from None
    if engine not in CLUSTER_ENGINES:
        raise CepkitError(f"--engine: a cluster is started for {' or '.join(CLUSTER_ENGINES)}, got {args.engine!r}")
    try:
        return ClusterSpec(_dir(args), host=args.host, master_port=args.port, workers=args.workers,
                           cores_per_worker=args.cores, memory_per_worker=args.memory, engine=engine)
    except CepkitError as e:
        field, sep, rest = str(e).removeprefix("cluster spec: ").partition(": ")
        if sep and field in _OPTIONS:
            raise CepkitError(f"{_OPTIONS[field]}: {rest}") from None
        raise


def _start(args: argparse.Namespace) -> int:
    import time

    from cepkit_app.cli.progress import console
    from harness.cluster import start_cluster

    spec = _spec(args)
    con = console()
    began = time.monotonic()
    kind, master, workers, cores = _PARTS[spec.engine]
    # A spinner on a terminal only (it leaves no line behind): a refusal stays one line.
    with con.status(f"starting a {kind} in {spec.directory}: 1 {master}, {spec.workers} "
                    f"{workers} of {spec.cores_per_worker} {cores} and {spec.memory_per_worker}"):
        info = start_cluster(spec)
    con.print(f"[bold green]cluster up[/] in {time.monotonic() - began:.1f} s: master {info.master_url}, "
              f"web UI {info.webui_url}; {spec.workers} {workers} of {spec.cores_per_worker} {cores} and "
              f"{spec.memory_per_worker}")
    logs = "{master,worker-N}.log" if spec.engine == "spark" else "{jobmanager,taskmanager-N}.log and log/"
    con.print(f"  logs: {info.master_log.parent}/{logs}; "
              f"stop it with: cepkit cluster stop --dir {args.dir}")
    credentials = info.directory / "credentials"
    if credentials.is_dir():      # beyond loopback (harness/cluster_auth.py): runs need them
        con.print(f"  it requires authentication: its client credentials are in {credentials} (private); "
                  f"runs set run.cluster_credentials = \"{credentials}\"")
    print(info.master_url)
    return 0


def _status(args: argparse.Namespace) -> int:
    from harness.cluster import cluster_status

    st = cluster_status(_dir(args))
    if "master_url" not in st:
        print(f"not running ({st['detail']} in {args.dir})")
        return 0
    detail = f" ({st['detail']})" if st["detail"] else ""
    print(f"{st['state']}: {st['master_url']}, web UI {st['webui_url']}{detail}")
    if st.get("engine") == "flink":
        return _flink_status(st)
    for p in st["processes"]:
        print(f"  {p['role']:<9} pid {p['pid']:<7} {'alive' if p['alive'] else 'gone':<6} log {p['log']}")
    m = st["master"]
    if m is not None:
        print(f"  master {m['status']}: {m['alive_workers']} worker(s) alive, cores {m['cores_used']}/{m['cores']} "
              f"used, memory {m['memory_used_mb']}/{m['memory_mb']} MB used")
        for a in m["applications"]:
            print(f"  application {a['id']} {a['name']!r}: {a['state']}, {a['cores']} core(s), "
                  f"{a['memoryperexecutor']} MB per executor")
        if not m["applications"]:
            print("  no application running")
    return 0


def _flink_status(st: dict) -> int:
    for p in st["processes"]:
        jvm = f" (TaskManager JVM pid {p['jvm_pid']})" if p["jvm_pid"] else ""
        jvm += f", started again {p['restarts']} time(s) by its keeper" if p["restarts"] else ""
        print(f"  {p['role']:<14} pid {p['pid']:<7} {'alive' if p['alive'] else 'gone':<6} log {p['log']}{jvm}")
    jm = st["jobmanager"]
    if jm is not None:
        print(f"  JobManager (Flink {jm['flink_version']}): {jm['taskmanagers']} TaskManager(s) registered, "
              f"slots {jm['slots_available']}/{jm['slots_total']} free")
        for j in jm["jobs"]:
            print(f"  job {j['id']} {j['name']!r}: {j['state']}")
        if not jm["jobs"]:
            print("  no job running")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from cepkit_app.cli.progress import console
    from harness.cluster import stop_cluster

    console().print(stop_cluster(_dir(args)))
    return 0
