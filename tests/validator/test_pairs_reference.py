"""The Pairs reference engine against a hand-built tick trace with every number worked out.

Strategy st_00001 over AAAAAA (symbol1) and BBBBBB (symbol2): P = 1 s, N = 2, m = 0.5,
q = 0.1, funds 100000 cents. With N = 2 the window [a, b] has mean (a+b)/2 and population sd
|b-a|/2, so upper = mean + |b-a|/4 and lower = mean - |b-a|/4: a rise puts the ratio above its
upper band and a fall below its lower band, with wide margins (no float ties).

BBBBBB always trades at 1000, so ratio = avg(AAAAAA) / 1000. CCCCCC is monitored by nobody.
Period q spans [t0 + 1000 q, t0 + 1000 (q+1)). Each period opens with a tick at +0 (the
closing tick of the previous period), then AAAAAA at +400 (sometimes a second at +700) and
BBBBBB at +500. Period 8 has no BBBBBB tick, so it yields no ratio.

  q  A prices        ratio  Indicator (window)        signal/state            orders (at close of q)
  0  2000            2.00   -                         -
  1  2100            2.10   1 [2.00 2.10] first       none
  2  1990, 2010      2.00   2 [2.10 2.00]             LOW: FLAT->LS           BUY A 2010 x 10*floor(100000/20100)=40, B=19600
  3  2200            2.20   3 [2.00 2.20]             HIGH: LS->SL            closing tick is A@2250: SELL A 2250x40 (+90000 -> 109600),
                                                                              BUY B 1000 x 100, B=9600, pos=2.2
  4  2250(open),2550 2.40   4 [2.20 2.40]             none; 2.4 < 1.1*2.2
  5  2500            2.50   5 [2.40 2.50]             none; stop 2.5 >= 2.42  SELL B 1000x100, B=109600 -> FLAT
  6  2300            2.30   6 [2.50 2.30]             LOW: FLAT->LS           BUY A 2300 x 10*floor(109600/23000)=40, B=17600, pos=2.3
  7  2300            2.30   7 [2.30 2.30] collapsed   none; 2.3 > 0.9*2.3
  8  2330 (no B)     -      -                         skipped
  9  2400            2.40   8 [2.30 2.40]             none (prev not below band)
 10  2350            2.35   9 [2.40 2.35]             LOW while LS: nothing
 11  2000            2.00  10 [2.35 2.00]             none; stop 2.0 <= 2.07  SELL A 2000x40, B=97600 -> FLAT
 12  2100            2.10  11 [2.00 2.10]             HIGH: FLAT->SL          closing tick is B@1000: BUY B 1000 x 90, B=7600, pos=2.1
 13  2050            2.05  12 [2.10 2.05]             LOW: SL->LS             SELL B 1000x90 (-> 97600), BUY A 2050 x 40, B=15600
 14  2000            2.00  13 [2.05 2.00]             none; 2.0 > 0.9*2.05
 15  2100            2.10  14 [2.00 2.10]             HIGH: LS->SL            SELL A 2100x40 (-> 99600), BUY B 1000 x 90, B=9600, pos=2.1
 16  2150            2.15  15 [2.10 2.15]             none
 17  2150            2.15  16 [2.15 2.15] collapsed   none
 18  2120            2.12  17 [2.15 2.12]             none (prev band collapsed)
 19  2200            2.20  18 [2.12 2.20]             HIGH while SL: nothing; 2.2 < 2.31
 20  2350            2.35  19 [2.20 2.35]             none; stop 2.35 >= 2.31 SELL B 1000x90, B=99600 -> FLAT
 21  2400            -      -                         last period never closes
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kit.errors import CepkitError
from validator.pairs_reference import StrategyParams, compute_reference

T0 = 1_767_623_400_000
A, B, C = "AAAAAA", "BBBBBB", "CCCCCC"

# Per period: opener (symbol, price) at +0, then AAAAAA prices at +400 (+700), BBBBBB at +500.
PERIODS = [
    ((C, 7), [2000], True), ((C, 7), [2100], True), ((C, 7), [1990, 2010], True), ((C, 7), [2200], True),
    ((A, 2250), [2550], True), ((C, 7), [2500], True), ((C, 7), [2300], True), ((C, 7), [2300], True),
    ((C, 7), [2330], False), ((C, 7), [2400], True), ((C, 7), [2350], True), ((C, 7), [2000], True),
    ((C, 7), [2100], True), ((B, 1000), [2050], True), ((C, 7), [2000], True), ((C, 7), [2100], True),
    ((C, 7), [2150], True), ((C, 7), [2150], True), ((C, 7), [2120], True), ((C, 7), [2200], True),
    ((C, 7), [2350], True), ((C, 7), [2400], True),
]

STRATEGY = StrategyParams("st_00001", A, B, available_funds_cents=100_000, period_length_s=1, num_periods=2,
                          bands_multiplier=0.5, stop_loss_perc=0.1)

# (closing tick at t0 + ms, ratio, avgRatio, upperBand, lowerBand), worked out in the docstring table.
EXPECTED_INDICATORS = [
    (2000, 2.10, 2.05, 2.075, 2.025), (3000, 2.00, 2.05, 2.075, 2.025), (4000, 2.20, 2.10, 2.15, 2.05),
    (5000, 2.40, 2.30, 2.35, 2.25), (6000, 2.50, 2.45, 2.475, 2.425), (7000, 2.30, 2.40, 2.45, 2.35),
    (8000, 2.30, 2.30, 2.30, 2.30), (10000, 2.40, 2.35, 2.375, 2.325), (11000, 2.35, 2.375, 2.3875, 2.3625),
    (12000, 2.00, 2.175, 2.2625, 2.0875), (13000, 2.10, 2.05, 2.075, 2.025), (14000, 2.05, 2.075, 2.0875, 2.0625),
    (15000, 2.00, 2.025, 2.0375, 2.0125), (16000, 2.10, 2.05, 2.075, 2.025), (17000, 2.15, 2.125, 2.1375, 2.1125),
    (18000, 2.15, 2.15, 2.15, 2.15), (19000, 2.12, 2.135, 2.1425, 2.1275), (20000, 2.20, 2.16, 2.18, 2.14),
    (21000, 2.35, 2.275, 2.3125, 2.2375),
]

EXPECTED_ORDERS = [
    (3000, "BUY", A, 2010, 40),
    (4000, "SELL", A, 2250, 40), (4000, "BUY", B, 1000, 100),
    (6000, "SELL", B, 1000, 100),
    (7000, "BUY", A, 2300, 40),
    (12000, "SELL", A, 2000, 40),
    (13000, "BUY", B, 1000, 90),
    (14000, "SELL", B, 1000, 90), (14000, "BUY", A, 2050, 40),
    (16000, "SELL", A, 2100, 40), (16000, "BUY", B, 1000, 90),
    (21000, "SELL", B, 1000, 90),
]


def trace_rows() -> list[tuple[str, int, int]]:
    rows = []
    for q, ((osym, oprice), a_prices, has_b) in enumerate(PERIODS):
        base = T0 + 1000 * q
        rows.append((osym, oprice, base))
        rows.append((A, a_prices[0], base + 400))
        if has_b:
            rows.append((B, 1000, base + 500))
        if len(a_prices) > 1:
            rows.append((A, a_prices[1], base + 700))
    return rows


def write_dataset(directory: Path, rows, files: int = 1) -> Path:
    """A dataset in the documented layout (specs/DATA.md), written without the generator."""
    directory.mkdir(parents=True)
    parts = np.array_split(np.arange(len(rows)), files)
    listed = []
    for i, idx in enumerate(parts):
        name = f"ticks-{i + 1:05d}-of-{files:05d}.parquet"
        sel = [rows[j] for j in idx]
        table = pa.table({"symbol": [r[0] for r in sel], "price": pa.array([r[1] for r in sel], pa.int32()),
                          "size": pa.array([100] * len(sel), pa.int32()),
                          "tickTS": pa.array([r[2] for r in sel], pa.int64())})
        pq.write_table(table, directory / name)
        listed.append({"path": name, "rows": len(sel), "bytes": (directory / name).stat().st_size,
                       "sha256": hashlib.sha256((directory / name).read_bytes()).hexdigest()})
    (directory / "manifest.json").write_text(json.dumps(
        {"kind": "cepkit.datagen-manifest", "schema_version": 1, "format": "parquet", "start_epoch_ms": T0,
         "files": listed}))
    return directory


@pytest.mark.parametrize("files", [1, 4])
def test_hand_built_trace(tmp_path, files):
    ref = compute_reference(write_dataset(tmp_path / "ds", trace_rows(), files), [STRATEGY])
    ind = ref.indicators
    assert list(ind["strategy"].unique()) == ["st_00001"]
    assert (ind["inputTickTS"] - T0).tolist() == [e[0] for e in EXPECTED_INDICATORS]
    for col, j in (("ratio", 1), ("avgRatio", 2), ("upperBand", 3), ("lowerBand", 4)):
        assert np.allclose(ind[col].to_numpy(), [e[j] for e in EXPECTED_INDICATORS], rtol=0, atol=1e-12), col
    got = [(int(r.inputTickTS - T0), r.type, r.symbol, int(r.price), int(r.size)) for r in ref.orders.itertuples()]
    assert got == EXPECTED_ORDERS
    final = ref.final.iloc[0]
    assert (final.state, final.shares, final.balance_cents, final.value_cents) == ("FLAT", 0, 99_600, 99_600)


def test_closing_tick_offsets_point_at_the_closing_tick(tmp_path):
    rows = trace_rows()
    ref = compute_reference(write_dataset(tmp_path / "ds", rows), [STRATEGY])
    for r in ref.indicators.itertuples():
        sym, _, ts = rows[r.inputOffset]
        assert ts == r.inputTickTS and ts % 1000 == 0
    # The close at +4000 is the AAAAAA tick at 2250; the one at +13000 a BBBBBB tick.
    assert rows[ref.indicators.inputOffset[2]][:2] == (A, 2250)
    assert rows[ref.indicators.inputOffset[10]][:2] == (B, 1000)


def test_open_position_is_marked_to_market(tmp_path):
    # Cut the trace after period 16 (closes 15): the strategy is SHORT_LONG holding 90 BBBBBB.
    rows = [r for r in trace_rows() if r[2] < T0 + 17_000]
    ref = compute_reference(write_dataset(tmp_path / "ds", rows), [STRATEGY])
    final = ref.final.iloc[0]
    assert (final.state, final.held, final.shares, final.balance_cents) == ("SHORT_LONG", B, 90, 9_600)
    assert final.value_cents == 9_600 + 90 * 1000


def test_strategies_are_independent_and_periods_epoch_aligned(tmp_path):
    # A 2-second strategy over the same trace closes at even seconds only and sees pairs of periods.
    two = StrategyParams("st_00002", A, B, 100_000, period_length_s=2, num_periods=2, bands_multiplier=0.5,
                         stop_loss_perc=0.1)
    ref = compute_reference(write_dataset(tmp_path / "ds", trace_rows()), [STRATEGY, two])
    one = ref.indicators[ref.indicators.strategy == "st_00001"]
    assert len(one) == len(EXPECTED_INDICATORS)
    st2 = ref.indicators[ref.indicators.strategy == "st_00002"]
    assert ((st2.inputTickTS - T0) % 2000 == 0).all()
    # Its first window: periods [0,2000) and [2000,4000). A avg (2000+2100)/2 and (1990+2010+2200)/3.
    r0, r1 = 2050 / 1000, (1990 + 2010 + 2200) / 3 / 1000
    assert st2.ratio.iloc[0] == pytest.approx(r1, abs=1e-12)
    assert st2.avgRatio.iloc[0] == pytest.approx((r0 + r1) / 2, abs=1e-12)
    assert st2.inputTickTS.iloc[0] - T0 == 4000


def test_ticks_out_of_time_order_are_refused(tmp_path):
    rows = trace_rows()
    rows[5], rows[6] = rows[6], rows[5]
    with pytest.raises(CepkitError, match=r"ticks-00001-of-00001.parquet:tickTS: data row 7: .* tickTS goes backwards"):
        compute_reference(write_dataset(tmp_path / "ds", rows), [STRATEGY])


# -- issue 14 --------------------------------------------------------------------------------

def test_batches_without_a_monitored_tick(tmp_path):
    """Finding 1: a read batch holding no tick of a monitored symbol (here: one file per tick, so the
    CCCCCC ticks in mid-period are batches of their own) gave np.bincount an empty key, which
    returns int64 even with weights; adding the open period's float sums to it raised
    UFuncOutputCastingError on main."""
    rows = sorted(trace_rows() + [(C, 7, T0 + 1000 * q + 600) for q in range(len(PERIODS))], key=lambda r: r[2])
    one = compute_reference(write_dataset(tmp_path / "one", rows), [STRATEGY])
    many = compute_reference(write_dataset(tmp_path / "many", rows, files=len(rows)), [STRATEGY])
    assert many.indicators.drop(columns="inputOffset").equals(one.indicators.drop(columns="inputOffset"))
    assert many.orders.equals(one.orders) and many.final.equals(one.final)


def test_a_trace_that_only_ever_sees_other_symbols(tmp_path):
    rows = [(C, 7, T0 + 250 * i) for i in range(20)]
    with pytest.raises(CepkitError, match=r"strategies:st_00001: symbol AAAAAA is not a symbol of the dataset "
                                          r"\(no tick of it in"):
        compute_reference(write_dataset(tmp_path / "ds", rows, files=3), [STRATEGY])


def test_symbols_come_from_pairs_aux_when_listed(tmp_path):
    """Finding 8: a strategy over a symbol the dataset does not have was accepted on main."""
    ds = write_dataset(tmp_path / "ds", trace_rows())
    m = json.loads((ds / "manifest.json").read_text())
    m["aux_file"] = "pairs-aux.json"
    (ds / "manifest.json").write_text(json.dumps(m))
    aux = {"kind": "cepkit.pairs-aux", "schema_version": 1, "scale_factor": 1, "markets": 1, "num_strategies": 1,
           "max_strategies_per_pair": 10, "seed": 1, "symbols": [{"symbol": s, "market": 0} for s in (A, C)],
           "correlations": [{"symbol1": A, "symbol2": C, "market": 0}]}
    (ds / "pairs-aux.json").write_text(json.dumps(aux))
    with pytest.raises(CepkitError) as e:
        compute_reference(ds, [STRATEGY], strategies_file=tmp_path / "s.xml")
    assert str(e.value) == f"{tmp_path / 's.xml'}:st_00001: symbol BBBBBB is not a symbol of the dataset " \
                           f"({ds / 'pairs-aux.json'} lists 2 symbols)"


def _table(rows, **override) -> pa.Table:
    cols = {"symbol": pa.array([r[0] for r in rows]), "price": pa.array([r[1] for r in rows], pa.int32()),
            "size": pa.array([100] * len(rows), pa.int32()), "tickTS": pa.array([r[2] for r in rows], pa.int64())}
    cols.update(override)
    return pa.table({k: v for k, v in cols.items() if v is not None})


def _rewrite(ds: Path, table: pa.Table | None = None, csv_text: str | None = None) -> Path:
    """Replace the one tick file of `ds` and fix its manifest entry (rows, bytes, sha256)."""
    m = json.loads((ds / "manifest.json").read_text())
    f = ds / m["files"][0]["path"]
    if table is not None:
        pq.write_table(table, f)
        rows = table.num_rows
    else:
        f.unlink()
        f = f.with_suffix(".csv")
        f.write_text(csv_text)
        m["format"] = "csv"
        rows = csv_text.count("\n") - 1
    m["files"][0].update(path=f.name, rows=rows, bytes=f.stat().st_size,
                         sha256=hashlib.sha256(f.read_bytes()).hexdigest())
    (ds / "manifest.json").write_text(json.dumps(m))
    return f


@pytest.mark.parametrize("override, match", [
    ({"price": None}, r":price: missing column"),
    ({"price": pa.array(["1"] * 3)}, r":price: expected an integer column, got string"),
    ({"tickTS": pa.array([T0 * 1.0] * 3)}, r":tickTS: expected an integer column, got double"),
    ({"symbol": pa.array([1, 2, 3])}, r":symbol: expected a string column, got int64"),
    ({"price": pa.array([5, None, 7], pa.int32())}, r":price: data row 2: is empty \(null\)"),
    ({"price": pa.array([5, 0, 7], pa.int32())}, r":price: data row 2: 0 is not a price in cents"),
    ({"tickTS": pa.array([T0, None, T0], pa.int64())}, r":tickTS: data row 2: is empty"),
])
def test_unreadable_parquet_columns_name_file_and_column(tmp_path, override, match):
    rows = [(A, 5, T0), (B, 6, T0 + 1), (A, 7, T0 + 2)]
    ds = write_dataset(tmp_path / "ds", rows)
    f = _rewrite(ds, _table(rows, **override))
    with pytest.raises(CepkitError, match=f"^{f}{match}"):
        compute_reference(ds, [STRATEGY])


@pytest.mark.parametrize("text, match", [
    ("symbol,price,tickTS\nAAAAAA,5,1\nBBBBBB,abc,2\n", r":3: column price: 'abc' is not an integer"),
    ("symbol,price,tickTS\nAAAAAA,5,1\nBBBBBB,6,2.5\n", r":3: column tickTS: '2.5' is not an integer"),
    ("symbol,price,tickTS\nAAAAAA,5,1\nBBBBBB,,2\n", r":3: column price: is empty \(null\)"),
    ("symbol,prize,tickTS\nAAAAAA,5,1\n", r":price: missing column \(the header has symbol, prize, tickTS\)"),
    ("symbol,price,tickTS\nAAAAAA,-5,1\n", r":2: column price: -5 is not a price in cents"),
])
def test_unreadable_csv_columns_name_file_line_and_column(tmp_path, text, match):
    ds = write_dataset(tmp_path / "ds", [(A, 5, T0)])
    f = _rewrite(ds, csv_text=text)
    with pytest.raises(CepkitError, match=f"^{f}{match}"):
        compute_reference(ds, [STRATEGY])


def test_input_per_second_and_a_far_origin(tmp_path):
    """The per-second input series counts every tick; an origin far before the ticks (a manifest's
    start_epoch_ms of 0) costs nothing (on main: a bincount over ~1.8e9 seconds, ~14 GB)."""
    rows = trace_rows()
    ds = write_dataset(tmp_path / "ds", rows, files=3)
    ref = compute_reference(ds, [STRATEGY], count_from_ms=T0)
    series = ref.input_per_second
    assert series["second"].tolist() == list(range(22)) and series["count"].sum() == len(rows)
    assert series["count"].tolist()[:3] == [3, 3, 4]
    m = json.loads((ds / "manifest.json").read_text())
    m["start_epoch_ms"] = 0
    (ds / "manifest.json").write_text(json.dumps(m))
    far = compute_reference(ds, [STRATEGY], count_from_ms=0).input_per_second
    assert far["second"].tolist() == [(T0 // 1000) + s for s in range(22)]
    assert far["count"].tolist() == series["count"].tolist()


def test_ticks_before_the_run_start_are_refused(tmp_path):
    ds = write_dataset(tmp_path / "ds", trace_rows())
    m = json.loads((ds / "manifest.json").read_text())
    m["start_epoch_ms"] = T0 + 1
    (ds / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(CepkitError, match=r"parquet:tickTS: data row 1: \d+ is before the run start, manifest.json's "
                                          r"start_epoch_ms"):
        compute_reference(ds, [STRATEGY])
