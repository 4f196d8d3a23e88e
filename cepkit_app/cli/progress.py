"""A rich progress bar for long work, exposed as a `progress(done, total)` callback."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)


PLAIN_EVERY_S = 15.0


def console() -> Console:
    return Console(stderr=True, soft_wrap=True)


@contextlib.contextmanager
def progress_bar(description: str) -> Iterator[Callable[[int, float], None]]:
    """Yields a callback; the bar shows done/total (totals may be estimates, e.g. expected events)."""
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=console(), transient=False, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: float) -> None:
            bar.update(task, completed=done, total=max(float(total), float(done)))

        yield update


@contextlib.contextmanager
def run_progress() -> Iterator[Callable[[object], None]]:
    """A live line for an engine run: simulated time as the bar, then phase, input rate, backlog,
    outputs and the p99 latency so far. Yields the harness's on_progress callback."""
    tty = sys.stderr.isatty()
    last_plain = [-PLAIN_EVERY_S]
    with Progress(TextColumn("[bold]engine run"), BarColumn(), TextColumn("{task.fields[sim]}"),
                  TextColumn("{task.fields[line]}"), TimeElapsedColumn(), console=console(), transient=False,
                  disable=not tty) as bar:
        task = bar.add_task("run", total=None, sim="", line="")

        def update(progress) -> None:
            snap = progress.snapshot
            outputs = sum((snap.outputs or {}).values())
            p99 = "-" if snap.latency_p99_ms is None else f"{snap.latency_p99_ms:,.0f} ms"
            line = (f"{progress.phase:>10}  {snap.rate_eps:>9,.0f} ev/s  backlog {snap.backlog:>8,}  "
                    f"outputs {outputs:>7,}  p99 {p99}")
            total_s = progress.duration_ms / 1000
            if not tty and snap.elapsed_s - last_plain[0] >= PLAIN_EVERY_S:
                # Logs (CI, nohup) get a plain line now and then instead of a live bar.
                last_plain[0] = snap.elapsed_s
                print(f"engine run {max(snap.sim_ms, 0) / 1000:5.0f}/{total_s:.0f} s {line}", file=sys.stderr,
                      flush=True)
            bar.update(task, completed=min(max(snap.sim_ms, 0) / 1000, total_s), total=total_s or None,
                       sim=f"{max(snap.sim_ms, 0) / 1000:5.0f}/{total_s:.0f} s", line=line)

        yield update
