"""Where a Flink run's time goes, from Flink's own metrics: is the engine or the kit the bottleneck?

The Flink counterpart of batch_breakdown.py. A Flink engine program prints a `flink_metrics` line
every 2 s (flink_runtime/metrics.py: Flink's cumulative busy / backpressured / idle time of every
subtask of every job vertex, records in and out, checkpoints; logs/engine.stdout.jsonl). For each
run directory given (an engine directory, a `cepkit pairs` / `cepkit micro` run directory: every
engine log below it), this prints, over the measured part of the run (from the first sample at or
after the driver's first release, run.json's `run_start_wall_ms`, to the program's `finished`
line: start-up left out, the drain and the end-of-run savepoints in):

- per job vertex (operator chain, in the job graph's order): parallelism, whose code it runs (the
  kit's feed: the `cepkit feed` puller and its trigger; the kit's emitter: `cepkit sink`; the kit's
  query logic that sends its own rows: `cepkit pairs buckets`, `cepkit python queries`; or the
  engine's own operators), its subtasks' mean busy / backpressured / idle share of time, the
  busiest subtask's busy share, records in and out per second (over the network between chains;
  a chain that sends to the harness itself has no records out), and the number of timeline points
  (steps between samples with fresh figures);
- the checkpoints triggered in it: count, p50 / max end-to-end duration, checkpointed size, failures;
- one line of verdict, after Flink's guidance: the bottleneck is the busiest vertex that is not
  backpressured itself (ranked by its busiest subtask; saturated at 80 % busy), and whose code it
  runs (validator/flink_metrics.py has the rules).

With --chart (or --out DIR), a PNG beside each engine log (or in DIR): the shares as bars, and each
vertex's busy share between samples over the run (its busiest subtask dotted).

The shares are exact over the measured part whatever the sampling: they come from the differences
of Flink's counters, whose sum is the subtasks' own time. The JobManager serves metrics from a
fetch made at most every `metrics.fetcher.update-interval` (Flink's default: 10 s; then the
chart's points are ~10 s apart; `--set 'run.spark_conf=["metrics.fetcher.update-interval=1 s"]'`
on `cepkit pairs|micro` sets it for one run). A chain's busy time is the whole chain's: with
`pipeline.operator-chaining.enabled=false` in the same list, every operator is its own vertex,
so the kit's feed shows apart from the SQL operators Flink chains to it (at some cost). A run
shorter than two samples (e.g. `--replay pull` over a small dataset: the quick SF 1 Pairs data
goes through in about a second) gets no shares and no verdict.

    .venv/bin/python benchmarks/flink_breakdown.py RUN [RUN ...] [--chart] [--out DIR] [--json]
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path

from kit.jsonfile import dumps_json
from validator.flink_metrics import EVENT, Breakdown, describe, read_events, run_start_of, summarize

LOG = Path("logs") / "engine.stdout.jsonl"


def engine_logs(path: Path) -> list[Path]:
    """The engine stdout logs a path names: the file itself, DIR/logs/..., or every one below DIR."""
    if path.is_file():
        return [path]
    if (path / LOG).is_file():
        return [path / LOG]
    return sorted(path.rglob(str(LOG)))


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{100 * x:5.1f}%"


def _rate(x: float | None) -> str:
    return "       n/a" if x is None else f"{x:10,.0f}"


def _size(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def print_breakdown(title: str, b: Breakdown) -> None:
    print(f"{title}: {b.samples} samples over {b.seconds:.0f} s"
          + (f" ({b.jobs} Flink jobs: the program was restarted)" if b.jobs > 1 else ""))
    width = max([len("vertex")] + [min(len(v.name), 60) for v in b.vertices])
    print(f"  {'vertex':<{width}}  par  {'busy':>6} {'backpr':>6} {'idle':>6}  {'max sub':>7}  "
          f"{'in/s':>10} {'out/s':>10}  points  code")
    for v in b.vertices:
        name = v.name if len(v.name) <= 60 else v.name[:57] + "..."
        par = "?" if v.parallelism is None else str(v.parallelism)
        print(f"  {name:<{width}}  {par:>3}  {_pct(v.busy)} {_pct(v.backpressured)} {_pct(v.idle)}  "
              f"{_pct(v.busiest_subtask_busy):>7}  {_rate(v.records_in_per_s)} {_rate(v.records_out_per_s)}  "
              f"{v.points:6d}  {describe(v)}")
    c = b.checkpoints
    if c.count:
        print(f"  checkpoints: {c.count}, duration p50 {c.duration_p50_ms:,} ms, max {c.duration_max_ms:,} ms; "
              f"size p50 {_size(c.size_p50)}, max {_size(c.size_max)}; failed {c.failed}")
    else:
        print(f"  checkpoints: none triggered in the measured part; failed {c.failed}")
    print(f"  verdict: {b.verdict.text}")


def draw(b: Breakdown, title: str, out: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown = [v for v in b.vertices if v.busy is not None]
    fig = Figure(figsize=(12, max(3.4, 1.8 + 0.5 * len(shown))), dpi=110)
    FigureCanvasAgg(fig)
    bars, lines = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
    labels = [v.name if len(v.name) <= 40 else v.name[:37] + "..." for v in shown]
    left = [0.0] * len(shown)
    for key, colour in (("busy", "#dc2626"), ("backpressured", "#7c3aed"), ("idle", "#cbd5e1")):
        values = [100 * getattr(v, key) for v in shown]
        bars.barh(labels, values, left=left, color=colour, label=key)
        left = [a + x for a, x in zip(left, values)]
    bars.invert_yaxis()
    bars.set_xlim(0, 100)
    bars.set_xlabel("% of the subtasks' time (mean over subtasks)")
    if shown:
        bars.legend(loc="lower right", fontsize=8)
    bars.set_title("where the time goes", loc="left", fontsize=10)
    for v in shown:
        series = b.timeline.get(v.name) or []
        if series:
            line, = lines.plot([t for t, _, _ in series], [100 * m for _, m, _ in series], marker=".",
                               label=v.name[:40])
            if (v.parallelism or 1) > 1:
                lines.plot([t for t, _, _ in series], [100 * x for _, _, x in series], linestyle=":",
                           color=line.get_color(), label=f"  busiest subtask")
    lines.set_ylim(0, 105)
    lines.set_xlabel("s since the first measured sample")
    lines.set_ylabel("busy % between samples")
    if lines.get_lines():
        lines.legend(fontsize=7, loc="upper left")
    lines.grid(True, color="#e5e7eb")
    fig.suptitle(title + "\n" + textwrap.shorten(b.verdict.text, 170), fontsize=9, x=0.01, ha="left")
    fig.tight_layout()
    fig.savefig(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="a Flink run directory (engine directory, or a cepkit pairs/micro run "
                                            "directory: every engine log below it), or an engine.stdout.jsonl")
    ap.add_argument("--chart", action="store_true", help="also draw flink_breakdown.png beside each engine log's "
                                                         "run directory (or into --out)")
    ap.add_argument("--out", type=Path, default=None, help="directory for the charts (implies --chart)")
    ap.add_argument("--json", action="store_true", help="print the breakdowns as one JSON document instead")
    args = ap.parse_args()
    found = 0
    docs = {}
    for run in args.runs:
        logs = engine_logs(Path(run))
        if not logs:
            print(f"{run}: no logs/engine.stdout.jsonl in it", file=sys.stderr)
        for log in logs:
            # An engine directory holds logs/engine.stdout.jsonl (and run.json); a log given alone stands for itself.
            engine_dir = log.parent.parent if log.parent.name == "logs" else log.parent
            try:
                events = read_events(log)
            except OSError as e:
                print(f"{log}: cannot read: {e}", file=sys.stderr)
                continue
            if not any(e.get("event") == EVENT for e in events):
                print(f"{log}: no {EVENT} lines (a Spark run, or a Flink program from before them)", file=sys.stderr)
                continue
            found += 1
            b = summarize(events, run_start_of(engine_dir / "run.json"))
            title = str(engine_dir) if log.parent.name == "logs" else str(log)
            if args.json:
                d = asdict(b)
                for v in d["vertices"]:
                    v.pop("_time", None), v.pop("_records", None)
                docs[title] = d
            else:
                print_breakdown(title, b)
                print()
            if args.chart or args.out is not None:
                out_dir = args.out if args.out is not None else engine_dir
                out_dir.mkdir(parents=True, exist_ok=True)
                name = "flink_breakdown.png" if args.out is None else \
                    "flink_breakdown-" + "-".join(p for p in Path(title).resolve().parts[-3:] if p != "/") + ".png"
                draw(b, title, out_dir / name)
                print(f"chart: {out_dir / name}", file=sys.stderr)
    if args.json:
        print(dumps_json(docs, indent=1), end="")
    if not found:
        print("no Flink metrics found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
