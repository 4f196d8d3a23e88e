"""The microbenchmark generator: counts vs the rate integral, ID laws, attributes, the join table,
file splits, CSV output, determinism and the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from scipy import stats

import datagen.micro as micro
from datagen.micro import generate_micro
from cepkit_app.cli import main
from kit.config import DEFAULT_START_EPOCH_MS, MicroConfig, RateConfig
from kit.datafiles import sha256_of
from kit.errors import CepkitError
from kit.profiles import build_profile


# Explicit, so the tests do not depend on MicroConfig's defaults: 1000 events/s for 60 s.
BASE_RATE = RateConfig(profile="constant", basis_rate_eps=1000.0, duration_s=60.0)


def micro_config(**changes) -> MicroConfig:
    rate = changes.pop("rate", {})
    return MicroConfig(rate=dataclasses.replace(BASE_RATE, **rate), **changes)


def read_stream(directory: Path, name: str) -> dict[str, np.ndarray]:
    """All rows of one stream in file order, as numpy columns."""
    files = sorted(directory.glob(f"{name}-*-of-*.parquet"))
    tables = [pq.read_table(f) for f in files]
    return {col: np.concatenate([t.column(col).to_numpy() for t in tables]) for col in tables[0].column_names}


# Two streams at 2000 events/s for 50 s (~100k events each), 3 files each, a 1500-row table.
TWO_STREAMS = dict(streams=2, file_count=3, table_rows=1500, max_id=1000,
                   rate={"profile": "constant", "basis_rate_eps": 2000.0, "duration_s": 50.0})


@pytest.fixture(scope="module")
def two_streams(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("micro") / "two"
    generate_micro(micro_config(**TWO_STREAMS), out)
    return out


@pytest.fixture(scope="module")
def zipf_stream(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("micro") / "zipf"
    generate_micro(micro_config(zipf_s=1.1, max_id=1000, rate={"basis_rate_eps": 2000.0, "duration_s": 50.0}), out)
    return out


def test_rows_match_rate_integral_per_stream_and_phase(tmp_path):
    # Standard profile squeezed to 80 s: ~100k events over five ramps.
    cfg = micro_config(streams=2, rate={"profile": "standard", "basis_rate_eps": 1000.0, "duration_s": 80.0})
    ds = generate_micro(cfg, tmp_path / "std")
    prof = build_profile("standard", basis_eps=1000.0, peak_eps=1500.0, duration_ms=80_000)
    assert 90_000 < prof.expected_events < 110_000
    starts = prof.phase_starts_ms()
    for s in ds.manifest["streams"]:
        assert abs(s["rows"] - prof.expected_events) / prof.expected_events < 0.02, s["rows"]
        ts = read_stream(tmp_path / "std", s["name"])["TS"] - DEFAULT_START_EPOCH_MS
        counts = np.histogram(ts, bins=starts)[0]
        assert [p["rows"] for p in s["phases"]] == counts.tolist()
        for phase, n in zip(prof.phases, counts):
            # Poisson counts: within 5 standard deviations of the phase's integral.
            assert abs(n - phase.expected_events) < 5 * np.sqrt(phase.expected_events), (phase.name, n)
    assert ds.total_rows == sum(s["rows"] for s in ds.manifest["streams"])


def test_ids_uniform_in_range(two_streams):
    ids = read_stream(two_streams, "S1")["ID"]
    assert ids.dtype == np.int32 and ids.min() == 1 and ids.max() == 1000
    counts = np.bincount(ids, minlength=1001)[1:]
    assert stats.chisquare(counts).pvalue > 0.001
    # The same test rejects a law that is off by 20% on a tenth of the IDs.
    skewed = counts.astype(float).copy()
    skewed[:100] *= 1.2
    assert stats.chisquare(skewed, skewed.sum() / 1000 * np.ones(1000)).pvalue < 1e-6


def test_zipf_ids_follow_the_law(zipf_stream):
    m = json.loads((zipf_stream / "manifest.json").read_text())
    ids = read_stream(zipf_stream, "S1")["ID"]
    n = len(ids)
    assert ids.min() >= 1 and ids.max() <= 1000
    pmf = np.arange(1, 1001, dtype=float) ** -1.1
    pmf /= pmf.sum()
    assert m["ids"] == {"law": "zipf", "min_id": 1, "max_id": 1000, "zipf_s": 1.1, "most_frequent_id": 1,
                        "p_most_frequent": pytest.approx(pmf[0])}
    counts = np.bincount(ids, minlength=1001)[1:]
    # ID 1 is the most frequent, at P(1) = 1/H(1000, 1.1) ~ 0.18, within 5 binomial sigmas.
    assert counts.argmax() == 0
    assert abs(counts[0] / n - pmf[0]) < 5 * np.sqrt(pmf[0] * (1 - pmf[0]) / n)
    assert counts[0] > counts[1] > counts[9] > counts[99]
    # Whole law: chi-square against the Zipf pmf over IDs 1..50 plus the tail lumped together.
    obs = np.append(counts[:50], counts[50:].sum())
    exp = np.append(pmf[:50], pmf[50:].sum()) * n
    assert stats.chisquare(obs, exp).pvalue > 0.001
    # ...and uniform IDs are far from it.
    assert stats.chisquare(counts).pvalue < 1e-100


def test_attributes_uniform_1_100(two_streams):
    rows = read_stream(two_streams, "S2")
    assert list(rows) == ["ID", "A1", "A2", "A3", "A4", "TS"]
    for col in ("A1", "A4"):
        a = rows[col]
        assert a.dtype == np.float64 and a.min() >= 1.0 and a.max() <= 100.0
        assert stats.kstest(a, "uniform", args=(1.0, 99.0)).pvalue > 0.001
    assert abs(np.corrcoef(rows["A1"], rows["A2"])[0, 1]) < 0.02


def test_join_table_ids_and_selectivity(two_streams):
    t = pq.read_table(two_streams / "T.parquet")
    assert t.column_names == ["ID", *(f"T{i}" for i in range(1, 10))]
    assert t.schema.field("ID").type == "int32"
    assert np.array_equal(t.column("ID").to_numpy(), np.arange(1, 1501))
    vals = np.stack([t.column(f"T{i}").to_numpy() for i in range(1, 10)])
    assert vals.min() >= 1.0 and vals.max() <= 100.0 and abs(vals.mean() - 50.5) < 1.0
    m = json.loads((two_streams / "manifest.json").read_text())
    assert m["table"]["rows"] == 1500 and m["table"]["sha256"] == sha256_of(two_streams / "T.parquet")
    # table_rows >= max_id: every stream event finds exactly one table row.
    table_ids = set(t.column("ID").to_pylist())
    assert set(np.unique(read_stream(two_streams, "S1")["ID"]).tolist()) <= table_ids


def test_streams_and_files_partition_rows_in_time_order(two_streams):
    m = json.loads((two_streams / "manifest.json").read_text())
    assert m["generator"] == "micro" and m["kind"] == "cepkit.datagen-manifest"
    assert [s["name"] for s in m["streams"]] == ["S1", "S2"]
    assert sorted(p.name for p in two_streams.iterdir()) == sorted(
        [f"S{s}-{i:05d}-of-00003.parquet" for s in (1, 2) for i in (1, 2, 3)] + ["T.parquet", "manifest.json"])
    for s in m["streams"]:
        files = s["files"]
        assert len(files) == 3 and sum(f["rows"] for f in files) == s["rows"]
        for f in files:
            assert sha256_of(two_streams / f["path"]) == f["sha256"]
            assert abs(f["rows"] - s["rows"] / 3) < 0.02 * s["rows"]
        for a, b in zip(files, files[1:]):
            assert a["last_TS"] < b["first_TS"]
        ts = read_stream(two_streams, s["name"])["TS"]
        assert np.all(np.diff(ts) >= 0)
        assert ts[0] >= DEFAULT_START_EPOCH_MS and ts[-1] < DEFAULT_START_EPOCH_MS + 50_000
    # The streams are independent draws, not copies.
    s1, s2 = read_stream(two_streams, "S1"), read_stream(two_streams, "S2")
    n = min(len(s1["ID"]), len(s2["ID"]))
    assert np.mean(s1["ID"][:n] == s2["ID"][:n]) < 0.01
    assert [f["stream"] for f in m["files"]] == ["S1"] * 3 + ["S2"] * 3 + ["T"]


def test_small_chunks_same_layout(tmp_path, monkeypatch):
    # Many chunks per file and per table: splits and row counts still line up.
    monkeypatch.setattr(micro, "CHUNK_EVENTS", 1000)
    monkeypatch.setattr(micro, "CHUNK_VALUES", 4000)
    ds = generate_micro(micro_config(file_count=4, table_rows=2500, table_attributes=2,
                                     rate={"duration_s": 10.0}), tmp_path / "small")
    assert ds.manifest["chunk_events"] == 1000
    files = ds.manifest["streams"][0]["files"]
    assert sum(f["rows"] for f in files) == ds.total_rows and all(f["rows"] > 2000 for f in files)
    assert pq.ParquetFile(tmp_path / "small" / files[0]["path"]).metadata.num_row_groups >= 2
    ts = read_stream(tmp_path / "small", "S1")["TS"]
    assert len(ts) == ds.total_rows and np.all(np.diff(ts) >= 0)
    table = pq.ParquetFile(tmp_path / "small" / "T.parquet")
    assert table.metadata.num_row_groups == 3
    assert table.read().column("ID").to_pylist() == list(range(1, 2501))


def test_same_seed_same_bytes(tmp_path):
    cfg = micro_config(streams=2, file_count=2, table_rows=50, zipf_s=0.8, rate={"duration_s": 5.0})
    a, b = generate_micro(cfg, tmp_path / "a"), generate_micro(cfg, tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir()) and "manifest.json" in names
    for name in names:
        assert sha256_of(tmp_path / "a" / name) == sha256_of(tmp_path / "b" / name), name
    assert a.manifest["files"] == b.manifest["files"]
    c = generate_micro(dataclasses.replace(cfg, seed=8), tmp_path / "c")
    assert c.manifest["files"][0]["sha256"] != a.manifest["files"][0]["sha256"]


def test_stream_s1_does_not_depend_on_stream_count(tmp_path):
    one = generate_micro(micro_config(rate={"duration_s": 3.0}), tmp_path / "one")
    three = generate_micro(micro_config(streams=3, rate={"duration_s": 3.0}), tmp_path / "three")
    assert one.manifest["streams"][0]["files"] == three.manifest["streams"][0]["files"]


def test_csv_format_same_rows_as_parquet(tmp_path):
    base = dict(table_rows=20, rate={"duration_s": 3.0})
    generate_micro(micro_config(**base), tmp_path / "pq")
    generate_micro(micro_config(format="csv", **base), tmp_path / "csv")
    assert sorted(p.name for p in (tmp_path / "csv").iterdir()) == ["S1-00001-of-00001.csv", "T.csv", "manifest.json"]
    rows = read_stream(tmp_path / "pq", "S1")
    table = pacsv.read_csv(tmp_path / "csv" / "S1-00001-of-00001.csv")
    assert table.column_names == ["ID", "A1", "A2", "A3", "A4", "TS"]
    for col in table.column_names:
        assert np.array_equal(table.column(col).to_numpy(), rows[col]), col
    t_csv = pacsv.read_csv(tmp_path / "csv" / "T.csv")
    t_pq = pq.read_table(tmp_path / "pq" / "T.parquet")
    assert t_csv.column("ID").to_pylist() == list(range(1, 21))
    assert np.array_equal(t_csv.column("T9").to_numpy(), t_pq.column("T9").to_numpy())


def test_never_overwrites_and_leaves_nothing_partial(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    with pytest.raises(CepkitError, match="already exists"):
        generate_micro(micro_config(rate={"duration_s": 1.0}), out)

    def boom(done, total):
        raise RuntimeError("interrupted")
    with pytest.raises(RuntimeError):
        generate_micro(micro_config(table_rows=10, rate={"duration_s": 1.0}), tmp_path / "new", progress=boom)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_progress_reaches_expected_total(tmp_path):
    calls = []
    generate_micro(micro_config(streams=2, table_rows=100, rate={"duration_s": 2.0}), tmp_path / "p",
                   progress=lambda done, total: calls.append((done, total)))
    assert calls[-1][1] == 2 * 2000 + 100
    assert calls[-1][0] == json.loads((tmp_path / "p" / "manifest.json").read_text())["total_rows"] + 100


def test_zipf_needs_bounded_id_range(tmp_path):
    # Refused by the config, at its key, before anything is generated (kit.config.MicroConfig).
    with pytest.raises(CepkitError, match="must be <= 50000000 with zipf_s > 0"):
        generate_micro(micro_config(zipf_s=1.0, max_id=2**31 - 1, rate={"duration_s": 1.0}), tmp_path / "z")
    assert not (tmp_path / "z").exists()


def test_cli_micro(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["datagen", "micro", "--seed", "3", "--streams", "2", "--table-rows", "100",
                 "--files", "2", "--set", "micro.rate.duration_s=5", "--set", "micro.rate.basis_rate_eps=1000",
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)
    m = json.loads((out / "manifest.json").read_text())
    assert m["seed"] == 3 and m["config"]["streams"] == 2 and m["table"]["rows"] == 100
    assert 9000 < m["total_rows"] < 11000 and len(m["files"]) == 5
    assert "[micro]" in (out / "config.toml").read_text()


def test_cli_micro_bad_config_one_line(tmp_path, capsys):
    assert main(["datagen", "micro", "--streams", "0", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == "cepkit: error: --streams (micro.streams): must be > 0, got 0\n"
    assert not (tmp_path / "x").exists()

