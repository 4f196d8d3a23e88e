"""Maximum sustainable throughput of one microbenchmark workload (seed 001, Karimov et al. 4-5).

A rate is *sustainable* when a fixed-rate run at it completes (the harness never saw the backlog
above q^b for `backlog_grace_s`) and the engine keeps up in the steady state: the largest backlog
sampled over the last `tail_fraction` of the release interval stays at or below q^a, and the
median event-time latency of the outputs arriving in that tail stays at or below `qb_s` seconds.
Thresholds are in seconds of input at the step's rate (q^a = qa_s x rate, q^b = qb_s x rate), so
one setting fits every rate. The latency bound sees what the driver's backlog cannot: events an
engine has pulled but queues inside itself (Flink's feed reads up to 65,536 events a poll, which
then wait in its network buffers: measured in a 5 s step at 50,000 ev/s, a tail backlog of 15,067
events, 0.3 s of input, beside a 1,464 ms median latency). It is q^b, not q^a: a micro-batch
engine's answers wait a batch or two by design (Spark's median at its sustainable rates was
1-2.6 s), which is a steady state, not a queue growing; an engine whose typical answer is more
than q^b late holds more than q^b of input somewhere. The search:

1. starts at the workload's nominal rate (or `start_rate_eps`) and multiplies it by `growth`
   (2) while sustainable (divides while not) until it brackets the limit, within
   [min_rate_eps, max_rate_eps];
2. bisects (geometric mean) between the highest sustainable and lowest unsustainable rate until
   they are within `precision` (1.15 = 15 %) or `max_steps` runs were made;
3. confirms at 90 % of the found rate. A failed confirmation becomes the lowest unsustainable
   rate and the search goes on below it (bisecting down to the highest sustainable step under
   it, or exploring down) and confirms again, while `max_steps` allow; a search that runs out of
   steps before a confirmation holds reports no rate (the step log says why).

Every step is a full run (fresh dataset at the step's rate, constant profile, `duration_s` long)
in its own directory, validated unless `validate_steps` is off; each step's verdict and the
numbers behind it go to `search.jsonl` as they happen, the result to `search.json`.
A step whose engine failed before it read a single event (a program the engine refuses) ends the
search with an error: the rate played no part, so no rate can be judged from it.

A found rate moves from search to search as any measurement does. `repeat_search` runs the same
search K times over the same inputs (the same workload, seeds and settings: every step's dataset
is generated again from the same seed), each in `<workload>/run-i/`, and gives a
`RepeatedSearch`: each search's found rate, their median and range over the confirmed searches
(specs/VALIDATION.md, "Repetitions"), and a representative search whose figures stand for the
workload in the suite's summary and report.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.bound import judge
from kit.errors import CepkitError
from kit.jsonfile import dumps_json, read_json_object
from kit.workload import Load, Workload

Stage = Callable[[str], None]


@dataclass(frozen=True)
class SearchConfig:
    duration_s: float = 20.0
    qa_s: float = 2.0               # steady-state backlog limit, seconds of input
    qb_s: float = 10.0              # hard backlog limit (the harness stops the run), seconds of input
    tail_fraction: float = 0.3
    min_rate_eps: float = 100.0
    max_rate_eps: float = 2_000_000.0
    precision: float = 1.15
    growth: float = 2.0             # rate factor per exploring step
    start_rate_eps: float | None = None     # None: the workload's own rate
    # Per workload (by name): where an earlier search ended, so a rerun spends its steps near it.
    start_rates: tuple[tuple[str, float], ...] = ()
    max_steps: int = 8
    confirm_fraction: float = 0.9
    validate_steps: bool = True

    def __post_init__(self) -> None:
        for name in ("duration_s", "qa_s", "qb_s", "min_rate_eps", "max_rate_eps"):
            if not getattr(self, name) > 0:
                raise CepkitError(f"search: {name} must be > 0, got {getattr(self, name)!r}")
        if not self.qa_s <= self.qb_s:
            raise CepkitError(f"search: qa_s ({self.qa_s}) must not exceed qb_s ({self.qb_s})")
        if not 0 < self.tail_fraction <= 1 or not 0 < self.confirm_fraction <= 1:
            raise CepkitError("search: tail_fraction and confirm_fraction must be in (0, 1]")
        if self.start_rate_eps is not None and not self.start_rate_eps > 0:
            raise CepkitError(f"search: start_rate_eps must be > 0, got {self.start_rate_eps!r}")
        if any(not rate > 0 for _, rate in self.start_rates):
            raise CepkitError(f"search: start rates must be > 0, got {dict(self.start_rates)}")
        if not self.precision > 1 or not self.growth > 1:
            raise CepkitError(f"search: precision and growth must be > 1, got {self.precision!r} and {self.growth!r}")
        if self.max_steps < 2:
            raise CepkitError(f"search: max_steps must be >= 2 (a step and its confirmation), got {self.max_steps!r}")


@dataclass(frozen=True)
class Step:
    n: int
    rate_eps: float
    purpose: str                # explore, bisect, confirm
    sustainable: bool
    reason: str
    status: str
    verdict: str
    tail_backlog: int | None    # max backlog over the steady tail, events
    qa_events: int
    p50_ms: int | None
    p99_ms: int | None
    peak_rss_mib: float | None
    mean_cpu_percent: float | None
    run_dir: str
    state_mib: float | None = None  # peak state-store memory of Spark's stateful operators
    latency_count: int | None = None    # the latencies behind p50/p99 (validated steps)
    p99_ci_low_ms: int | None = None    # the p99's 95 % interval; None on an open side
    p99_ci_high_ms: int | None = None
    tail_p50_ms: int | None = None      # median event-time latency of the outputs in the steady tail
    connectors: dict | None = None      # where events entered and answers left (run.json `connectors`)
    bound: dict | None = None           # what bounded the step (harness/bound.py; run.json `bound`)
    work: dict | None = None            # where the per-event work ran (run.json plan `work`)


@dataclass(frozen=True)
class SearchResult:
    workload: str
    sustainable_eps: float | None   # the confirmed rate; None: no confirmation held
    confirmed: bool
    steps: tuple[Step, ...]

    def best_step(self) -> Step | None:
        """The step at the confirmed rate, or (unconfirmed) the fastest step that kept up."""
        ok = [s for s in self.steps if s.sustainable]
        if self.sustainable_eps is not None:
            ok = [s for s in ok if s.rate_eps <= self.sustainable_eps]
        return max(ok, key=lambda s: s.rate_eps) if ok else None

    def confirm_step(self) -> Step | None:
        """The confirming run that kept up (at confirm_fraction of the found rate), or None."""
        done = [s for s in self.steps if s.purpose == "confirm" and s.sustainable]
        return done[-1] if done else None

    def lowest_failing_eps(self) -> float | None:
        """The lowest rate found unsustainable (None: every rate tried was sustainable)."""
        failed = [s.rate_eps for s in self.steps if not s.sustainable]
        return min(failed) if failed else None

    def first_failing(self) -> Step | None:
        """The first step that did not keep up: its verdict says what limits the found rate."""
        failed = [s for s in self.steps if not s.sustainable]
        return failed[0] if failed else None

    def bound_text(self) -> str:
        """What bounded the search, as its first failing step's verdict says (`-`: none failed or
        it was not judged)."""
        step = self.first_failing()
        return str((step.bound or {}).get("label", "-")) if step is not None else "-"

    def kit_bound(self) -> bool:
        """Whether the found rate is the kit's limit rather than the engine's."""
        step = self.first_failing()
        return step is not None and (step.bound or {}).get("bound") == "kit"


def events_pulled(engine_dir: Path) -> int | None:
    """How many events the engine read from the feed in the run (None: the run left no record)."""
    try:
        return int(read_json_object(engine_dir / "logs" / "driver.json")["pulled"])
    except (CepkitError, KeyError, ValueError, TypeError):
        return None


def tail_backlog(engine_dir: Path, tail_fraction: float) -> int | None:
    """Largest backlog sampled in the last `tail_fraction` of the release interval."""
    try:
        run = read_json_object(engine_dir / "run.json", kind="run")
        start, end = run["timings"]["run_start_wall_ms"], run["timings"].get("driver_finished_ms")
        with open(engine_dir / "metrics" / "backlog.csv", newline="") as fh:
            rows = [(int(r["ts_ms"]), int(r["backlog"])) for r in csv.DictReader(fh)]
    except (CepkitError, OSError, KeyError, ValueError, TypeError):
        return None
    end = end or (rows[-1][0] if rows else None)
    if start is None or end is None:
        return None
    cut = end - (end - start) * tail_fraction
    tail = [b for ts, b in rows if cut <= ts <= end]
    return max(tail) if tail else None


def tail_latency_ms(engine_dir: Path, tail_fraction: float) -> int | None:
    """Median event-time latency (arrivalTS - inputTS) of the outputs that arrived in the last
    `tail_fraction` of the release interval; None without such outputs."""
    import numpy as np

    from kit.outputlog import ARRIVAL_TS
    from kit.workload import INPUT_TS
    from validator.outputlog import read_output_log

    try:
        run = read_json_object(engine_dir / "run.json", kind="run")
        start, end = run["timings"]["run_start_wall_ms"], run["timings"].get("driver_finished_ms")
        log = read_output_log(engine_dir / "outputs", lazy=True)
        if start is None or end is None:
            return None
        cut = end - (end - start) * tail_fraction
        lat = []
        # File by file and two columns only: a long step's answers need not fit in memory.
        for name in log.files:
            for df in log.iter_stream(name, (ARRIVAL_TS, INPUT_TS)):
                if len(df) and INPUT_TS in df.columns:
                    arrival = df[ARRIVAL_TS].to_numpy(np.int64)
                    mask = (arrival >= cut) & (arrival <= end) & df[INPUT_TS].notna().to_numpy()
                    lat.append(arrival[mask] - df[INPUT_TS].to_numpy()[mask].astype(np.int64))
    except (OSError, KeyError, ValueError, TypeError, CepkitError):
        return None
    values = np.concatenate(lat) if lat else np.array([], dtype=np.int64)
    return int(np.median(values)) if len(values) else None


def _step_bound(bound: dict | None, sustainable: bool) -> dict | None:
    """A step's verdict (harness/bound.py) without its per-process list (run.json keeps that). A
    run that completed kept up as the harness sees it (its backlog never passed q^b); the search
    asks more of a step (q^a over the steady tail), so a step it finds unsustainable is judged again
    as one that fell behind."""
    if not bound:
        return None
    if not sustainable and bound.get("bound") == "none" and "cpu_percent" in bound:
        bound = {**bound, **judge(bound["cpu_percent"], bound.get("processes") or [], bound.get("cores") or 1,
                                  kept_up=False, machine_cpu_percent=bound.get("machine_cpu_percent")).to_dict()}
    return {k: v for k, v in bound.items() if k != "processes"}


def at_rate(workload: Workload, rate_eps: float, duration_s: float) -> Workload:
    """The workload replayed at a constant rate; the rate is per stream, as in the Load spec."""
    return dataclasses.replace(workload, load=Load("constant", float(rate_eps), int(duration_s * 1000)))


def find_sustainable_rate(run_step, workload: Workload, out_dir: Path, cfg: SearchConfig = SearchConfig(),
                          stage: Stage = lambda s: None) -> SearchResult:
    """`run_step(workload, step_dir, run_changes, validate) -> WorkloadResult` runs one fixed-rate step
    (cepkit_app/pipelines/micro.py: run_workload); the search decides which rates to try."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=False)
    steps: list[Step] = []
    log = out_dir / "search.jsonl"

    def run(rate: float, purpose: str) -> Step:
        n = len(steps) + 1
        run_changes = {"max_backlog_s": cfg.qb_s, "backlog_grace_s": 3.0, "drain_timeout_s": 60.0}
        step_dir = out_dir / f"step-{n:02d}-{purpose}-{rate:.0f}eps"
        stage(f"{workload.name}: step {n} ({purpose}) at {rate:,.0f} ev/s")
        res = run_step(at_rate(workload, rate, cfg.duration_s), step_dir, run_changes,
                       cfg.validate_steps or purpose == "confirm")
        qa = max(1, int(cfg.qa_s * rate * len(workload.dataset.stream_names)))
        tail = tail_backlog(step_dir / "engine", cfg.tail_fraction)
        tail_ms = tail_latency_ms(step_dir / "engine", cfg.tail_fraction)
        qb_ms = int(cfg.qb_s * 1000)
        if res.status != "completed":
            ok, reason = False, f"run {res.status}: {res.message}"
        elif tail is None:
            ok, reason = False, "no backlog samples in the steady tail"
        elif tail > qa:
            ok, reason = False, f"steady-state backlog {tail:,} > q^a = {qa:,} events"
        elif tail_ms is not None and tail_ms > qb_ms:
            ok, reason = False, (f"steady-state median latency {tail_ms:,} ms > q^b = {qb_ms:,} ms "
                                 f"(events queued inside the engine; backlog {tail:,} events)")
        elif res.verdict == "FAILED":
            ok, reason = False, "wrong results"
        else:
            ok, reason = True, f"steady-state backlog {tail:,} <= q^a = {qa:,} events"
        step = Step(n, rate, purpose, ok, reason, res.status, res.verdict, tail, qa, res.p50_ms, res.p99_ms,
                    res.peak_rss_mib, res.mean_cpu_percent, str(step_dir), res.state_mib,
                    res.latency_count, res.p99_ci_low_ms, res.p99_ci_high_ms, tail_ms,
                    getattr(res, "connectors", None), _step_bound(getattr(res, "bound", None), ok),
                    getattr(res, "work", None))
        steps.append(step)
        with open(log, "a") as fh:
            fh.write(dumps_json(dataclasses.asdict(step), indent=None))
        if res.status == "failed" and events_pulled(step_dir / "engine") == 0:
            # The engine failed before it read an event (a program Flink's planner refuses, a
            # missing jar): the rate played no part, so no other rate can be judged either.
            raise CepkitError(f"{workload.name}: step {n} at {rate:,.0f} ev/s: the engine read no event: "
                              f"{res.message} (see {step_dir / 'engine' / 'logs'})")
        judged = "" if ok or not step.bound else f"; bounded by: {step.bound.get('label')}: {step.bound.get('why')}"
        stage(f"{workload.name}: {rate:,.0f} ev/s {'sustainable' if ok else 'NOT sustainable'} ({reason}{judged})")
        return step

    lo, hi = None, None             # highest sustainable, lowest unsustainable
    start = dict(cfg.start_rates).get(workload.name) or cfg.start_rate_eps or workload.load.rate_eps
    rate = min(max(start, cfg.min_rate_eps), cfg.max_rate_eps)
    while True:
        lo, hi = _bracket(run, cfg, steps, lo, hi, rate)
        if lo is None or len(steps) >= cfg.max_steps:
            return write_search(out_dir, SearchResult(workload.name, None, False, tuple(steps)))
        confirm = run(lo * cfg.confirm_fraction, "confirm")
        if confirm.sustainable:
            return write_search(out_dir, SearchResult(workload.name, lo, True, tuple(steps)))
        # `lo` passed by a margin the confirmation did not repeat: the limit lies below the
        # confirmation's rate, so the search goes on beneath it while steps remain.
        stage(f"{workload.name}: the confirmation at {confirm.rate_eps:,.0f} ev/s failed; searching below it")
        hi = confirm.rate_eps
        lo = max((s.rate_eps for s in steps if s.sustainable and s.rate_eps < hi), default=None)
        rate = max(hi / cfg.growth, cfg.min_rate_eps)
        if lo is None and rate >= hi:                   # the floor itself failed: nothing below to try
            return write_search(out_dir, SearchResult(workload.name, None, False, tuple(steps)))


def _bracket(run, cfg: SearchConfig, steps: list, lo: float | None, hi: float | None, rate: float
             ) -> tuple[float | None, float | None]:
    """Explore from `rate` (x growth up while sustainable, / growth down while not) until the
    limit is bracketed, then bisect; stops one step short of `max_steps` (the confirmation's)."""
    while len(steps) < cfg.max_steps - 1:
        if lo is not None and hi is not None:
            if hi / lo <= cfg.precision:
                break
            rate, purpose = math.sqrt(lo * hi), "bisect"
        else:
            purpose = "explore"
        if run(rate, purpose).sustainable:
            lo = rate
            if hi is None:
                if rate >= cfg.max_rate_eps:
                    break
                rate = min(rate * cfg.growth, cfg.max_rate_eps)
        else:
            hi = rate
            if lo is None:
                if rate <= cfg.min_rate_eps:
                    break
                rate = max(rate / cfg.growth, cfg.min_rate_eps)
    return lo, hi


def write_search(out_dir: Path, result: SearchResult) -> SearchResult:
    """`out_dir`/search.json: the search's result and every step (written whole or not at all)."""
    data = {"kind": "cepkit.sustainable-search", "schema_version": 1, "workload": result.workload,
            "sustainable_eps": result.sustainable_eps, "confirmed": result.confirmed,
            "steps": [dataclasses.asdict(s) for s in result.steps]}
    tmp = out_dir / ".search.json.tmp"
    tmp.write_text(dumps_json(data))
    tmp.replace(out_dir / "search.json")
    return result


@dataclass(frozen=True)
class RepeatedSearch:
    """K searches of one workload over the same inputs (`repeat_search`), `dirs[i]` holding
    `searches[i]` (names inside the workload's directory: run-1, run-2, ...).

    It stands in for a SearchResult in the suite's summary and report: `sustainable_eps`,
    `confirmed`, `steps` and `best_step()` are those of the representative search, the confirmed
    search whose rate is the median's (the lower of the two middle ones for an even count, so it
    is a search that was made); the first search when none was confirmed. The spread of the found
    rates is `spread()`."""

    workload: str
    searches: tuple[SearchResult, ...]
    dirs: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.searches or len(self.searches) != len(self.dirs):
            raise CepkitError(f"repeated search of {self.workload}: need one directory per search, got "
                              f"{len(self.searches)} searches and {len(self.dirs)} directories")

    @property
    def representative(self) -> int:
        """The index of the representative search (class docstring)."""
        found = sorted((s.sustainable_eps, i) for i, s in enumerate(self.searches)
                       if s.confirmed and s.sustainable_eps is not None)
        return found[(len(found) - 1) // 2][1] if found else 0

    @property
    def _rep(self) -> SearchResult:
        return self.searches[self.representative]

    @property
    def sustainable_eps(self) -> float | None:
        return self._rep.sustainable_eps

    @property
    def confirmed(self) -> bool:
        return self._rep.confirmed

    @property
    def all_confirmed(self) -> bool:
        return all(s.confirmed for s in self.searches)

    @property
    def steps(self) -> tuple[Step, ...]:
        return self._rep.steps

    def best_step(self) -> Step | None:
        return self._rep.best_step()

    def lowest_failing_eps(self) -> float | None:
        return self._rep.lowest_failing_eps()

    def first_failing(self) -> Step | None:
        return self._rep.first_failing()

    def bound_text(self) -> str:
        return self._rep.bound_text()

    def kit_bound(self) -> bool:
        return self._rep.kit_bound()

    def spread(self):
        """The median and range of the confirmed searches' rates (validator.compare_runs.Spread)."""
        from validator.compare_runs import spread

        return spread([s.sustainable_eps for s in self.searches if s.confirmed and s.sustainable_eps is not None],
                      len(self.searches))

    def to_dict(self) -> dict:
        """The summary row's `repeat` object: each search, and the representative's directory."""
        return {"searches": [{"run": d, "sustainable_eps": s.sustainable_eps, "confirmed": s.confirmed,
                              "steps": len(s.steps)} for d, s in zip(self.dirs, self.searches)],
                "search_dir": self.dirs[self.representative]}


def repeat_search(run_step, workload: Workload, out_dir: Path, cfg: SearchConfig, repeat: int,
                  stage: Stage = lambda s: None) -> RepeatedSearch:
    """`find_sustainable_rate` `repeat` times over the same inputs, the i-th search in
    `out_dir/run-i` (each search's own search.json and steps there)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise CepkitError(f"search: repeat must be a whole number >= 1, got {repeat!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=False)
    searches, dirs = [], []
    for k in range(1, repeat + 1):
        stage(f"{workload.name}: search {k} of {repeat}")
        dirs.append(f"run-{k}")
        searches.append(find_sustainable_rate(run_step, workload, out_dir / dirs[-1], cfg, stage))
    result = RepeatedSearch(workload.name, tuple(searches), tuple(dirs))
    sp = result.spread()
    stage(f"{workload.name}: {sp.text(unit='ev/s', noun=('search', 'searches'), counted='confirmed')}")
    return result


@dataclass(frozen=True)
class LambdaChoice:
    """The lambda of an adaptivity run and how it was chosen (`rule`: "cpu" or "capacity")."""

    lambda_eps: float
    rule: str
    note: str


def choose_lambda(result: SearchResult, fraction: float = 0.75, cpu_capacity_percent: float = 200.0
                  ) -> LambdaChoice | None:
    """Thesis 4.5.5: lambda is the rate at which the engine uses `fraction` of the machine's CPU
    (`cpu_capacity_percent`: 100 per core). It is read off the search's sustainable steps, whose
    mean CPU (whole process tree, per-core percent) is interpolated linearly in the rate; never
    above the sustainable rate. An engine that falls behind before it reaches that CPU share is
    bound by something else (for a micro-batch engine: batch scheduling and the Python hand-offs),
    and lambda is then `fraction` x its sustainable rate instead (specs/SEMANTICS.md, adaptivity).
    None when the search found no sustainable rate."""
    if not 0 < fraction <= 1 or not cpu_capacity_percent > 0:
        raise CepkitError(f"calibration: need 0 < fraction <= 1 and a positive CPU capacity, got {fraction}, "
                          f"{cpu_capacity_percent}")
    if result.sustainable_eps is None:
        return None
    target = fraction * cpu_capacity_percent
    points = sorted((s.rate_eps, s.mean_cpu_percent) for s in result.steps
                    if s.sustainable and s.mean_cpu_percent is not None and s.rate_eps <= result.sustainable_eps)
    fallback = fraction * result.sustainable_eps
    if not points or points[-1][1] < target:
        most = max((c for _, c in points), default=None)
        used = "no CPU figures" if most is None else f"at most {most:.0f} % CPU"
        return LambdaChoice(round(fallback, 1), "capacity",
                            f"{used} of {cpu_capacity_percent:.0f} % while sustainable, below the {target:.0f} % "
                            f"target: lambda = {fraction:g} x the sustainable {result.sustainable_eps:,.0f} ev/s")
    prev_rate, prev_cpu = 0.0, 0.0      # no load, no CPU: the line through the origin below the first step
    for rate, cpu in points:
        if cpu >= target:
            lam = prev_rate + (rate - prev_rate) * (target - prev_cpu) / max(cpu - prev_cpu, 1e-9)
            break
        prev_rate, prev_cpu = rate, cpu
    lam = min(lam, result.sustainable_eps)
    return LambdaChoice(round(lam, 1), "cpu", f"{target:.0f} % of {cpu_capacity_percent:.0f} % CPU at "
                                              f"{lam:,.0f} ev/s, interpolated between the search's steps")


def calibrated(workload: Workload, lambda_eps: float) -> Workload:
    """A burst workload (adaptivity profile) with its lambda set (see choose_lambda)."""
    if workload.load.profile != "adaptivity":
        raise CepkitError(f"workload {workload.name}: only adaptivity-profile workloads are calibrated")
    if not lambda_eps > 0:
        raise CepkitError(f"calibration: need a positive lambda, got {lambda_eps}")
    return dataclasses.replace(workload, load=Load("adaptivity", round(lambda_eps, 1), workload.load.duration_ms))
