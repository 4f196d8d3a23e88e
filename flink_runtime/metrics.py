"""Where a Flink job's time goes, sampled from the JobManager's REST API inside the engine program.

`MetricsPoller(base_url, job_id).poll()` returns one sample: per job vertex (an operator chain:
one Flink task per parallel subtask) its name, parallelism and status, and per subtask Flink's
*cumulative* counters of the task's time, busy, backpressured (waiting for output buffers) and
idle (waiting for input), in ms since the task started, and its records in and out (over the
network: a chain's first operator's input, its last operator's output); plus the job's checkpoint
counts, its latest completed checkpoint, and the checkpoints completed since the previous sample.
The program prints each sample as a `flink_metrics` line every 2 s (flink_runtime/app.py);
benchmarks/flink_breakdown.py (validator/flink_metrics.py) turns the samples into shares of time.

Why cumulative counters: Flink's `busyTimeMsPerSecond` and the like are gauges averaged over the
last minute, too slow for a run of a minute or two; the counters' differences between two samples
are exact, and their sum (busy + backpressured + idle) is the subtask's time between the two, so
shares need no clock of ours. (Flink derives busy from the clock and the other two, so it can step
back a few ms between close fetches.) A figure Flink cannot measure is None: a legacy source's
busy time (Flink reports NaN; its idle time then reads 0 and means nothing), and every task's
until the JobManager's first fetch after it started.

Freshness: the REST handlers serve metrics from the JobManager's metric store, which a request
refreshes (asynchronously) when it is older than `metrics.fetcher.update-interval` (Flink's
default: 10 s, so four samples in five repeat the previous figures; at 1 s nearly every 2 s
sample starts a fetch of its own). A poll therefore asks for the job first (which starts the
fetch), then the checkpoints, then each vertex: the vertices' figures are usually those of the
fetch this poll started, else those of the previous one. Either way the counters are consistent,
only a sample later.

Cost: 2 + (job vertices) GETs; a whole poll took 25-160 ms against the local mini-cluster of a
busy 2-core machine (~1.5 s for the first, while the job deploys). The poll has a `budget_s`
deadline (every GET's timeout is what is left of it), so it never hangs the program's watch
loop. The job's own GET failing raises `RestError`; a later GET failing leaves its part out and
names it in `errors` (a partial sample; a vertex whose own GET failed keeps the job's sums over
its subtasks, `busy_ms_sum` etc.).

Only the standard library (and flink_runtime.rest): this runs in the program's own thread.
"""

from __future__ import annotations

import math
import time

from flink_runtime.rest import RestError, get_json

# The whole poll's deadline (s): the program polls every 2 s.
BUDGET_S = 3.0
# Per subtask, from the vertex's detail (/jobs/<jid>/vertices/<vid>): REST name -> sample name.
SUBTASK_COUNTERS = (("accumulated-busy-time", "busy_ms"), ("accumulated-backpressured-time", "backpressured_ms"),
                    ("accumulated-idle-time", "idle_ms"), ("read-records", "records_in"),
                    ("write-records", "records_out"))


def _count(value) -> int | None:
    """A Flink counter as an int; None for what Flink could not measure (NaN, "NaN", negative)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(x) or x < 0:
        return None
    return int(round(x))


def checkpoint_entry(doc: dict) -> dict:
    """One checkpoint of Flink's checkpoint history, in the sample's terms."""
    return {"id": int(doc["id"]), "status": str(doc.get("status") or ""),
            "savepoint": bool(doc.get("is_savepoint")),
            "trigger_ts_ms": _count(doc.get("trigger_timestamp")),
            "completed_ts_ms": _count(doc.get("latest_ack_timestamp")),
            "duration_ms": _count(doc.get("end_to_end_duration")),
            "size": _count(doc.get("checkpointed_size")), "state_size": _count(doc.get("state_size"))}


class MetricsPoller:
    """Samples one job's per-vertex time counters and its checkpoints (see the module doc)."""

    def __init__(self, base_url: str, job_id: str, budget_s: float = BUDGET_S):
        self.base_url, self.job_id, self.budget_s = base_url.rstrip("/"), str(job_id), float(budget_s)
        self.last_checkpoint = 0        # the highest checkpoint id already listed in a sample's `new`

    def _get(self, path: str, deadline: float) -> dict:
        left = deadline - time.monotonic()
        if left <= 0.05:
            raise RestError(f"{self.base_url}{path}: the poll's {self.budget_s:g} s budget is spent")
        return get_json(self.base_url, path, timeout_s=left)

    def poll(self) -> dict:
        """One sample (JSON-serialisable; no `event`/`ts_ms`: the program adds them)."""
        deadline = time.monotonic() + self.budget_s
        base = f"/jobs/{self.job_id}"
        job = self._get(base, deadline)         # raises RestError: nothing to report
        errors: list[str] = []
        sample = {"job_id": self.job_id, "job_state": str(job.get("state") or ""),
                  "jm_now_ms": _count(job.get("now")), "vertices": [], "checkpoints": None}
        try:
            sample["checkpoints"] = self._checkpoints(self._get(base + "/checkpoints", deadline))
        except (RestError, KeyError, TypeError, ValueError) as e:
            errors.append(f"checkpoints: {e}")
        for v in job.get("vertices") or []:
            vertex = {"id": str(v.get("id")), "name": str(v.get("name")), "parallelism": _count(v.get("parallelism")),
                      "status": str(v.get("status") or "")}
            try:
                detail = self._get(f"{base}/vertices/{vertex['id']}", deadline)
                subtasks = sorted(detail.get("subtasks") or [], key=lambda s: int(s.get("subtask", 0)))
                for key, name in SUBTASK_COUNTERS:
                    vertex[name] = [_count((s.get("metrics") or {}).get(key)) for s in subtasks]
            except (RestError, TypeError, ValueError) as e:
                errors.append(f"vertex {vertex['name']}: {e}")
                # The job's own figures, summed over the subtasks, stand in (one value, not per subtask).
                metrics = v.get("metrics") or {}
                for key, name in SUBTASK_COUNTERS:
                    vertex[name + "_sum"] = _count(metrics.get(key))
            sample["vertices"].append(vertex)
        if errors:
            sample["errors"] = errors
        return sample

    def _checkpoints(self, doc: dict) -> dict:
        counts = doc.get("counts") or {}
        latest = (doc.get("latest") or {}).get("completed")
        history = [h for h in doc.get("history") or [] if str(h.get("status")) == "COMPLETED"]
        new = sorted((checkpoint_entry(h) for h in history if int(h["id"]) > self.last_checkpoint),
                     key=lambda c: c["id"])
        if new:
            self.last_checkpoint = new[-1]["id"]
        return {"completed": _count(counts.get("completed")), "failed": _count(counts.get("failed")),
                "in_progress": _count(counts.get("in_progress")), "restored": _count(counts.get("restored")),
                "latest": checkpoint_entry(latest) if latest else None, "new": new}
