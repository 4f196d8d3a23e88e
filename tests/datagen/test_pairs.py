"""The Pairs tick generator: arrival law, phase counts, prices, sizes, files, determinism."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow.csv as pacsv
import pytest
from scipy import stats

from datagen.arrivals import ArrivalStream, arrival_times_ms
from datagen.pairs import generate_pairs
from kit.datafiles import sha256_of
from kit.errors import CepkitError
from kit.profiles import adaptivity_profile, build_profile, constant_profile, standard_profile
from tests.helpers import pairs_config, read_ticks


def test_interarrivals_exponential_in_each_constant_stretch():
    # Adaptivity profile: steady, peak and recovery are constant-rate stretches.
    prof = adaptivity_profile(2000.0)
    t = arrival_times_ms(prof, np.random.default_rng(11))
    for name in ("steady", "peak", "recovery"):
        lo, hi = prof.phase_window(name)
        inside = t[(t >= lo) & (t < hi)]
        rate_per_ms = prof.rate_at([lo])[0] / 1000
        gaps = np.diff(inside)
        res = stats.kstest(gaps, "expon", args=(0, 1 / rate_per_ms))
        assert res.pvalue > 0.01, (name, res)
        # The exponential is the right law and a wrong one is rejected (the test can fail).
        assert stats.kstest(gaps, "uniform", args=(0, 2 / rate_per_ms)).pvalue < 1e-6


def test_rescaled_gaps_are_unit_exponential_on_ramps():
    # Time rescaling: Lambda(t_i) - Lambda(t_{i-1}) ~ Exp(1) for a non-homogeneous Poisson process.
    prof = standard_profile(50.0, 75.0)
    t = arrival_times_ms(prof, np.random.default_rng(5))
    for name in ("ramp-up", "decline", "mi-rise"):
        lo, hi = prof.phase_window(name)
        inside = t[(t >= lo) & (t < hi)]
        res = stats.kstest(np.diff(prof.cumulative(inside)), "expon")
        assert res.pvalue > 0.01, (name, res)


def test_generated_ticks_interarrival_exponential(tmp_path):
    # At 2 ticks/s the integer-ms tickTS barely perturbs the exponential law.
    out = tmp_path / "slow"
    generate_pairs(pairs_config(rate={"profile": "constant", "basis_rate_eps": 2.0, "duration_s": 4000.0}), out)
    ts = read_ticks(out)["tickTS"]
    res = stats.kstest(np.diff(ts).astype(float), "expon", args=(0, 500.0))
    assert res.pvalue > 0.01, res


def test_constant_arrivals_are_evenly_spaced():
    t = arrival_times_ms(constant_profile(100.0, 10_000), np.random.default_rng(1), "constant")
    assert len(t) == 999  # events at 10 ms, 20 ms, ... strictly before the end
    assert np.allclose(np.diff(t), 10.0)


def test_phase_counts_match_rate_integral(tmp_path):
    out = tmp_path / "phases"
    ds = generate_pairs(pairs_config(rate={"duration_s": 1210.0}), out)
    ts = read_ticks(out)["tickTS"] - pairs_config().start_epoch_ms
    prof = build_profile("standard", basis_eps=5000, peak_eps=7500, duration_ms=1_210_000)
    starts = prof.phase_starts_ms()
    counts = np.histogram(ts, bins=starts)[0]
    for phase, n in zip(prof.phases, counts):
        assert abs(n - phase.expected_events) / phase.expected_events < 0.02, (phase.name, n, phase.expected_events)
    assert [p["rows"] for p in ds.manifest["phases"]] == counts.tolist()


def test_arrival_stream_chunks_match_one_shot():
    prof = standard_profile(500.0, 750.0)
    whole = arrival_times_ms(prof, np.random.default_rng(3))
    s = ArrivalStream(prof, np.random.default_rng(3))
    parts = []
    while not s.done:
        parts.append(s.take(12_345))
    chunked = np.concatenate(parts)
    # Same draws, different summation order: equal up to float rounding (far below 1 ms).
    assert len(chunked) == len(whole)
    assert np.allclose(chunked, whole, rtol=0, atol=1e-3)


def _log_returns(ticks, symbols, every):
    sym = ticks["symbol"]
    out = {}
    for s in symbols:
        p = ticks["price"][sym == s][::every].astype(float)
        out[s] = np.diff(np.log(p))
    return out


def test_correlated_pairs_log_returns(correlated_pairs):
    ticks = read_ticks(correlated_pairs)
    aux = json.loads((correlated_pairs / "pairs-aux.json").read_text())
    pairs = [(c["symbol1"], c["symbol2"]) for c in aux["correlations"]]
    assert len(pairs) == 25
    rets = _log_returns(ticks, {s for p in pairs for s in p}, every=30)
    for a, b in pairs:
        n = min(len(rets[a]), len(rets[b]))
        r = np.corrcoef(rets[a][:n], rets[b][:n])[0, 1]
        assert abs(r - 0.8) < 0.05, (a, b, r)


def test_uncorrelated_symbols_near_zero(correlated_pairs):
    ticks = read_ticks(correlated_pairs)
    aux = json.loads((correlated_pairs / "pairs-aux.json").read_text())
    paired = {s for c in aux["correlations"] for s in (c["symbol1"], c["symbol2"])}
    free = sorted({s["symbol"] for s in aux["symbols"]} - paired)
    assert len(free) == 50
    rets = _log_returns(ticks, free[:20], every=30)
    cors = [np.corrcoef(rets[a], rets[b])[0, 1] for a, b in zip(free[:20:2], free[1:20:2])]
    assert max(abs(c) for c in cors) < 0.12 and abs(np.mean(cors)) < 0.05, cors


def test_prices_sizes_symbols(quick_pairs):
    t = read_ticks(quick_pairs)
    assert t["price"].dtype == np.int32 and t["price"].min() >= 1
    assert t["size"].min() >= 100 and t["size"].max() <= 1000 and np.all(t["size"] % 10 == 0)
    assert set(np.unique(t["size"])) == set(range(100, 1001, 10))
    symbols = t["symbol"][:100]
    assert len(set(symbols)) == 100 and all(re.fullmatch(r"[A-Z]{6}", s) for s in symbols)
    # Round-robin: the symbol of row i is the symbol of row i mod 100.
    n = len(t["symbol"]) // 100 * 100
    assert np.array_equal(t["symbol"][:n].reshape(-1, 100), np.tile(symbols, (n // 100, 1)))
    assert np.all(np.diff(t["tickTS"]) >= 0)


def test_prices_stay_positive_under_extreme_volatility(tmp_path):
    out = tmp_path / "wild"
    generate_pairs(pairs_config(rate={"profile": "constant", "duration_s": 20.0},
                                prices={"volatility_per_hour": 0.95, "drift_per_hour": -1.0,
                                        "initial_min_cents": 1, "initial_max_cents": 3}), out)
    p = read_ticks(out)["price"]
    assert p.min() >= 1 and np.issubdtype(p.dtype, np.integer)


def test_files_partition_rows_in_time_order(quick_pairs):
    m = json.loads((quick_pairs / "manifest.json").read_text())
    assert m["kind"] == "cepkit.datagen-manifest" and m["schema_version"] == 1
    files = m["files"]
    assert len(files) == 3 and sum(f["rows"] for f in files) == m["total_rows"]
    for f in files:
        assert sha256_of(quick_pairs / f["path"]) == f["sha256"]
        assert abs(f["rows"] - m["total_rows"] / 3) / m["total_rows"] < 0.01
    for a, b in zip(files, files[1:]):
        assert a["last_tickTS"] <= b["first_tickTS"]


def test_aux_file(quick_pairs):
    aux = json.loads((quick_pairs / "pairs-aux.json").read_text())
    assert aux["kind"] == "cepkit.pairs-aux" and aux["schema_version"] == 1
    assert (aux["num_strategies"], aux["num_correlations"], aux["markets"]) == (25, 25, 1)
    paired = [s for c in aux["correlations"] for s in (c["symbol1"], c["symbol2"])]
    assert len(set(paired)) == 50
    assert set(paired) <= {s["symbol"] for s in aux["symbols"]}


def test_aux_file_round_trips_through_its_one_model(quick_pairs, tmp_path):
    from kit.workload.aux import load_aux, write_aux
    model = load_aux(quick_pairs)
    assert model.correlation == 0.9 and model.seed is not None
    written = write_aux(tmp_path, model)
    assert written.read_bytes() == (quick_pairs / "pairs-aux.json").read_bytes()


def test_two_markets_pairs_stay_within_market(tmp_path):
    out = tmp_path / "sf11"
    generate_pairs(pairs_config(scale_factor=11, rate={"profile": "constant", "duration_s": 2.0}), out)
    aux = json.loads((out / "pairs-aux.json").read_text())
    market = {s["symbol"]: s["market"] for s in aux["symbols"]}
    assert aux["num_symbols"] == 200 and aux["num_strategies"] == 275
    assert [sum(c["market"] == m for c in aux["correlations"]) for m in (0, 1)] == [25, 25]
    assert all(market[c["symbol1"]] == market[c["symbol2"]] == c["market"] for c in aux["correlations"])


def test_deterministic_bytes(tmp_path):
    cfg = pairs_config(file_count=2, rate={"duration_s": 20.0})
    a, b = generate_pairs(cfg, tmp_path / "a"), generate_pairs(cfg, tmp_path / "b")
    assert [f["sha256"] for f in a.manifest["files"]] == [f["sha256"] for f in b.manifest["files"]]
    for name in ("manifest.json", "pairs-aux.json", *(f["path"] for f in a.manifest["files"])):
        assert sha256_of(tmp_path / "a" / name) == sha256_of(tmp_path / "b" / name), name
    c = generate_pairs(pairs_config(file_count=2, seed=43, rate={"duration_s": 20.0}), tmp_path / "c")
    assert c.manifest["files"][0]["sha256"] != a.manifest["files"][0]["sha256"]


def test_csv_format_same_rows_as_parquet(tmp_path):
    base = {"rate": {"profile": "constant", "duration_s": 3.0}}
    generate_pairs(pairs_config(**base), tmp_path / "pq")
    generate_pairs(pairs_config(format="csv", **base), tmp_path / "csv")
    pq_rows = read_ticks(tmp_path / "pq")
    table = pacsv.read_csv(next((tmp_path / "csv").glob("ticks-*.csv")))
    assert table.column_names == ["symbol", "price", "size", "tickTS"]
    assert table.column("symbol").to_pylist() == pq_rows["symbol"].tolist()
    assert np.array_equal(table.column("price").to_numpy(), pq_rows["price"])
    assert np.array_equal(table.column("tickTS").to_numpy(), pq_rows["tickTS"])


def test_never_overwrites_and_leaves_nothing_partial(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_text("earlier run")
    with pytest.raises(CepkitError, match="already exists"):
        generate_pairs(pairs_config(rate={"quick": True}), out)
    assert (out / "keep.txt").read_text() == "earlier run"

    def boom(done, total):
        raise RuntimeError("interrupted")
    with pytest.raises(RuntimeError):
        generate_pairs(pairs_config(rate={"quick": True}), tmp_path / "new", progress=boom)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
