"""A hand-built Pairs tick trace with every number worked out: the validator's reference engine
and the Spark runtime's strategy logic are both checked against it. (A second trace, prices near
2^31 cents with tiny genuine crossings, follows below: `big_price_rows`.)

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

# alias, symbol1, symbol2, funds (cents), period (s), N, bandsMultiplier, stopLossPerc: as programs hold it.
STRATEGY_ROW = ("st_00001", A, B, 100_000, 1, 2, 0.5, 0.1)

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


# -- prices near 2^31 cents, ~190 ticks a period (issue 27) -----------------------------------------
# A second trace whose genuine band crossings are tiny in relative terms: A and B trade near 2^31
# cents, 190 ticks each a period; in some periods one A tick is one cent dearer, which moves A's
# period average by 1/190 cent and the ratio by D = 1/(190 * BIG_PRICE) ~ 2.45e-12 relative.
#
# Strategy st_00002: P = 1 s, N = 5, m = 1.0, q = 0.1, funds 1e11 cents. With `BIG_BUMPS` the
# ratios are 1 + D * bump (period q), and in units of D (mean, sd = the window's):
#
#   Indicator at  window (bumps)  ratio  mean  sd    upper  lower  signal
#   +5000         1 0 0 0 0       0      0.2   0.4   0.6   -0.2    first
#   +6000         0 0 0 0 1       1      0.2   0.4   0.6   -0.2    HIGH: FLAT -> SHORT_LONG, BUY B
#   +7000         0 0 0 1 1       1      0.4   0.49  0.89  -0.09   none (previous 1 >= 0.6)
#   +8000         0 0 1 1 1       1      0.6   0.49  1.09   0.11   none
#   +9000         0 1 1 1 1       1      0.8   0.4   1.2    0.4    none; no stop (1 < 1.1 ratio_pos)
#   +10000        1 1 1 1 0       0      0.8   0.4   1.2    0.4    LOW: SHORT_LONG -> LONG_SHORT
#
# sd = 0.4 D ~ 9.8e-13, below the old collapse threshold 1e-12 |avgRatio| (which silenced both
# crossings) and far above rounding (4 N eps |avgRatio| ~ 4.4e-15; PAIRS_SEMANTICS.md section 5).
# Each period opens with a B tick (the closing tick of the previous one), then A at +2 ms and B at
# +5 ms steps, the bumped A tick first, so every order trades at BIG_PRICE:
# BUY B 10 * floor(1e11 / (10 * BIG_PRICE)) = 40, balance 1e11 - 40 * BIG_PRICE; then SELL B 40 and
# BUY A 40. The last period (10, never closes) has one A trade at BIG_PRICE + 500: the strategy ends
# LONG_SHORT with 40 A, worth balance + 40 * (BIG_PRICE + 500) (section 10: the input's last trade).

BIG_PRICE = 2_147_483_000            # cents; int32 holds up to 2^31 - 1 = 2_147_483_647
BIG_TICKS = 190                      # ticks of each symbol a period
BIG_BUMPS = [1, 0, 0, 0, 0, 1, 1, 1, 1, 0]
BIG_END_PRICE = BIG_PRICE + 500
BIG_STRATEGY_ROW = ("st_00002", A, B, 100_000_000_000, 1, 5, 1.0, 0.1)
BIG_EXPECTED_ORDERS = [
    (6000, "BUY", B, BIG_PRICE, 40),
    (10000, "SELL", B, BIG_PRICE, 40), (10000, "BUY", A, BIG_PRICE, 40),
]
BIG_EXPECTED_FINAL = ("LONG_SHORT", A, 40, 100_000_000_000 - 40 * BIG_PRICE,
                      100_000_000_000 - 40 * BIG_PRICE + 40 * BIG_END_PRICE)


def big_price_rows() -> list[tuple[str, int, int]]:
    rows = []
    for q, bump in enumerate(BIG_BUMPS):
        base = T0 + 1000 * q
        for i in range(BIG_TICKS):
            rows.append((B, BIG_PRICE, base + 5 * i))
            rows.append((A, BIG_PRICE + (bump if i == 0 else 0), base + 5 * i + 2))
    end = T0 + 1000 * len(BIG_BUMPS)
    rows += [(B, BIG_PRICE, end), (A, BIG_END_PRICE, end + 2)]
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


# -- the JVM logic's traces (tests/spark_runtime/test_pairs_realtime.py, tests/flink_runtime/test_pairs_flink.py) --
# A JVM trace's output, one row per line: stream, strategy, the four doubles as their IEEE bits (an
# order's empty), type, symbol, price, size, inputTickTS, inputTS, ingestTS.
TRACE_COLUMNS = ["stream", "strategy", "ratio", "avgRatio", "upperBand", "lowerBand", "type", "symbol", "price",
                 "size", "inputTickTS", "inputTS", "ingestTS"]
TRACE_TICK_COLUMNS = ["symbol", "price", "tickTS", "TS", "offset", "ingestTS"]


def trace_ticks(rows):
    """Trace rows (symbol, price, tickTS) as a feed's ticks: TS = tickTS + 3, ingestTS = tickTS + 5."""
    import pandas as pd

    n = len(rows)
    return pd.DataFrame({"symbol": [r[0] for r in rows], "price": [r[1] for r in rows],
                         "tickTS": [r[2] for r in rows], "TS": [r[2] + 3 for r in rows], "offset": range(n),
                         "ingestTS": [r[2] + 5 for r in rows]})


def read_trace_output(path: Path):
    """A JVM trace's output file as a frame, the doubles as doubles (NaN for orders)."""
    import pandas as pd

    out = pd.read_csv(path, header=None, names=TRACE_COLUMNS, keep_default_na=False,
                      dtype={"type": str, "symbol": str})
    ind = out.stream == "Indicator"
    for col in ("ratio", "avgRatio", "upperBand", "lowerBand"):
        bits = np.where(ind, pd.to_numeric(out[col].where(ind, "0")), 0).astype(np.int64)
        out[col] = np.where(ind, bits.view(np.float64), np.nan)
    return out


def same_as_reference(got, ref) -> None:
    """Every reference answer once in `got`, the doubles bit for bit, and nothing else."""
    ind = got[got.stream == "Indicator"]
    key = ["strategy", "inputTickTS"]
    merged = ref.indicators.merge(ind, on=key, how="outer", indicator=True, suffixes=("_ref", ""))
    assert (merged["_merge"] == "both").all() and len(ind) == len(ref.indicators)
    for col in ("ratio", "avgRatio", "upperBand", "lowerBand"):
        assert (merged[col] == merged[f"{col}_ref"]).all(), col
    orders = got[got.stream == "MarketOrder"]
    m = ref.orders.merge(orders, on=key + ["type", "symbol"], how="outer", indicator=True, suffixes=("_ref", ""))
    assert (m["_merge"] == "both").all() and len(orders) == len(ref.orders)
    assert (m["price"] == m["price_ref"]).all() and (m["size"] == m["size_ref"]).all()
