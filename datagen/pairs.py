"""The Pairs stock-tick generator (thesis 7.3.2, 7.3.5, B.1).

Writes, into a fresh directory:
- `ticks-NNNNN-of-MMMMM.{parquet,csv}`: StockTick rows (symbol, price, size, tickTS) in arrival
  order, split into `file_count` files of about equal expected size;
- `pairs-aux.json`: symbols per market, the correlated pairs and the strategy count, which the
  query generator reads;
- `manifest.json`: parameters, seed, versions, per-file row counts and sha256, per-phase counts.

Work is done in chunks of whole symbol rounds so memory stays flat whatever the run length.
Randomness comes from one seed split into independent streams (symbols, pairs, initial prices,
arrivals, price moves, sizes), so the same seed and config give byte-identical files.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from datagen.arrivals import ArrivalStream
from datagen.output import GeneratedDataset, SplitWriter
from datagen.prices import CorrelatedGBM
from datagen.schedule import file_bounds, phase_counts, phase_summary, profile_for
from datagen.symbols import make_symbols
from kit.atomic import StagedDir, check_free_space
from kit.config import PairsConfig
from kit.manifest import write_manifest
from kit.profiles import RateProfile
from kit.records import STOCK_TICK_FILE
from kit.workload.aux import AUX_FILE, Correlation, PairsAux, write_aux
from kit.scale import MAX_STRATEGIES_PER_PAIR, ScaleModel

CHUNK_EVENTS = 1 << 20
# Bytes a tick takes on disk, for the free-space check before a run: measured 2.1-3.0 (Parquet,
# zstd; the price moves slowly and tickTS grows) and 32 (CSV), rounded up for price paths and
# larger symbol sets, plus the manifest, aux file and config.
BYTES_PER_TICK = {"parquet": 4.0, "csv": 36.0}
DATASET_OVERHEAD_BYTES = 1 << 20

# The tick file columns (kit.records.STOCK_TICK_FILE). Parquet files dictionary-encode the symbol:
# a few hundred symbols repeat every round, and the dictionary is how the chunks are built anyway.
TICK_CSV_SCHEMA = STOCK_TICK_FILE.arrow_schema(nullable=False)
TICK_FILE_SCHEMA = TICK_CSV_SCHEMA.set(
    TICK_CSV_SCHEMA.get_field_index("symbol"),
    pa.field("symbol", pa.dictionary(pa.int32(), pa.string()), nullable=False))


@dataclass(frozen=True)
class PairsPlan:
    """Everything decided before the first tick: sizes, profile, symbols and pairs."""

    config: PairsConfig
    model: ScaleModel
    profile: RateProfile
    symbols: tuple[str, ...]
    market_of: tuple[int, ...]          # market index of each symbol
    pairs: tuple[tuple[int, int], ...]  # symbol indices of each correlated pair


def _streams(seed: int) -> dict[str, np.random.Generator]:
    names = ("symbols", "pairs", "initial", "arrivals", "moves", "sizes")
    return {n: np.random.default_rng(s) for n, s in zip(names, np.random.SeedSequence(seed).spawn(len(names)))}


def make_plan(cfg: PairsConfig, rngs: dict[str, np.random.Generator] | None = None) -> PairsPlan:
    rngs = rngs or _streams(cfg.seed)
    model = ScaleModel.from_sf(cfg.scale_factor, symbols=cfg.symbols, correlations=cfg.correlations,
                               strategies=cfg.strategies, basis_rate_eps=cfg.rate.basis_rate_eps,
                               peak_factor=cfg.rate.peak_factor)
    profile = profile_for(cfg.rate, model.basis_rate_eps)
    symbols = make_symbols(model.symbols, rngs["symbols"])
    blocks = np.array_split(np.arange(model.symbols), model.markets)
    market_of = np.concatenate([np.full(len(b), m) for m, b in enumerate(blocks)])
    # Correlations are spread over markets like the symbols; each market pairs up a random subset.
    per_market = np.full(model.markets, model.correlations // model.markets)
    per_market[: model.correlations % model.markets] += 1
    pairs: list[tuple[int, int]] = []
    for m, block in enumerate(blocks):
        k = min(int(per_market[m]), len(block) // 2)
        perm = rngs["pairs"].permutation(block)
        pairs.extend((int(perm[2 * i]), int(perm[2 * i + 1])) for i in range(k))
    return PairsPlan(cfg, model, profile, tuple(symbols), tuple(int(x) for x in market_of), tuple(pairs))


def estimate_bytes(cfg: PairsConfig) -> tuple[float, float]:
    """(bytes on disk, expected ticks) of the dataset `cfg` describes, from its rate profile."""
    model = ScaleModel.from_sf(cfg.scale_factor, symbols=cfg.symbols, correlations=cfg.correlations,
                               strategies=cfg.strategies, basis_rate_eps=cfg.rate.basis_rate_eps,
                               peak_factor=cfg.rate.peak_factor)
    events = profile_for(cfg.rate, model.basis_rate_eps).expected_events
    per_row = BYTES_PER_TICK[cfg.format]
    return events * per_row + DATASET_OVERHEAD_BYTES + 200 * model.symbols, events


def check_room(cfg: PairsConfig, out_dir: Path, free: int | None = None) -> None:
    """Refuse (one line naming `out_dir`) a dataset that the free disk of its filesystem cannot
    hold; `free` replaces the measured free bytes (tests)."""
    need, events = estimate_bytes(cfg)
    check_free_space(out_dir, need, what="dataset", free=free,
                     detail=f"{events:,.0f} expected ticks x {BYTES_PER_TICK[cfg.format]:g} bytes in {cfg.format}")


def pairs_aux(plan: PairsPlan) -> PairsAux:
    """What `pairs-aux.json` records of the plan (written by kit.workload.aux.write_aux)."""
    m = plan.model
    return PairsAux(
        scale_factor=m.scale_factor, markets=m.markets, num_strategies=m.strategies,
        max_strategies_per_pair=MAX_STRATEGIES_PER_PAIR, seed=plan.config.seed,
        symbols=tuple((s, plan.market_of[i]) for i, s in enumerate(plan.symbols)),
        correlations=tuple(Correlation(plan.symbols[a], plan.symbols[b], plan.market_of[a]) for a, b in plan.pairs),
        correlation=plan.config.prices.correlation)


def generate_pairs(cfg: PairsConfig, out_dir: Path, *, config_toml: str | None = None,
                   progress: Callable[[int, float], None] | None = None) -> GeneratedDataset:
    """Generate a Pairs dataset into the new directory `out_dir` (it must not exist).

    `progress(rows_done, rows_expected)` is called after every chunk. A dataset estimated larger
    than the free disk is refused before anything is written.
    """
    started = time.perf_counter()
    staged = StagedDir(out_dir)      # refuses an existing directory or an impossible place before any work
    rngs = _streams(cfg.seed)
    plan = make_plan(cfg, rngs)
    n_sym = plan.model.symbols
    profile = plan.profile
    p = cfg.prices
    gbm = CorrelatedGBM(n_sym, np.array(plan.pairs, dtype=np.int64).reshape(-1, 2), rngs["initial"],
                        correlation=p.correlation, drift_per_hour=p.drift_per_hour,
                        volatility_per_hour=p.volatility_per_hour,
                        initial_min_cents=p.initial_min_cents, initial_max_cents=p.initial_max_cents)
    gbm.rng = rngs["moves"]
    arrivals = ArrivalStream(profile, rngs["arrivals"], cfg.rate.arrivals)
    chunk = max(1, CHUNK_EVENTS // n_sym) * n_sym
    sym_cycle = np.tile(np.arange(n_sym, dtype=np.int32), chunk // n_sym)
    dictionary = pa.array(plan.symbols, type=pa.string())
    bounds = file_bounds(profile, cfg.file_count, cfg.start_epoch_ms)
    phase_rows = np.zeros(len(profile.phases), dtype=np.int64)
    total = 0

    with staged as tmp:
        check_room(cfg, Path(out_dir))
        schema = TICK_FILE_SCHEMA if cfg.format == "parquet" else TICK_CSV_SCHEMA
        writer = SplitWriter(tmp, "ticks", schema, cfg.format, "tickTS", bounds)
        while not arrivals.done:
            t_ms = arrivals.take(chunk)
            m = len(t_ms)
            if m == 0:
                break
            prices = gbm.step_rounds(t_ms)
            sizes = rngs["sizes"].integers(10, 101, size=m, dtype=np.int32) * np.int32(10)
            rel_ms = np.floor(t_ms).astype(np.int64)
            phase_rows += phase_counts(profile, rel_ms)
            symbol = pa.DictionaryArray.from_arrays(pa.array(sym_cycle[:m]), dictionary)
            table = pa.Table.from_arrays(
                [symbol, pa.array(prices), pa.array(sizes), pa.array(rel_ms + cfg.start_epoch_ms)],
                schema=TICK_FILE_SCHEMA)
            writer.write(table)
            total += m
            if progress:
                progress(total, profile.expected_events)
        files = writer.close()
        write_aux(tmp, pairs_aux(plan))
        if config_toml is not None:
            (tmp / "config.toml").write_text(config_toml)
        manifest = write_manifest(
            tmp, "pairs", seed=cfg.seed, config=dataclasses.asdict(cfg),
            scale=dataclasses.asdict(plan.model), profile=profile.to_dict(),
            start_epoch_ms=cfg.start_epoch_ms, format=cfg.format,
            columns=[f.name for f in TICK_FILE_SCHEMA], chunk_events=chunk,
            aux_file=AUX_FILE, total_rows=total, files=files,
            phases=phase_summary(profile, phase_rows))
    return GeneratedDataset(Path(out_dir), manifest, time.perf_counter() - started)
