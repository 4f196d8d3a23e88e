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
