"""Repetitions of a Pairs run (`cepkit pairs --repeat K`): the very same inputs K times, one summary.

A quick benchmark figure moves from run to run (quick SF=256 on Spark: pscore 10,358 to 16,217 in
four runs), so one run is one sample, not a result. A repetition generates the dataset and the
strategies once (its first run does, as any Pairs run), then runs those same inputs again, each
run an ordinary Pairs run directory (`cepkit compare` reads each), with the dataset's sha256 check
skipped after the first. It sums them up by the median and the range (min-max) of the MarketOrder
p99, pscore and throughput over the runs that completed and PASSED (specs/VALIDATION.md,
"Repetitions"); the maths and the reading of a run's figures are the validator's
(validator.compare_runs: `spread`, `pairs_figures`), so `cepkit compare` sums up alike.

Layout (`RepeatPlan`):

    repeat-<stem>/run-1 ... run-K             one engine
    repeat-<stem>/<engine>/run-1 ... run-K    several engines (--engine spark,flink): run i of
                                              every engine, then run i + 1, so a drift of the
                                              machine over time falls on every engine alike
    repeat-<stem>/repeat.json, repeat.md      the summary (kind cepkit.repeat, schema version 1),
                                              written atomically after every run: an interrupted
                                              repetition keeps the summary of the runs it made

`run_repeats(plan, inputs, run_one)` drives the runs (`run_one` makes one Pairs run: the command
line's, with its progress and printing, or benchmarks/pairs_sweep.py's); `write_repeat_summary`
writes repeat.json and repeat.md; `repeat_text(doc)` is the table and median lines the command
prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from kit.atomic import atomic_write, check_parent
from kit.errors import CepkitError
from kit.jsonfile import dumps_json
from validator.compare_runs import REPEAT_DOC, REPEAT_KIND, REPEAT_SCHEMA_VERSION, Spread, pairs_figures, spreads
from validator.order_stats import Percentile, percentile_text

SUMMARY_MD = "repeat.md"
RULE = ("median and range (min–max) over the runs that completed and PASSED; the median of an even count is the "
        "mean of its two middle values; no such run: no median (specs/VALIDATION.md, Repetitions)")
# The figures the command prints a median line for: (key in repeat.json, words, format, unit).
LINES = (("p99_ms", "MarketOrder p99", lambda v: f"{v:,.0f}", "ms"),
         ("pscore", "pscore", lambda v: f"{v:,.2f}", ""),
         ("throughput_eps", "throughput", lambda v: f"{v:,.0f}", "ev/s"))


# The most runs one `--repeat` asks (each run takes minutes): a count beyond is refused before
# anything is sized by it (a plan of a billion runs once ended in a MemoryError).
MAX_REPEAT = 1000


def repeat_count(value, option: str = "--repeat") -> int:
    """The number of runs of `--repeat VALUE`: a whole number from 1 to MAX_REPEAT (a CepkitError
    naming `option` otherwise), checked before anything is sized by it."""
    text = str(value).strip()
    k = None
    if len(text) <= 20:         # int() of a string of a million digits is slow, not an answer
        try:
            k = int(text)
        except ValueError:
            k = None
    shown = value if len(str(value)) <= 40 else f"{str(value)[:40]}..."
    if (k is None and len(text) <= 20) or (k is not None and k < 1) or isinstance(value, bool):
        raise CepkitError(f"{option}: must be a whole number >= 1, got {shown!r}")
    if k is None or k > MAX_REPEAT:
        raise CepkitError(f"{option}: at most {MAX_REPEAT} runs, got {shown!r}")
    return k


@dataclass(frozen=True)
class RepeatPlan:
    """Where the runs of a repetition go: `repeat` runs of each engine of `engines` under
    `parent`, a directory that must not exist yet."""

    parent: Path
    repeat: int
    engines: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.repeat, bool) or not isinstance(self.repeat, int) or self.repeat < 1:
            raise CepkitError(f"repeat: need a whole number of runs >= 1, got {self.repeat!r}")
        if not self.engines or len(set(self.engines)) != len(self.engines):
            raise CepkitError(f"repeat: need one or more distinct engines, got {', '.join(self.engines) or 'none'}")
        if Path(self.parent).exists():
            raise CepkitError(f"{self.parent}: directory already exists; refusing to overwrite it")

    @property
    def several(self) -> bool:
        return len(self.engines) > 1

    def run_dir(self, engine: str, i: int) -> Path:
        return Path(self.parent) / (f"{engine}/run-{i}" if self.several else f"run-{i}")

    def order(self) -> list[tuple[int, str]]:
        """(run number, engine) in the order they run: run 1 of every engine, then run 2, ..."""
        return [(i, engine) for i in range(1, self.repeat + 1) for engine in self.engines]


@dataclass(frozen=True)
class RunInputs:
    """The inputs of one run of a repetition: a given dataset and strategies (None: generate
    them), the strategy limit, and whether to check the dataset's sha256 first."""

    data_dir: Path | None = None
    strategies_file: Path | None = None
    strategy_limit: int | None = None
    verify: bool = True

    def reused(self, first_run: Path) -> "RunInputs":
        """The inputs of every later run: the first run's dataset (or the given one) and its
        strategies as run (already limited), not checked again."""
        data = self.data_dir if self.data_dir is not None else Path(first_run) / "data"
        return RunInputs(data, Path(first_run) / "strategies.xml", None, False)


RunOne = Callable[[str, int, Path, RunInputs], object]


def run_repeats(plan: RepeatPlan, inputs: RunInputs, run_one: RunOne, *,
                stage: Callable[[str], None] = lambda s: None) -> dict:
    """Make every run of `plan` in its order: `run_one(engine, i, run_dir, inputs)` makes one Pairs
    run into `run_dir`; the first one run gets `inputs`, every later one the first's
    (`RunInputs.reused`). After each run, repeat.json and repeat.md are rewritten. Returns the
    last repeat.json document. A run that raises ends the repetition (the summary holds the runs
    made before it)."""
    check_parent(plan.parent)
    Path(plan.parent).mkdir(parents=True)
    done: list[tuple[str, int, Path]] = []
    doc: dict = {}
    for i, engine in plan.order():
        run_dir = plan.run_dir(engine, i)
        stage(f"run {i} of {plan.repeat}" + (f" on {engine}" if plan.several else ""))
        run_one(engine, i, run_dir, inputs if not done else inputs.reused(done[0][2]))
        done.append((engine, i, run_dir))
        doc = write_repeat_summary(plan, done)
    return doc


def repeat_document(plan: RepeatPlan, done: Sequence[tuple[str, int, Path]], generated: str | None = None) -> dict:
    """The repeat.json document of the runs `done` ((engine, run number, run directory), in the
    order they ran): each run's figures, then per engine the spread of each figure."""
    parent = Path(plan.parent)
    figures = []
    for engine, i, run_dir in done:
        f = pairs_figures(run_dir)
        if f.engine != engine:
            raise CepkitError(f"{run_dir}: ran on {f.engine}, but the repetition asked for {engine}")
        figures.append((i, f))
    per_engine = []
    for engine in plan.engines:
        mine = [f for _, f in figures if f.engine == engine]
        s = spreads(mine)
        per_engine.append({"engine": engine, "runs": len(mine), "counted": sum(f.counted for f in mine),
                           "passed": bool(mine) and all(f.counted for f in mine),
                           **{key: sp.to_dict() for key, sp in s.items()}})
    return {
        "kind": REPEAT_KIND, "schema_version": REPEAT_SCHEMA_VERSION, "benchmark": "pairs",
        "generated": generated or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "repeat": plan.repeat, "engines": list(plan.engines), "rule": RULE,
        "complete": len(done) == plan.repeat * len(plan.engines),
        "passed": len(done) == plan.repeat * len(plan.engines) and all(f.counted for _, f in figures),
        "runs": [{"index": i, **f.to_dict(base=parent)} for i, f in figures],
        "spread": per_engine,
        "notes": [n for _, f in figures for n in f.notes],
    }


def write_repeat_summary(plan: RepeatPlan, done: Sequence[tuple[str, int, Path]], generated: str | None = None) -> dict:
    """Write repeat.json and repeat.md into the repetition directory, atomically (each replaces
    the previous summary of fewer runs); returns the document."""
    doc = repeat_document(plan, done, generated)
    atomic_write(Path(plan.parent) / REPEAT_DOC, dumps_json(doc), overwrite=True)
    atomic_write(Path(plan.parent) / SUMMARY_MD, f"# Repeated Pairs runs\n\n{repeat_text(doc)}", overwrite=True)
    return doc


def _fmt(v, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def _p99_cell(run: dict) -> str:
    """A run's MarketOrder p99 with its order count and interval (validator.order_stats' words)."""
    if run.get("p99_ms") is None:
        return "–"
    p = Percentile("p99", run["orders"], run["p99_ms"], run["p99_ci_low_ms"], run["p99_ci_high_ms"])
    return f"{p.n:,} orders: {percentile_text(p, short=True)}"


def _outcome(run: dict) -> str:
    """What kept a run from counting: 'FAILED', 'NOT VALIDATED (unsustainable)'."""
    return run["verdict"] if run["status"] == "completed" else f"{run['verdict']} ({run['status']})"


def repeat_text(doc: dict) -> str:
    """A repeat.json document as text: one table row per run, then per engine one line each for
    the median and range of the MarketOrder p99, pscore and throughput, and what counted."""
    head = ("run", "engine", "verdict", "status", "MarketOrder p99 (orders: 95 % CI)", "pscore",
            "throughput ev/s", "mean CPU %", "peak RSS MiB")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc["runs"]:
        lines.append(f"| {r['run_dir']} | {r['engine']} | {r['verdict']} | {r['status']} | {_p99_cell(r)} | "
                     f"{_fmt(r['pscore'], ',.2f')} | {_fmt(r['throughput_eps'], ',.0f')} | "
                     f"{_fmt(r['mean_cpu_percent'], ',.0f')} | {_fmt(r['peak_rss_mib'], ',.0f')} |")
    lines.append("")
    for g in doc["spread"]:
        prefix = f"{g['engine']}: " if len(doc["spread"]) > 1 else ""
        for key, words, fmt, unit in LINES:
            lines.append(f"{prefix}{words} {Spread.from_dict(g[key]).text(fmt, unit)}")
        left_out = [f"{r['run_dir']} {_outcome(r)}" for r in doc["runs"]
                    if r["engine"] == g["engine"] and not r["counted"]]
        if left_out:
            lines.append(f"{prefix}not counted: {', '.join(left_out)}")
    if not doc.get("complete", True):
        lines.append(f"incomplete: {len(doc['runs'])} of the {doc['repeat'] * len(doc['engines'])} runs asked")
    lines.append("Median and range over the runs that completed and PASSED (specs/VALIDATION.md, Repetitions).")
    return "\n".join(lines) + "\n"
