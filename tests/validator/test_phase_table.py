"""The per-phase table: inputs split by phase, outputs placed by inputTS, latency per phase."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kit.profiles import Phase, RateProfile
from validator.latency import latency_stats
from validator.outputlog import Clocks
from validator.phase_table import phase_rows, phase_table_text

W0 = 1_700_000_000_000      # the run's wall start
T0 = 1_600_000_000_000      # its simulated start
PROFILE = RateProfile("two", (Phase("calm", 10_000, 100.0, 100.0), Phase("busy", 5_500, 400.0, 200.0, measured=True)))


def outputs(input_run_ms, latency_ms, speed=1.0) -> pd.DataFrame:
    inp = W0 + np.asarray(input_run_ms, dtype=np.int64) // int(speed)
    return pd.DataFrame({"inputTS": inp, "arrivalTS": inp + np.asarray(latency_ms, dtype=np.int64)})


def per_second(counts) -> pd.DataFrame:
    return pd.DataFrame({"second": np.arange(len(counts)), "count": counts})


def test_inputs_split_at_phase_edges_even_inside_a_second():
    counts = [100] * 10 + [400, 300, 300, 200, 200, 200]     # 16 s; "busy" ends at 15.5 s
    rows = phase_rows(PROFILE, None, {}, per_second(counts))
    assert [r.input_events for r in rows] == [1000, 400 + 300 + 300 + 200 + 200 + 100]
    assert rows[0].input_rate_eps == pytest.approx(100.0)
    assert rows[1].input_rate_eps == pytest.approx(1500 / 5.5)
    assert sum(r.input_events for r in rows) == sum(counts) - 100     # the half second after the run


def test_outputs_go_to_the_phase_of_their_triggering_event():
    clocks = Clocks(W0, T0, 1.0)
    calm = outputs([0, 5_000, 9_999], [10, 20, 30])
    busy = outputs([10_000, 12_000, 15_499], [100, 300, 200])
    outside = outputs([-5, 15_500], [7, 7])     # before the run and after its end: no phase
    df = pd.concat([calm, busy, outside], ignore_index=True)
    rows = phase_rows(PROFILE, clocks, {"MarketOrder": df})
    assert [r.outputs("MarketOrder") for r in rows] == [3, 3]
    assert rows[0].latency["MarketOrder"] == latency_stats(np.array([10, 20, 30]))
    assert rows[1].latency["MarketOrder"].p50_ms == 200
    assert rows[1].latency["MarketOrder"].p99_ms == 300
    assert rows[1].measured and not rows[0].measured
    assert rows[0].input_events is None


def test_speed_maps_wall_time_onto_the_profile():
    clocks = Clocks(W0, T0, 4.0)      # 4 simulated ms per wall ms: 10 s of profile in 2.5 wall s
    df = pd.DataFrame({"inputTS": [W0 + 2_400, W0 + 2_600], "arrivalTS": [W0 + 2_450, W0 + 2_700]})
    rows = phase_rows(PROFILE, clocks, {"Indicator": df})
    assert [r.outputs("Indicator") for r in rows] == [1, 1]
    assert rows[1].latency["Indicator"].max_ms == 100


def test_empty_stream_and_text():
    clocks = Clocks(W0, T0, 1.0)
    rows = phase_rows(PROFILE, clocks, {"MarketOrder": outputs([], []), "Indicator": outputs([1_000], [5])},
                      per_second([100] * 16))
    assert rows[0].latency["MarketOrder"].empty
    text = phase_table_text(rows, ("MarketOrder", "Indicator"))
    lines = text.splitlines()
    assert lines[0].startswith("per phase")
    assert "MarketOrder p99 ms" in lines[1]
    assert lines[2].startswith("calm ") and lines[3].startswith("busy *")
    assert "max of 1: too few" in lines[2]     # the one Indicator of "calm": its p99 is its maximum
    d = rows[1].to_dict()
    assert d["input_events"] == 550 and d["streams"]["MarketOrder"]["count"] == 0
