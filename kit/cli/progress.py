"""A rich progress bar for long work, exposed as a `progress(done, total)` callback."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)


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
    with Progress(TextColumn("[bold]engine run"), BarColumn(), TextColumn("{task.fields[sim]}"),
                  TextColumn("{task.fields[line]}"), TimeElapsedColumn(), console=console(), transient=False,
                  disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task("run", total=None, sim="", line="")

        def update(snap) -> None:
            outputs = sum((snap.outputs or {}).values())
            p99 = "-" if snap.latency_p99_ms is None else f"{snap.latency_p99_ms:,.0f} ms"
            line = (f"{snap.phase or '':>10}  {snap.rate_eps:>9,.0f} ev/s  backlog {snap.backlog:>8,}  "
                    f"outputs {outputs:>7,}  p99 {p99}")
            total_s = (snap.duration_ms or 0) / 1000
            bar.update(task, completed=max(snap.sim_ms, 0) / 1000, total=total_s or None,
                       sim=f"{max(snap.sim_ms, 0) / 1000:5.0f}/{total_s:.0f} s", line=line)

        yield update
