"""The microbenchmark data generator (thesis 4.3, Table 4.1, and the joins of 4.5.3).

Writes, into a fresh directory:
- for each of `streams` streams S1, S2, ...: `S1-NNNNN-of-MMMMM.{parquet,csv}` with rows
  (ID int32, A1..AN float64, TS int64) in arrival order, split on TS into `file_count` files of
  about equal expected size. TS is the *scheduled* time on the simulated clock
  (`start_epoch_ms` + arrival ms, floored); the harness rebases it to wall-clock time.
- optionally the static join table `T.{parquet,csv}` (ID = 1..table_rows ascending, T1..TM);
  with `table_rows >= max_id` every stream event matches exactly one row (Q6's 100% selectivity);
- `manifest.json` (and `config.toml` when given).

IDs are equiprobable in [1, max_id] (Table 4.1), or, when `zipf_s > 0`, follow a bounded Zipf law
P(k) ∝ k^-s over 1..max_id, so ID 1 is the most frequent, ID 2 the next, and so on. Attributes are
uniform U(1, 100). Arrival times follow the configured rate profile (datagen.arrivals).

Randomness: one SeedSequence(seed). Child 0 seeds the table; child i (i >= 1) seeds stream S<i>
and is split into arrivals, ids and attributes generators. Stream S1's data therefore does not
depend on how many streams are generated. Work is done in chunks so memory stays flat.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from datagen.arrivals import ArrivalStream
from datagen.schedule import file_bounds, phase_counts, phase_summary, profile_for
from datagen.output import GeneratedDataset, SplitWriter
from kit.atomic import StagedDir, check_free_space
from kit.config import MAX_ZIPF_ID, MicroConfig
from kit.datafiles import sha256_of
from kit.errors import CepkitError
from kit.manifest import write_manifest
from kit.profiles import RateProfile
from kit.records import join_table, micro_event

# About 8 M generated values (64 MiB of doubles) per chunk, at most 2^20 events.
CHUNK_VALUES = 1 << 23
CHUNK_EVENTS = 1 << 20
MIN_CHUNK_EVENTS = 1 << 10
# The Zipf sampler keeps a cumulative array of max_id doubles; 50 M ids is 400 MiB (the thesis
# goes up to MAX_ID = 5 M).
ZIPF_MAX_ID = MAX_ZIPF_ID       # kit.config refuses more at micro.max_id
ATTR_LOW, ATTR_HIGH = 1.0, 100.0
INT32_MAX = 2**31 - 1
TABLE_NAME = "T"
# Bytes on disk, for the free-space check before a run. Measured with zstd Parquet: 1.9 + 8.8 per
# attribute per event (random doubles hardly compress), 89.6 per table row of 9 attributes; CSV:
# 18 + 18.2 per attribute per event, 169 per table row of 9 attributes. Rounded up (larger IDs).
BYTES_PER_EVENT = {"parquet": (4.0, 9.0), "csv": (20.0, 19.0)}      # (fixed, per attribute)
BYTES_PER_TABLE_ROW = {"parquet": (4.0, 10.0), "csv": (12.0, 19.0)}
DATASET_OVERHEAD_BYTES = 1 << 20

Progress = Callable[[int, float], None]


def stream_names(count: int) -> list[str]:
    return [f"S{i}" for i in range(1, count + 1)]


def chunk_events(num_attributes: int) -> int:
    """Events per chunk: wide events get smaller chunks so a chunk stays around 64 MiB."""
    return int(min(CHUNK_EVENTS, max(MIN_CHUNK_EVENTS, CHUNK_VALUES // (num_attributes + 2))))


def micro_profile(cfg: MicroConfig) -> RateProfile:
    return profile_for(cfg.rate, float(cfg.rate.basis_rate_eps))


def estimate_bytes(cfg: MicroConfig) -> tuple[float, float]:
    """(bytes on disk, expected stream events) of the dataset `cfg` describes."""
    events = cfg.streams * micro_profile(cfg).expected_events
    fixed, per_attr = BYTES_PER_EVENT[cfg.format]
    t_fixed, t_per_attr = BYTES_PER_TABLE_ROW[cfg.format]
    need = (events * (fixed + per_attr * cfg.attributes)
            + cfg.table_rows * (t_fixed + t_per_attr * cfg.table_attributes) + DATASET_OVERHEAD_BYTES)
    return need, events


def check_room(cfg: MicroConfig, out_dir: Path, free: int | None = None) -> None:
    """Refuse (one line naming `out_dir`) a dataset that the free disk of its filesystem cannot
    hold; `free` replaces the measured free bytes (tests)."""
    need, events = estimate_bytes(cfg)
    table = f" and {cfg.table_rows:,} table rows" if cfg.table_rows else ""
    check_free_space(out_dir, need, what="dataset", free=free,
                     detail=f"{events:,.0f} expected events of {cfg.attributes} attribute(s){table} in {cfg.format}")


@dataclass(frozen=True)
class StreamRngs:
    arrivals: np.random.Generator
    ids: np.random.Generator
    attributes: np.random.Generator


def seed_streams(seed: int, streams: int) -> tuple[np.random.Generator, list[StreamRngs]]:
    """The table's generator and one set of independent generators per stream."""
    children = np.random.SeedSequence(seed).spawn(streams + 1)
    per_stream = []
    for child in children[1:]:
        a, i, v = (np.random.default_rng(s) for s in child.spawn(3))
        per_stream.append(StreamRngs(arrivals=a, ids=i, attributes=v))
    return np.random.default_rng(children[0]), per_stream


class IdSampler:
    """IDs in [1, max_id]: equiprobable, or bounded Zipf P(k) ∝ k^-s (ID 1 most frequent)."""

    def __init__(self, max_id: int, zipf_s: float):
        self.max_id = int(max_id)
        self.zipf_s = float(zipf_s)
        self.cdf: np.ndarray | None = None
        if self.zipf_s > 0:
            if self.max_id > ZIPF_MAX_ID:
                raise CepkitError(f"micro.max_id: at most {ZIPF_MAX_ID} with zipf_s > 0 "
                                  f"(the sampler keeps a table per ID), got {self.max_id}")
            self.cdf = np.cumsum(zipf_weights(self.max_id, self.zipf_s))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.cdf is None:
            return rng.integers(1, self.max_id + 1, size=n, dtype=np.int32)
        # Inverse CDF: the first k whose cumulative weight exceeds u. The clip guards against a
        # u that rounds up to the total.
        u = rng.random(n) * self.cdf[-1]
        k = np.searchsorted(self.cdf, u, side="right")
        return (np.minimum(k, self.max_id - 1) + 1).astype(np.int32)

    def describe(self) -> dict:
        if self.cdf is None:
            return {"law": "uniform", "min_id": 1, "max_id": self.max_id}
        return {"law": "zipf", "min_id": 1, "max_id": self.max_id, "zipf_s": self.zipf_s,
                "most_frequent_id": 1, "p_most_frequent": float(self.cdf[0] / self.cdf[-1])}


def zipf_weights(max_id: int, s: float) -> np.ndarray:
    """Unnormalized P(k) = k^-s for k = 1..max_id."""
    return np.arange(1, max_id + 1, dtype=np.float64) ** -s


def uniform_columns(rng: np.random.Generator, columns: int, rows: int) -> np.ndarray:
    """`columns` x `rows` doubles in U(1, 100); one contiguous row of the result per column."""
    return rng.uniform(ATTR_LOW, ATTR_HIGH, size=(columns, rows))


def write_stream(name: str, cfg: MicroConfig, profile: RateProfile, rngs: StreamRngs, ids: IdSampler,
                 directory: Path, on_chunk: Callable[[int], None]) -> dict:
    """Generate one stream's files; returns its manifest entry."""
    schema = micro_event(cfg.attributes, name).arrow_schema(nullable=False)
    writer = SplitWriter(directory, name, schema, cfg.format, "TS",
                         file_bounds(profile, cfg.file_count, cfg.start_epoch_ms))
    arrivals = ArrivalStream(profile, rngs.arrivals, cfg.rate.arrivals)
    chunk = chunk_events(cfg.attributes)
    rows = 0
    per_phase = np.zeros(len(profile.phases), dtype=np.int64)
    while not arrivals.done:
        t_ms = arrivals.take(chunk)
        m = len(t_ms)
        if m == 0:
            break
        rel_ms = np.floor(t_ms).astype(np.int64)
        per_phase += phase_counts(profile, rel_ms)
        attrs = uniform_columns(rngs.attributes, cfg.attributes, m)
        columns = [pa.array(ids.sample(rngs.ids, m)), *(pa.array(a) for a in attrs),
                   pa.array(rel_ms + cfg.start_epoch_ms)]
        writer.write(pa.Table.from_arrays(columns, schema=schema))
        rows += m
        on_chunk(m)
    return {"name": name, "columns": schema.names, "rows": rows,
            "expected_rows": profile.expected_events, "files": writer.close(),
            "phases": phase_summary(profile, per_phase)}


def _table_writer(path: Path, schema: pa.Schema, fmt: str):
    if fmt == "parquet":
        return pq.ParquetWriter(path, schema, compression="zstd", compression_level=1, use_dictionary=True)
    return pacsv.CSVWriter(path, schema)


def write_table(cfg: MicroConfig, rng: np.random.Generator, directory: Path,
                on_chunk: Callable[[int], None]) -> dict:
    """The join table T: ID = 1..table_rows, each once, ascending; T1..TM in U(1, 100)."""
    if cfg.table_rows > INT32_MAX:
        raise CepkitError(f"micro.table_rows: IDs must fit a 32-bit int, got {cfg.table_rows}")
    schema = join_table(cfg.table_attributes, TABLE_NAME).arrow_schema(nullable=False)
    path = directory / f"{TABLE_NAME}.{'parquet' if cfg.format == 'parquet' else 'csv'}"
    chunk = chunk_events(cfg.table_attributes)
    writer = _table_writer(path, schema, cfg.format)
    try:
        for lo in range(0, cfg.table_rows, chunk):
            m = min(chunk, cfg.table_rows - lo)
            ids = np.arange(lo + 1, lo + m + 1, dtype=np.int32)
            attrs = uniform_columns(rng, cfg.table_attributes, m)
            writer.write_table(pa.Table.from_arrays([pa.array(ids), *(pa.array(a) for a in attrs)], schema=schema))
            on_chunk(m)
    finally:
        writer.close()
    return {"name": TABLE_NAME, "path": path.name, "columns": schema.names, "rows": cfg.table_rows,
            "bytes": path.stat().st_size, "sha256": sha256_of(path)}


def generate_micro(cfg: MicroConfig, out_dir: Path, *, config_toml: str | None = None,
                   progress: Progress | None = None) -> GeneratedDataset:
    """Generate a microbenchmark dataset into the new directory `out_dir` (it must not exist).

    `progress(rows_done, rows_expected)` is called after every chunk (stream events and table
    rows together; the stream part of the total is an expectation). A dataset estimated larger than
    the free disk is refused before anything is written.
    """
    started = time.perf_counter()
    staged = StagedDir(out_dir)      # refuses an existing directory or an impossible place before any work
    profile = micro_profile(cfg)
    ids = IdSampler(cfg.max_id, cfg.zipf_s)
    table_rng, stream_rngs = seed_streams(cfg.seed, cfg.streams)
    expected = cfg.streams * profile.expected_events + cfg.table_rows
    done = 0

    def on_chunk(rows: int) -> None:
        nonlocal done
        done += rows
        if progress:
            progress(done, expected)

    with staged as tmp:
        check_room(cfg, Path(out_dir))
        streams = [write_stream(name, cfg, profile, rngs, ids, tmp, on_chunk)
                   for name, rngs in zip(stream_names(cfg.streams), stream_rngs)]
        table = write_table(cfg, table_rng, tmp, on_chunk) if cfg.table_rows > 0 else None
        if config_toml is not None:
            (tmp / "config.toml").write_text(config_toml)
        files = [{"stream": s["name"], **f} for s in streams for f in s["files"]]
        if table is not None:
            files.append({"stream": TABLE_NAME, "path": table["path"], "rows": table["rows"],
                          "bytes": table["bytes"], "sha256": table["sha256"]})
        manifest = write_manifest(
            tmp, "micro", seed=cfg.seed, config=dataclasses.asdict(cfg), profile=profile.to_dict(),
            start_epoch_ms=cfg.start_epoch_ms, format=cfg.format,
            chunk_events=chunk_events(cfg.attributes), ids=ids.describe(),
            # total_rows counts stream events (what the harness replays); the table's rows are
            # under table.rows.
            total_rows=sum(s["rows"] for s in streams),
            streams=streams, table=table, files=files)
    return GeneratedDataset(Path(out_dir), manifest, time.perf_counter() - started)
