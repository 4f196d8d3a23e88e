"""Where a Flink run's time goes: the program's `flink_metrics` samples summarised per operator chain.

A Flink engine program prints one `flink_metrics` line every 2 s (flink_runtime/metrics.py): per
job vertex (an operator chain, one task per parallel subtask) Flink's cumulative busy,
backpressured and idle time of each subtask and its records in and out, and the job's
checkpoints. This module turns a run's lines into, per vertex, the share of its subtasks' time
spent busy / backpressured / idle over the measured part of the run, the busiest subtask's busy
share, records in and out per second, the checkpoints' durations and sizes, and a verdict naming
the bottleneck (benchmarks/flink_breakdown.py prints it).

- **Shares.** Per subtask, busy + backpressured + idle is the task's time since it started (Flink
  derives busy from the other two and the clock, so between two close fetches it can step back a
  few ms: it is not strictly a counter). So a vertex's shares over one job are its subtasks'
  differences from the first sample of the measured part to the last, summed over the subtasks,
  over the sum of all three: averaged over subtasks, weighted by time, exact whatever the sampling.
  A restarted program (`attempt` 2, a new job whose counters start from zero) adds its own span,
  by vertex name. The busiest subtask's share is its own ratio. A vertex whose busy time Flink
  cannot measure (a legacy source, such as the feed's datagen trigger: NaN) has no shares.
  Records per second: the record-count differences over the subtasks' own time (the time between
  the two fetches), else over the samples' wall time. The timeline (the chart) has a point per
  step between samples whose figures are fresh: the subtasks' time moved at least `FRESH` of the
  wall time (the JobManager serves the same fetch until `metrics.fetcher.update-interval` passes).
- **Measured part.** From the first sample at or after the run start (the driver's first release:
  run.json's `timings.run_start_wall_ms`, else the first `progress` line with input) to the last
  sample before the program's `finished` / `stopped` / `failed` line (else the last sample): the
  start-up (job deployment, the Python workers' first bundles) is left out, the drain of the
  backlog and the end-of-run savepoints are in.
- **Checkpoints.** Those triggered in the measured part (savepoints left out): count, p50 and max
  of the end-to-end duration (nearest rank), the checkpointed size (p50, max), and the number that
  failed in the measured part.
- **Verdict** (Flink's own guidance, "Monitoring Back Pressure"): a backpressured task waits for
  a slower one downstream; the bottleneck is the busiest task that is not itself backpressured.
  Vertices are ranked by their busiest subtask (a keyed operator with one hot key is as slow as
  that subtask); a vertex with a backpressured share above `BACKPRESSURE_OK` (Flink's "OK" level,
  10 %) is not a candidate. The best candidate is the bottleneck when its busiest subtask is busy
  at least `SATURATED` (80 %) of the time; between `BUSY` (50 %) and that, the busiest; below,
  the job has headroom. The verdict says whose code the vertex runs: the kit's feed (the `cepkit
  feed` puller and its trigger, `cepkit events`), the kit's emitters (`cepkit sink`), the kit's
  query logic that sends its own rows (`cepkit pairs buckets`, `cepkit python queries`), or the
  engine's own operators (SQL, conversions), chained with them or alone.

Python operators: PyFlink runs a Python function in a worker process of its own, fed in bundles
(at most 1,000 elements or 10 ms, `python.fn-execution.bundle.*`); the Java task counts as busy
while it hands elements over and while it waits for a bundle to finish, so the Python function's
time shows as its operator's busy time, and so does whatever that function waits on: the feed
puller's reads of the driver, the emitters' sends to the harness sink, a CPU the other processes
hold (busy is time, not CPU). Python work overlapping the task's wait for input counts as idle,
so a Python operator's busy share is, if anything, low.

Pure functions over the decoded JSON lines; imports only the standard library.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import CepkitError
from kit.jsonfile import read_json_object

EVENT = "flink_metrics"
BACKPRESSURE_OK = 0.10
SATURATED = 0.80
BUSY = 0.50
# A step between two samples is a point of the timeline when the subtasks' time moved at least this
# share of the wall time between them (else the JobManager served the same, or a partial, fetch).
FRESH = 0.5
ENDS = ("finished", "stopped", "failed")

# Whose code a vertex runs: the kit's operators are named by flink_runtime (`.name(...)`).
FEED, EMITTER, QUERY, ENGINE = "kit feed", "kit emitter", "kit query + emitter", "engine"
# The kit's Java code inside Flink's JVM (operators named "... (JVM)" or "(JVM logic, ...)"): its
# connectors (the FLIP-27 source, the Sink V2 sink) and its logic as user code in Flink's operators.
JVM_CONNECTOR, JVM_LOGIC = "kit JVM connector", "kit JVM user code"
KIT_NAMES = (("cepkit feed (JVM)", JVM_CONNECTOR), ("cepkit sink (JVM)", JVM_CONNECTOR),
             ("(JVM logic", JVM_LOGIC), ("cepkit pairs partials (JVM)", JVM_LOGIC),
             ("cepkit pairs buckets (JVM)", JVM_LOGIC), ("events (JVM)", JVM_LOGIC),
             ("cepkit feed", FEED), ("cepkit_feed_trigger", FEED), ("cepkit events", FEED),
             ("cepkit sink", EMITTER), ("cepkit pairs buckets", QUERY), ("cepkit python queries", QUERY))
# Conversions Flink adds around the kit's operators (no work of their own worth naming).
GLUE = ("TableToDataStream", "_stream_key_by_map_operator", "DataStreamToTable")


def read_events(path: Path) -> list[dict]:
    """The JSON lines of an engine's stdout log (logs/engine.stdout.jsonl); unreadable lines skipped."""
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def roles(name: str) -> list[str]:
    """Whose code the chain `name` runs: the kit's roles found in it, then `engine` if it has an
    operator of Flink's own (besides the conversions in `GLUE`)."""
    found, engine = [], False
    for part in str(name).split(" -> "):
        kit = next(([role] for key, role in KIT_NAMES if key in part), [])
        if kit:
            found += [r for r in dict.fromkeys(kit) if r not in found]
        elif not any(part.strip().startswith(g) for g in GLUE):
            engine = True
    return found + ([ENGINE] if engine or not found else [])


def _end_ms(e: dict) -> int | None:
    for key in ("ts_ms", "harness_ts_ms"):
        if isinstance(e.get(key), (int, float)):
            return int(e[key])
    return None


def measured_window(events: list[dict], run_start_ms: int | None = None) -> tuple[int | None, int | None]:
    """(start, end) wall ms of the measured part (see the module doc); None for an open side."""
    start = run_start_ms
    if start is None:
        for e in events:
            if e.get("event") == "progress" and (e.get("input_rows") or 0) > 0:
                start = _end_ms(e)
                break
    end = None
    for e in events:
        if e.get("event") in ENDS:
            end = _end_ms(e)
    return start, end


def run_start_of(run_json: Path) -> int | None:
    """The run start (the driver's first release, wall ms) from a harness run.json, if it has one."""
    try:
        doc = read_json_object(run_json, kind="run")
        value = (doc.get("timings") or {}).get("run_start_wall_ms")
        return int(value) if value is not None else None
    except (CepkitError, ValueError, TypeError, AttributeError):
        return None


@dataclass
class VertexSummary:
    name: str
    roles: list[str]
    parallelism: int | None
    points: int = 0                     # steps between samples with fresh figures (the timeline's points)
    busy: float | None = None           # shares of the subtasks' time (0..1), None: not measured
    backpressured: float | None = None
    idle: float | None = None
    busiest_subtask: int | None = None
    busiest_subtask_busy: float | None = None
    records_in_per_s: float | None = None
    records_out_per_s: float | None = None
    # accumulators: subtask -> [busy, backpressured, idle] ms; records in, out; subtask-seconds, wall seconds
    _time: dict = field(default_factory=dict, repr=False)
    _records: list = field(default_factory=lambda: [0, 0, 0.0, 0.0], repr=False)


@dataclass
class CheckpointSummary:
    count: int = 0
    duration_p50_ms: int | None = None
    duration_max_ms: int | None = None
    size_p50: int | None = None
    size_max: int | None = None
    failed: int = 0


@dataclass
class Verdict:
    kind: str               # "bottleneck", "busiest", "headroom", "unknown"
    vertex: str | None
    text: str


@dataclass
class Breakdown:
    start_ms: int | None
    end_ms: int | None
    samples: int                        # samples in the measured part
    jobs: int                           # Flink jobs among them (attempts)
    seconds: float                      # wall time the samples span
    vertices: list[VertexSummary]
    checkpoints: CheckpointSummary
    verdict: Verdict
    # vertex name -> [(s since the first sample, busy share, the busiest subtask's)] (the chart)
    timeline: dict = field(default_factory=dict)


def _nearest_rank(values: list, q: float):
    if not values:
        return None
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]


def _times(v: dict, i: int) -> list | None:
    """Subtask i's [busy, backpressured, idle] ms, or None when one of them is not measured."""
    got = [v.get(k) for k in ("busy_ms", "backpressured_ms", "idle_ms")]
    if not all(isinstance(x, list) and len(x) > i for x in got):
        return None
    out = [x[i] for x in got]
    return None if any(x is None for x in out) else out


def _subtasks(v: dict) -> int:
    return len(v.get("idle_ms") or [])


def _measured(v: dict) -> bool:
    """Every subtask's three times are measured in these figures."""
    n = _subtasks(v)
    return n > 0 and all(_times(v, i) is not None for i in range(n))


def _span(vs: VertexSummary, figures: list[dict]) -> None:
    """Add what one vertex did over one job's samples: per subtask, from its first figures with its
    times measured (Flink reports NaN until the task's first metrics) to its last."""
    for i in range(max(_subtasks(f) for f in figures)):
        times = [t for t in (_times(f, i) for f in figures) if t is not None]
        if len(times) < 2:
            continue            # busy not measured: the subtask adds nothing to the shares
        d = [y - x for x, y in zip(times[0], times[-1])]
        if sum(d) <= 0:
            continue
        acc = vs._time.setdefault(i, [0, 0, 0])
        for k in range(3):
            acc[k] += max(0, d[k])
    complete = [f for f in figures if all(isinstance(f.get(k), list) and f[k] and None not in f[k]
                                          for k in ("records_in", "records_out"))]
    if len(complete) < 2:
        return
    a, b = complete[0], complete[-1]
    deltas = [sum(y - x for x, y in zip(a[k], b[k])) for k in ("records_in", "records_out")]
    if min(deltas) < 0 or len(a["records_in"]) != len(b["records_in"]):
        return
    vs._records[0] += deltas[0]
    vs._records[1] += deltas[1]
    # the records' clock: the subtasks' own time (busy + backpressured + idle is the time between the
    # figures' two fetches), else the samples' wall time
    if _measured(a) and _measured(b) and _subtasks(a) == _subtasks(b):
        task_ms = [sum(_times(b, i)) - sum(_times(a, i)) for i in range(_subtasks(a))]
        if min(task_ms) > 0:
            vs._records[2] += sum(task_ms) / len(task_ms) / 1000.0
            return
    vs._records[3] += (b["_ts"] - a["_ts"]) / 1000.0


def _step(a: dict, b: dict) -> tuple[float, float] | None:
    """(busy share, busiest subtask's) between samples a and b of one vertex, when the figures are
    fresh: the subtasks' time moved at least `FRESH` of the wall time between the samples (the
    JobManager serves its metrics from a fetch made at most every `metrics.fetcher.update-interval`)."""
    wall = b["_ts"] - a["_ts"]
    busy, total, top, n = 0, 0, 0.0, 0
    for i in range(min(_subtasks(a), _subtasks(b))):
        ta, tb = _times(a, i), _times(b, i)
        if ta is None or tb is None:
            continue
        d = [max(0, y - x) for x, y in zip(ta, tb)]
        if sum(d) <= 0:
            return None
        busy, total, n = busy + d[0], total + sum(d), n + 1
        top = max(top, d[0] / sum(d))
    if not n or wall <= 0 or total / n < FRESH * wall:
        return None
    return busy / total, top


def _finish(vs: VertexSummary) -> None:
    if vs._time:
        busy = sum(t[0] for t in vs._time.values())
        bp = sum(t[1] for t in vs._time.values())
        idle = sum(t[2] for t in vs._time.values())
        total = busy + bp + idle
        vs.busy, vs.backpressured, vs.idle = busy / total, bp / total, idle / total
        shares = {i: t[0] / sum(t) for i, t in vs._time.items() if sum(t) > 0}
        vs.busiest_subtask = max(shares, key=shares.get)
        vs.busiest_subtask_busy = shares[vs.busiest_subtask]
    seconds = vs._records[2] + vs._records[3]
    if seconds > 0:
        vs.records_in_per_s = vs._records[0] / seconds
        vs.records_out_per_s = vs._records[1] / seconds


def summarize(events: list[dict], run_start_ms: int | None = None) -> Breakdown:
    """The breakdown of one engine run's stdout events (see the module doc)."""
    start, end = measured_window(events, run_start_ms)
    samples = [e for e in events if e.get("event") == EVENT and isinstance(e.get("ts_ms"), (int, float))
               and (start is None or e["ts_ms"] >= start) and (end is None or e["ts_ms"] <= end)]
    vertices: dict[str, VertexSummary] = {}
    timelines: dict[str, list] = {}
    by_job: dict = {}
    for s in samples:
        by_job.setdefault(s.get("job_id"), []).append(s)
        for v in s.get("vertices") or []:
            name = str(v.get("name"))
            if name not in vertices:        # the job graph's order (sources first)
                vertices[name] = VertexSummary(name, roles(name), v.get("parallelism"))
    first_ts = samples[0]["ts_ms"] if samples else 0
    for job in by_job.values():
        series: dict = {}           # vertex id -> its figures in every sample of the job, in order
        for s in job:
            for v in s.get("vertices") or []:
                series.setdefault(v.get("id"), []).append({**v, "_ts": s["ts_ms"]})
        for figures in series.values():
            vs = vertices[str(figures[-1].get("name"))]
            _span(vs, figures)
            anchor = figures[0]
            for b in figures[1:]:
                if not _measured(anchor):
                    anchor = b
                    continue
                step = _step(anchor, b)
                if step is not None:
                    vs.points += 1
                    timelines.setdefault(vs.name, []).append(
                        (((anchor["_ts"] + b["_ts"]) / 2 - first_ts) / 1000.0, *step))
                    anchor = b
    for vs in vertices.values():
        _finish(vs)
    return Breakdown(start, end, len(samples), len(by_job),
                     (samples[-1]["ts_ms"] - samples[0]["ts_ms"]) / 1000.0 if samples else 0.0,
                     list(vertices.values()), checkpoints(events, samples, start, end),
                     verdict(list(vertices.values())), {k: sorted(v) for k, v in timelines.items()})


def checkpoints(events: list[dict], samples: list[dict], start: int | None, end: int | None) -> CheckpointSummary:
    """The checkpoints triggered in the measured part, from every sample's `new` list (an entry
    may be listed by a sample just after the measured part), and the failures counted in it."""
    seen: dict = {}
    for e in events:
        if e.get("event") != EVENT:
            continue
        for c in ((e.get("checkpoints") or {}).get("new") or []):
            ts = c.get("trigger_ts_ms")
            if c.get("savepoint") or ts is None:
                continue
            if (start is None or ts >= start) and (end is None or ts <= end):
                seen[(e.get("job_id"), c.get("id"))] = c
    durations = [c["duration_ms"] for c in seen.values() if c.get("duration_ms") is not None]
    sizes = [c["size"] for c in seen.values() if c.get("size") is not None]
    failed = 0
    by_job: dict = {}
    for s in samples:
        n = (s.get("checkpoints") or {}).get("failed")
        if n is not None:
            by_job.setdefault(s.get("job_id"), []).append(n)
    for counts in by_job.values():
        failed += max(0, counts[-1] - counts[0])
    return CheckpointSummary(len(seen), _nearest_rank(durations, 0.5), max(durations) if durations else None,
                             _nearest_rank(sizes, 0.5), max(sizes) if sizes else None, failed)


def describe(v: VertexSummary) -> str:
    """Whose code a vertex runs, in words."""
    kit = [r for r in v.roles if r != ENGINE]
    words = {FEED: "the kit's feed", EMITTER: "the kit's emitter",
             JVM_CONNECTOR: "the kit's JVM connector (source or sink, in Flink's JVM)",
             JVM_LOGIC: "the kit's Java logic as user code in Flink's operators",
             QUERY: "the kit's query logic, which sends its own rows", ENGINE: "the engine's own operators"}
    if not kit:
        return words[ENGINE]
    text = " and ".join(words[r] for r in kit)
    return text + (", chained with engine operators" if ENGINE in v.roles else "")


def verdict(vertices: list[VertexSummary]) -> Verdict:
    """The bottleneck, after Flink's guidance (see the module doc)."""
    measured = [v for v in vertices if v.busiest_subtask_busy is not None]
    if not measured:
        return Verdict("unknown", None, "no verdict: no vertex's busy time was measured in the measured part")
    candidates = [v for v in measured if (v.backpressured or 0.0) <= BACKPRESSURE_OK] or measured
    top = max(candidates, key=lambda v: v.busiest_subtask_busy)
    pressed = [v for v in measured if (v.backpressured or 0.0) > BACKPRESSURE_OK]
    busy = f"busiest subtask busy {top.busiest_subtask_busy:.0%}, mean {top.busy:.0%}"
    upstream = ("; backpressured: " + ", ".join(f"'{v.name}' {v.backpressured:.0%}" for v in pressed)
                if pressed else "")
    if top.busiest_subtask_busy >= SATURATED:
        return Verdict("bottleneck", top.name, f"bottleneck: '{top.name}' ({describe(top)}): {busy}{upstream}")
    if top.busiest_subtask_busy >= BUSY:
        return Verdict("busiest", top.name, f"no operator saturated; the busiest is '{top.name}' ({describe(top)}): "
                                            f"{busy}{upstream}")
    return Verdict("headroom", top.name, f"headroom: no operator busy half the time; the busiest is '{top.name}' "
                                         f"({describe(top)}): {busy}{upstream}")
