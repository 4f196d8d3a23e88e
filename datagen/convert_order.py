"""The checked rows of a converted CSV in time order, and where the output files split.

`datagen.convert` writes what this module hands out: chunks of checked rows (read and checked by
`datagen.convert_csv`) in event order, and the first timestamp of each output file after the
first. Two ways to get there (the `sort` option of `ConvertSpec` picks one):

- `streamed_source`: the CSV is streamed, never held whole, and its timestamps must be
  non-decreasing (the row order is the event order). With `file_count > 1` it is read twice: the
  first pass checks every row and samples the timestamps (`SplitSampler`) so the files can be
  split on time into about equal parts; the second hands the rows out.
- `sorted_source`: the checked columns are read once into memory, sorted stably on time (ties
  keep file order) and handed out from there.

Either way a file count the rows cannot fill (fewer rows or distinct times than files) is one
`CepkitError` line naming the input.
"""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from datagen import convert_csv as rows_io
from datagen.convert_csv import Chunk, CsvRecords, Layout, parsed_chunks
from datagen.csv_values import printable
from kit.errors import at

if TYPE_CHECKING:       # datagen.convert imports this module; the spec type is only for annotations
    from datagen.convert import ConvertSpec

# Timestamps kept by the first pass to place the file splits; more rows are subsampled.
SPLIT_SAMPLES = 1 << 16

Progress = Callable[[int, float], None]


# --- where the files split ------------------------------------------------------------------

def split_bounds(samples: np.ndarray, stride: int, rows: int, file_count: int) -> list[int]:
    """First TS of files 2..F from sorted `samples` (the TS of every `stride`-th row): the TS near
    row i*rows/F, or the next greater sampled TS where ties would leave a file empty (rows with
    equal times stay in one file)."""
    out: list[int] = []
    prev = samples[0]
    for i in range(1, file_count):
        bound = samples[min(round(i * rows / file_count / stride), len(samples) - 1)]
        if bound <= prev:
            # Out of distinct samples: keep prev; the empty file it makes is refused after writing.
            bound = samples[min(int(np.searchsorted(samples, prev, side="right")), len(samples) - 1)]
        out.append(int(bound))
        prev = bound
    return out


class SplitSampler:
    """Keeps the TS of every `stride`-th row (stride doubling as needed) to place file splits,
    and counts the distinct times of its non-decreasing input."""

    def __init__(self, capacity: int | None = None):
        self.capacity = SPLIT_SAMPLES if capacity is None else capacity
        self.stride = 1
        self.samples: list[int] = []
        self.rows = 0
        self.distinct = 0

    def add(self, ts: np.ndarray) -> None:
        if len(ts):
            new_first = not self.rows or int(ts[0]) != self._last
            self.distinct += int(new_first) + int(np.count_nonzero(np.diff(ts)))
            self._last = int(ts[-1])
        first = -self.rows % self.stride
        self.samples.extend(ts[first::self.stride].tolist())
        self.rows += len(ts)
        while len(self.samples) >= 2 * self.capacity:
            # Sample j sits at row j*stride; keeping the even j doubles the stride.
            self.samples = self.samples[::2]
            self.stride *= 2

    def bounds(self, file_count: int) -> list[int]:
        return split_bounds(np.asarray(self.samples, np.int64), self.stride, self.rows, file_count)


def _check_file_count(spec: ConvertSpec, rows: int, distinct: int, ts_name: str) -> None:
    f = spec.file_count
    if rows < f:
        raise at(spec.input, None, f"--files {f} but the input has {rows} row{'s' if rows != 1 else ''}")
    if distinct < f:
        raise at(spec.input, None, f"--files {f} but the input's {rows} rows have only {distinct} distinct "
                                   f"{printable(ts_name)} values (rows with the same time stay in one file)")


# --- the rows in time order -----------------------------------------------------------------

@dataclass
class Tally:
    """Progress over one or two passes; a pass's row total is estimated from the fraction done."""

    progress: Progress | None
    passes: int

    def update(self, pass_index: int, rows_in_pass: int, fraction: float) -> None:
        if self.progress is None:
            return
        estimate = rows_in_pass / fraction if fraction > 0 else float(rows_in_pass)
        self.progress(pass_index * int(estimate) + rows_in_pass, self.passes * estimate)


@dataclass
class Source:
    """The checked rows, ready to write: chunks in time order and the file split times."""

    chunks: Iterable[tuple[Layout, Chunk]]
    bounds: list[int]
    expected_rows: int | None      # from a first pass over the file, to detect a change


def streamed_source(spec: ConvertSpec, tally: Tally) -> Source:
    """Rows straight from the file (which must be in time order); a first pass places the splits."""
    display = os.fspath(spec.input)
    bounds: list[int] = []
    expected = None
    if spec.file_count > 1:
        sampler = SplitSampler()
        for layout, chunk in parsed_chunks(spec, CsvRecords(spec.input, display)):
            sampler.add(chunk.ts)
            tally.update(0, sampler.rows, chunk.fraction_read)
        _check_file_count(spec, sampler.rows, sampler.distinct, layout.ts.source)
        bounds, expected = sampler.bounds(spec.file_count), sampler.rows

    def chunks() -> Iterator[tuple[Layout, Chunk]]:
        rows = 0
        for layout, chunk in parsed_chunks(spec, CsvRecords(spec.input, display)):
            rows += chunk.rows
            tally.update(tally.passes - 1, rows, chunk.fraction_read)
            yield layout, chunk
    return Source(chunks(), bounds, expected)


def sorted_source(spec: ConvertSpec, tally: Tally) -> Source:
    """Every checked row read into memory, sorted stably on time, then handed out in chunks.

    The parsed columns and the sort order cost about 55 bytes a tick at the peak (specs/DATA.md)."""
    pieces: list[list[pa.Array | None]] = []
    layout = None
    rows = 0
    for layout, chunk in parsed_chunks(spec, CsvRecords(spec.input, os.fspath(spec.input)), ordered=False):
        pieces.append(list(chunk.arrays))
        rows += chunk.rows
        tally.update(0, rows, chunk.fraction_read)
    assert layout is not None          # parsed_chunks raises on an empty input
    columns = []
    for c in range(len(layout.columns)):
        columns.append(pa.concat_arrays([p[c] for p in pieces]))
        for p in pieces:               # one column's pieces freed as soon as it is whole
            p[c] = None
    ts = columns.pop().to_numpy()      # the timestamp is last
    order = None if bool(np.all(ts[1:] >= ts[:-1])) else np.argsort(ts, kind="stable")
    if order is not None:
        ts = ts[order]
    distinct = 1 + int(np.count_nonzero(np.diff(ts)))
    _check_file_count(spec, rows, distinct, layout.ts.source)
    bounds = split_bounds(ts, 1, rows, spec.file_count) if spec.file_count > 1 else []

    def chunks() -> Iterator[tuple[Layout, Chunk]]:
        step = rows_io.CHUNK_ROWS
        for lo in range(0, rows, step):
            hi = min(lo + step, rows)
            if order is None:
                arrays = [a.slice(lo, hi - lo) for a in columns]
            else:
                take = pa.array(order[lo:hi])
                arrays = [a.take(take) for a in columns]
            tally.update(1, hi, hi / rows)
            yield layout, Chunk([*arrays, pa.array(ts[lo:hi])], ts[lo:hi], hi - lo, hi / rows)
    return Source(chunks(), bounds, None)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: batches of row lists (no cycles among them) otherwise
    trigger full collections over and over, about a third of the conversion time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
