"""Numbers in an input that size work, and valid logs the validator refused or ignored.

Every hostile number runs in a child process under a memory cap (tests/fuzz.py `run_capped`): on
the old code a Pairs output log whose run_start_wall_ms is 0 made the per-second series allocate
13.4 GiB, and the other fields here sized arrays the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kit.errors import CepkitError
from kit.records import INDICATOR, MARKET_ORDER
from tests.fuzz import run_capped
from validator.outputlog import read_output_log

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

PAIRS = {"Indicator": INDICATOR, "MarketOrder": MARKET_ORDER}
W0 = 1_790_000_000_000          # a wall-clock epoch ms in 2026
T0 = 1_767_623_400_000


def _indicators(arrivals) -> pd.DataFrame:
    n = len(arrivals)
    return pd.DataFrame({"strategy": ["st_00001"] * n, "ratio": [1.0] * n, "avgRatio": [1.0] * n,
                         "upperBand": [1.1] * n, "lowerBand": [0.9] * n, "inputTickTS": [T0 + i for i in range(n)],
                         "inputTS": [a - 5 for a in arrivals], "arrivalTS": list(arrivals)})


def _orders() -> pd.DataFrame:
    return pd.DataFrame({"strategy": pd.Series([], dtype=str), "type": pd.Series([], dtype=str),
                         "symbol": pd.Series([], dtype=str), "price": pd.Series([], dtype="int32"),
                         "size": pd.Series([], dtype="int32"), "inputTickTS": pd.Series([], dtype="int64"),
                         "inputTS": pd.Series([], dtype="int64"), "arrivalTS": pd.Series([], dtype="int64")})


def write_log(directory: Path, streams: dict[str, pd.DataFrame], fmt: str = "parquet", *, bom: bool = False,
              **meta) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, df in streams.items():
        file = f"{name}-00001.{fmt}"
        if fmt == "parquet":
            df.to_parquet(directory / file, index=False)
        else:
            (directory / file).write_bytes((b"\xef\xbb\xbf" if bom else b"") + df.to_csv(index=False).encode())
        entries[name] = {"files": [file]}
    doc = {"kind": "cepkit.output-log", "schema_version": 1, "format": fmt, "run_start_wall_ms": W0,
           "sim_start_ms": T0, "speed": 1.0, "pacing": "tickts", "streams": entries, **meta}
    (directory / "output-log.json").write_text(json.dumps(doc))
    return directory


# -- numbers that size work ----------------------------------------------------------------------

_SERIES = """
import sys
from validator.outputlog import read_output_log
from validator.latency import stream_latency
from kit.records import INDICATOR, MARKET_ORDER
log = read_output_log(sys.argv[1], {"Indicator": INDICATOR, "MarketOrder": MARKET_ORDER}, only=True)
s = stream_latency("Indicator", log.stream("Indicator"), log.clocks).series
print(len(s), s["second"].tolist()[:3], int(s["outputs"].sum()))
"""


def test_a_run_start_at_epoch_zero_does_not_size_the_per_second_series(tmp_path):
    log = write_log(tmp_path / "o", {"Indicator": _indicators([W0, W0 + 1500, W0 + 2100]),
                                     "MarketOrder": _orders()}, run_start_wall_ms=0)
    res = run_capped(_SERIES, str(log))
    assert res.returncode == 0, res.stderr[-2000:]
    # Three arrivals over three seconds: the series spans them, not the 1.79e9 s since the epoch.
    assert res.stdout.split() == ["3", f"[{W0 // 1000},", f"{W0 // 1000 + 1},", f"{W0 // 1000 + 2}]", "3"]


def test_an_arrival_far_after_the_others_lists_only_seconds_with_outputs(tmp_path):
    far = W0 + 10 ** 15                       # ~31,700 years later: a dense series would be 1e12 seconds
    log = write_log(tmp_path / "o", {"Indicator": _indicators([W0 + 100, W0 + 1100, far]),
                                     "MarketOrder": _orders()})
    res = run_capped(_SERIES, str(log))
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["3", "[0,", "1,", f"{10 ** 12}]", "3"]


def test_per_second_counts_of_far_stamps_are_bounded():
    code = """
from validator.latency import per_second_counts
c = per_second_counts([0, 1000, 10 ** 15], 0)
print(c["second"].tolist(), c["count"].tolist())
c = per_second_counts([0, 2500], 0)
print(c["second"].tolist(), c["count"].tolist())
"""
    res = run_capped(code)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.splitlines() == [f"[0, 1, {10 ** 12}] [1, 1, 1]", "[0, 1, 2] [1, 0, 1]"]


def test_adaptivity_recovery_buckets_follow_the_outputs_not_their_span():
    code = """
import numpy as np
from validator.adaptivity import recovery_instant
a = np.array([1000.0, 1500.0, 1000.0 + 1e15])
lat = np.array([90.0, 80.0, 5.0])
print(recovery_instant(a, lat, 1000.0, 10.0, 1))
print(recovery_instant(a[:2], lat[:2], 1000.0, 85.0, 100))
"""
    res = run_capped(code)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == [repr(1000.0 + 1e15), "1500.0"]


def test_a_time_window_over_a_huge_span_of_ts_is_refused_before_allocating():
    """TS jumps by 4e12 ms with a 1 ms slide: 4e12 window ends (32 TB) were allocated before the
    count was checked."""
    code = """
import pandas as pd
from kit.errors import CepkitError
from kit.workload.queries import TimeWindowAggregation
from kit.workload.query_base import Aggregate
from validator.micro_windows import time_window
q = TimeWindowAggregation(id="q1", input="S1", range_ms=1, slide_ms=1, aggregates=(Aggregate("COUNT", None, "n"),))
df = pd.DataFrame({"ID": [1, 2], "A1": [0.5, 0.5], "TS": [0, 4 * 10 ** 12]})
try:
    time_window(q, df)
except CepkitError as e:
    print(e)
"""
    res = run_capped(code)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "query q1: 4,000,000,000,000 windows x 1 groups is too many for the reference engine"


# -- valid input that was refused or ignored ------------------------------------------------------

def test_a_csv_log_with_a_byte_order_mark_is_read(tmp_path):
    """What spreadsheet programs write: the mark once made the first column 'missing'."""
    log = write_log(tmp_path / "o", {"Indicator": _indicators([W0 + 10, W0 + 20]), "MarketOrder": _orders()},
                    "csv", bom=True)
    read = read_output_log(log, PAIRS, only=True)
    ind = read.stream("Indicator")
    assert list(ind.columns)[:2] == ["strategy", "ratio"]
    assert ind["strategy"].tolist() == ["st_00001", "st_00001"] and ind["arrivalTS"].tolist() == [W0 + 10, W0 + 20]


def test_a_stream_the_spec_does_not_have_is_reported(tmp_path):
    log = write_log(tmp_path / "o", {"Indicator": _indicators([W0 + 10]), "MarketOrder": _orders(),
                                     "MarketOrders": _orders()})
    with pytest.raises(CepkitError) as e:
        read_output_log(log, PAIRS, only=True)
    assert str(e.value) == (f"{log / 'output-log.json'}:streams.MarketOrders: a stream the spec does not have "
                            "(it has Indicator, MarketOrder); was it written under another name?")
    # Reading a run for a comparison (no `only`) still reads every stream.
    assert len(read_output_log(log, PAIRS).stream("MarketOrders")) == 0

