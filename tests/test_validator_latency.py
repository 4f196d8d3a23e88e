"""Latency statistics, per-second series, the measurement-interval cut, pscore and the 4.5.5
adaptivity metrics, each on data whose answer is worked out by hand here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kit.errors import CepkitError
from kit.profiles import Phase, RateProfile, standard_profile
from kit.scale import load
from validator.adaptivity import adaptivity_metrics
from validator.latency import (event_time_latency_ms, latency_stats, measurement_mask, per_second_counts,
                               per_second_series, phase_index, processing_time_latency_ms, pscore_for_run,
                               stream_latency)
from validator.outputlog import Clocks

W0 = 1_790_000_000_000
T0 = 1_767_623_400_000


def stamped(input_run_ms, latency_ms, clocks=Clocks(W0, T0, 1.0), ingest_ms=None) -> pd.DataFrame:
    """Output rows released at run times `input_run_ms` (speed 1) arriving `latency_ms` later."""
    input_ts = W0 + np.asarray(input_run_ms, dtype=np.int64)
    df = pd.DataFrame({"inputTS": input_ts, "arrivalTS": input_ts + np.asarray(latency_ms, dtype=np.int64)})
    if ingest_ms is not None:
        df["ingestTS"] = input_ts + np.asarray(ingest_ms, dtype=np.int64)
    return df


# -- statistics ------------------------------------------------------------------------------

def test_stats_of_ten_values():
    lat = np.array([41, -5, 7, 100, 0, 12, 3, 40, 7, 10])
    s = latency_stats(lat)
    # Sorted: -5 0 3 7 7 10 12 40 41 100. Nearest rank ceil(p*10): p50 -> 5th, p90 -> 9th,
    # p95 -> ceil(9.5) = 10th, p99 -> 10th, p99.9 -> 10th.
    assert (s.count, s.min_ms, s.max_ms) == (10, -5, 100)
    assert s.mean_ms == 21.5                                  # 215 / 10
    assert (s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms, s.p999_ms) == (7, 41, 100, 100, 100)
    assert s.negatives == 1


def test_stats_of_one_to_a_thousand():
    lat = np.random.default_rng(1).permutation(np.arange(1, 1001))
    s = latency_stats(lat)
    assert (s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms, s.p999_ms) == (500, 900, 950, 990, 999)
    assert (s.mean_ms, s.min_ms, s.max_ms, s.negatives) == (500.5, 1, 1000, 0)
    # numpy's inverted_cdf is the same rule but its floating 0.999 * 1000 rounds up to rank 1000.
    assert np.percentile(lat, 99.9, method="inverted_cdf") == 1000


def test_stats_agree_with_numpy_inverted_cdf():
    rng = np.random.default_rng(2)
    for n in (1, 2, 3, 7, 99, 101, 257, 999, 1001, 4321):
        lat = rng.integers(-3, 5000, n)
        s = latency_stats(lat)
        for value, p in ((s.p50_ms, 50), (s.p90_ms, 90), (s.p95_ms, 95), (s.p99_ms, 99), (s.p999_ms, 99.9)):
            assert value == np.percentile(lat, p, method="inverted_cdf"), (n, p)


def test_empty_stats():
    s = latency_stats(np.array([], dtype=np.int64))
    assert (s.count, s.mean_ms, s.p99_ms, s.negatives, s.empty) == (0, None, None, 0, True)


def test_event_and_processing_latency():
    df = stamped([0, 10, 20], [5, 7, -2], ingest_ms=[1, 1, 1])
    assert event_time_latency_ms(df).tolist() == [5, 7, -2]
    assert processing_time_latency_ms(df).tolist() == [4, 6, -3]
    assert processing_time_latency_ms(df.drop(columns="ingestTS")) is None
    # A row without an inputTS has no latency.
    df["inputTS"] = pd.array([W0, pd.NA, W0 + 20], dtype="Int64")
    assert event_time_latency_ms(df).tolist() == [5, -2]


def test_per_second_series():
    clocks = Clocks(W0, T0, 1.0)
    # Arrivals at +100 (lat 5), +200 (lat 50), +900 (lat 10), +2500 (lat 7) ms after the run start.
    df = pd.DataFrame({"arrivalTS": W0 + np.array([100, 200, 900, 2500]),
                       "inputTS": W0 + np.array([95, 150, 890, 2493])})
    s = per_second_series(df, clocks)
    assert s["second"].tolist() == [0, 1, 2]
    assert s["outputs"].tolist() == [3, 0, 1]
    # Second 0 holds 5, 10, 50: p50 = rank ceil(1.5) = 2nd = 10, p99 = rank 3 = 50.
    assert s["p50_ms"].tolist()[0::2] == [10, 7] and s["p99_ms"].tolist()[0::2] == [50, 7]
    assert np.isnan(s["p50_ms"][1]) and np.isnan(s["p99_ms"][1])


def test_per_second_counts():
    c = per_second_counts(T0 + np.array([0, 999, 1000, 3500, -1]), T0, seconds=5)
    assert c["count"].tolist() == [2, 1, 0, 1, 0]


# -- phases, measurement interval, pscore ----------------------------------------------------

SMALL = RateProfile("small", (Phase("a", 10_000, 10, 10), Phase("b", 20_000, 10, 10, measured=True),
                              Phase("c", 10_000, 10, 10)))


def test_phase_assignment_with_speed():
    clocks = Clocks(W0, T0, speed=2.0)      # one wall ms is two simulated ms
    wall = W0 + np.array([-1, 0, 4_999, 5_000, 14_999, 15_000, 19_999, 20_000])
    # Simulated ms since the start: -2, 0, 9998, 10000, 29998, 30000, 39998, 40000.
    assert phase_index(wall, SMALL, clocks).tolist() == [-1, 0, 0, 1, 1, 2, 2, -1]
    assert measurement_mask(wall, SMALL, clocks).tolist() == [False, False, False, True, True, False, False, False]


def test_pscore_over_the_measurement_interval():
    clocks = Clocks(W0, T0, 1.0)
    # 100 orders inside the MI [10 s, 30 s) with latencies 1..100 ms, and slow ones outside it.
    inside = stamped(10_000 + 100 * np.arange(100), np.arange(1, 101))
    outside = stamped([0, 9_999, 30_000, 39_000], [9_000, 9_000, 9_000, 9_000])
    orders = pd.concat([outside.iloc[:2], inside, outside.iloc[2:]], ignore_index=True)
    p = pscore_for_run(2, orders, SMALL, clocks)
    # load(2) = 2*1 + 2*(10*0 + 1 + 1) = 6; p99 of 1..100 is rank 99 = 99 ms; 6 / 0.099 s.
    assert load(2) == 6
    assert (p.load, p.mi_rows, p.p99_latency_s) == (6, 100, 0.099)
    assert p.pscore == pytest.approx(60.606060606, rel=1e-9)
    assert (p.mi_start_ms, p.mi_end_ms) == (10_000, 30_000)


def test_pscore_on_the_standard_profile_uses_minutes_31_to_91():
    prof = standard_profile(5000, 7500)
    clocks = Clocks(W0, T0, 1.0)
    minute = 60_000
    orders = stamped([30 * minute, 31 * minute, 60 * minute, 91 * minute - 1, 91 * minute], [900, 63, 20, 40, 900])
    p = pscore_for_run(1, orders, prof, clocks)
    # MI rows: 63, 20, 40 ms -> p99 = rank ceil(2.97) = 3rd = 63 ms; Table 7.1's SF=1 engine X: 47.62.
    assert p.mi_rows == 3 and p.p99_latency_s == 0.063
    assert round(p.pscore, 2) == 47.62


def test_pscore_without_rows_in_the_interval():
    clocks = Clocks(W0, T0, 1.0)
    with pytest.raises(CepkitError, match=r"none of the 2 orders has its inputTS in the measurement interval "
                                          r"\[10 s, 30 s\) of profile small"):
        pscore_for_run(1, stamped([0, 35_000], [5, 5]), SMALL, clocks)
    with pytest.raises(CepkitError, match="no orders"):
        pscore_for_run(1, stamped([], []), SMALL, clocks)


def test_stream_latency_cuts_stats_to_the_interval():
    clocks = Clocks(W0, T0, 1.0)
    df = stamped([5_000, 12_000, 13_000, 35_000], [1_000, 10, 30, 2_000], ingest_ms=[0, 4, 4, 0])
    s = stream_latency("MarketOrder", df, clocks, SMALL)
    assert (s.event.count, s.event.max_ms, s.processing.max_ms) == (2, 30, 26)
    assert s.series["outputs"].sum() == 4           # the series covers the whole run


# -- adaptivity (4.5.5) ----------------------------------------------------------------------

# Same phase names as kit.profiles.adaptivity_profile, shorter: warm-up [0, 10 s), steady
# [10, 30 s), peak [30, 35 s), recovery [35, 55 s).
BURST = RateProfile("adaptivity", (Phase("warm-up", 10_000, 0, 10), Phase("steady", 20_000, 10, 10, True),
                                   Phase("peak", 5_000, 15, 15, True), Phase("recovery", 20_000, 10, 10, True)))


def burst_trace(recovery_latency=None) -> pd.DataFrame:
    """One output per input second. Warm-up: 5000 ms (JIT; must not count). Steady: 10, 30, 10,
    30, ... (mean 20, p99.9 30). Peak inputs at 30..34 s: 1000, 2000, 3000, 2500, 2000 ms. Recovery
    inputs at 35..39 s: 1200, 5, 15, 40, 12 ms, then 10, 30, ... up to 54 s."""
    t = np.arange(0, 55) * 1000
    lat = np.empty(55, dtype=np.int64)
    lat[0:10] = 5000
    lat[10:30] = np.tile([10, 30], 10)
    lat[30:35] = [1000, 2000, 3000, 2500, 2000]
    lat[35:40] = [1200, 5, 15, 40, 12]
    lat[40:55] = np.tile([10, 30], 8)[:15]
    if recovery_latency is not None:
        lat[35:55] = recovery_latency
    return stamped(t, lat)


def test_adaptivity_metrics_smoothed():
    m = adaptivity_metrics(burst_trace(), BURST, Clocks(W0, T0, 1.0))
    assert m.steady_mean_ms == 20.0 and (m.steady_outputs, m.peak_outputs) == (20, 5)
    # Maximum over outputs triggered at or after 30 s: 3000 (the warm-up's 5000 is before the peak).
    assert m.max_peak_latency_ms == 3000
    # p99.9 peak = rank 5 of 5 = 3000; p99.9 steady = rank ceil(19.98) = 20th = 30.
    assert (m.peak_p999_ms, m.steady_p999_ms, m.degradation_ratio) == (3000, 30, 100.0)
    # tau_peak = end of the peak = 35 s. Arrivals from then on, in 1 s buckets:
    #   [35, 36): 35.000 (3000), 35.500 (2500)             mean 2750
    #   [36, 37): 36.000 (2000), 36.005 (5), 36.200 (1200)  mean 1068.3 (5 alone would pass)
    #   [37, 38): 37.015 (15)                               mean 15 <= 20 -> recovered at 37.015 s
    assert m.tau_peak_wall_ms == W0 + 35_000
    assert m.tau_recovery_wall_ms == W0 + 37_015 and m.recovery_time_ms == 2015
    # After recovery, recovery-phase outputs arriving >= 37.015 s: 15, 40, 12 and 8 x 10 + 7 x 30:
    # 357 ms over 18 outputs -> mean 19.833; ratio 357 / 18 / 20.
    assert m.after_recovery_outputs == 18
    assert m.post_peak_variation_ratio == pytest.approx(357 / 360, rel=1e-12)


def test_adaptivity_metrics_literal_rule():
    m = adaptivity_metrics(burst_trace(), BURST, Clocks(W0, T0, 1.0), smoothing_ms=0)
    # The first output at or after 35 s with latency <= 20 is the 5 ms one arriving at 36.005 s.
    assert m.recovery_time_ms == 1005
    # From 36.005 s the recovery phase adds 1200 (arrives 36.2 s) and 5: (357 + 1205) / 20 outputs.
    assert m.after_recovery_outputs == 20
    assert m.post_peak_variation_ratio == pytest.approx(1562 / 20 / 20, rel=1e-12)


def test_adaptivity_never_recovers():
    m = adaptivity_metrics(burst_trace(recovery_latency=25), BURST, Clocks(W0, T0, 1.0))
    assert not m.recovered
    assert m.recovery_time_ms is None and m.post_peak_variation_ratio is None
    assert m.to_dict()["recovered"] is False


def test_adaptivity_needs_the_right_profile_and_outputs():
    with pytest.raises(CepkitError, match="profile small has no 'steady' phase"):
        adaptivity_metrics(burst_trace(), SMALL, Clocks(W0, T0, 1.0))
    with pytest.raises(CepkitError, match="no outputs triggered in the peak phase"):
        adaptivity_metrics(burst_trace().iloc[:30], BURST, Clocks(W0, T0, 1.0))
    with pytest.raises(CepkitError, match="no ingestTS column"):
        adaptivity_metrics(burst_trace(), BURST, Clocks(W0, T0, 1.0), latency="processing")
