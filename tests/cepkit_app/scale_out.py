"""Where a cluster run's per-event work ran (issue 44, "plans that scale out"), from its run.json.

The harness samples the CPU of every process of a run (harness/resources.py): the engine
program's tree (the driver, or Flink's client) and a cluster's worker JVMs on this machine (Spark's
executors, Flink's TaskManagers, wherever their host's network namespace is), each with a label.
`work_split(run)` sums them by role; `assert_on_workers` holds a default plan to what it claims:
its per-event work runs on the workers, spread over both of them, not in the driver or client.
"""

from __future__ import annotations

SUITE = "tests/data/suites/scale-out.xml"
WORKLOAD = "scale-out-keyed-pattern"
WORKER_LABELS = ("a Spark executor JVM", "a Flink TaskManager JVM")


def work_split(run: dict) -> dict:
    """{"workers": {pid: cpu %}, "driver": cpu %, "kit": cpu %} of a run.json (percent of one core,
    the run's mean since its measurement began)."""
    procs = (run.get("bound") or {}).get("processes") or []
    workers = {p["pid"]: p["cpu_percent"] for p in procs if p["label"] in WORKER_LABELS}
    kit = sum(p["cpu_percent"] for p in procs if p["part"] in ("feed", "sink"))
    driver = sum(p["cpu_percent"] for p in procs
                 if p["label"] not in WORKER_LABELS and p["part"] not in ("feed", "sink"))
    return {"workers": workers, "driver": driver, "kit": kit}


def assert_on_workers(run: dict, workers: int = 2, least_percent: float = 5.0) -> dict:
    """The run's per-event work ran on `workers` worker JVMs, each busy (>= least_percent of a
    core), and together busier than the driver or client side (its JVM and the program's Python)."""
    split = work_split(run)
    busy = {pid: cpu for pid, cpu in split["workers"].items() if cpu >= least_percent}
    assert len(busy) >= workers, (f"work on {len(busy)} worker JVM(s), not {workers}: {split}; "
                                  f"processes {run['bound']['processes']}")
    assert sum(busy.values()) > split["driver"], (f"the workers ({sum(busy.values()):.0f} % of a core) are not "
                                                  f"busier than the driver side ({split['driver']:.0f} %): {split}")
    return split
