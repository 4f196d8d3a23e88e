"""Latency statistics, per-second series, the measurement-interval cut, pscore and the 4.5.5
adaptivity metrics, each on data whose answer is worked out by hand here."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from kit.errors import CepkitError
from kit.profiles import Phase, RateProfile, standard_profile
from kit.scale import load
from validator.adaptivity import adaptivity_metrics
from validator.latency import (event_time_latency_ms, latency_stats, measurement_mask, per_second_counts,
                               per_second_series, phase_index, processing_time_latency_ms, pscore_for_run,
                               pscore_interval, stream_latency)
from validator.order_stats import (ALPHA, PERCENTILES, Percentile, ci_ranks, maximum_below, min_count,
                                   nearest_rank_of, percentile_text)
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


# -- confidence intervals of percentiles (validator/order_stats.py) --------------------------

def reference_ranks(n: int, q: float) -> tuple[int | None, int | None]:
    """The interval rule of specs/VALIDATION.md written again with scipy's binomial CDF."""
    cdf = binom.cdf(np.arange(n + 1), n, q)
    lower_at = lambda a: (1 - q) ** n <= a + 1e-15   # noqa: E731  (float slack: 0.05 ** 1 vs 0.05)
    upper_at = lambda a: q ** n <= a + 1e-15          # noqa: E731
    # cdf is increasing: l - 1 is the last k with cdf <= a, u - 1 the first with cdf >= 1 - a (a
    # side found available has its extreme rank even when the float CDF is an ulp off).
    l_rank = lambda a: max(1, int((cdf <= a).sum())) if lower_at(a) else None  # noqa: E731
    u_rank = lambda a: min(n, int((cdf < 1 - a).sum()) + 1) if upper_at(a) else None  # noqa: E731
    if lower_at(0.025) and upper_at(0.025):
        return l_rank(0.025), u_rank(0.025)
    if lower_at(0.025) or upper_at(0.025):       # that side alone, at 5 %; the other stays open
        return (l_rank(0.05), None) if lower_at(0.025) else (None, u_rank(0.05))
    return (l_rank(0.05), None) if q >= 0.5 else (None, u_rank(0.05))


def test_interval_ranks_by_hand():
    # n = 1000, p99: B ~ Bin(1000, 0.99) samples below the p99. Lower: the largest l with
    # P(B <= l-1) <= 2.5 %; upper: the smallest u with P(B >= u) <= 2.5 %.
    cdf = binom.cdf(np.arange(1001), 1000, 0.99)
    assert cdf[982] <= 0.025 < cdf[983] and cdf[995] < 0.975 <= cdf[996]
    assert ci_ranks(1000, 99, 100) == (983, 997)
    # n = 6, p99: 0.99^6 = 0.94 > 2.5 %, so no upper bound; the lower side takes the whole 5 %:
    # P(B <= 4) = 0.0015 <= 5 % < P(B <= 5) = 1 - 0.99^6 = 0.059, so x(5), the second largest.
    assert binom.cdf(4, 6, 0.99) == pytest.approx(0.00146, abs=1e-5)
    assert binom.cdf(5, 6, 0.99) == pytest.approx(1 - 0.99 ** 6) == pytest.approx(0.0585, abs=1e-4)
    assert ci_ranks(6, 99, 100) == (5, None)
    # p50 of 6: both sides at 2.5 % (0.5^6 = 1.6 %); P(B <= 0) = 1.6 % <= 2.5 % < P(B <= 1) = 10.9 %.
    assert ci_ranks(6, 50, 100) == (1, 6)
    # p50 of 5: 0.5^5 = 3.1 % > 2.5 % on both sides; the lower one-sided bound at 5 % is the minimum.
    assert ci_ranks(5, 50, 100) == (1, None) and ci_ranks(4, 50, 100) == (None, None)
    # p95 of 1: (1 - 0.95)^1 is exactly 5 %, decided in rationals (0.05 ** 1 > 0.05 in floats).
    assert ci_ranks(1, 95, 100) == (1, None) and ci_ranks(1, 90, 100) == (None, None)
    assert ci_ranks(0, 99, 100) == (None, None)


def test_interval_ranks_agree_with_scipy():
    for n in [*range(1, 120), 150, 250, 299, 300, 367, 368, 369, 500, 1000, 3687, 3688, 5000, 20_000]:
        for name, (num, den) in PERCENTILES.items():
            assert ci_ranks(n, num, den) == reference_ranks(n, num / den), (n, name)


def test_interval_ranks_of_millions_use_a_window():
    # The CDF is summed over mean +- 12 sd only; scipy over the same ranks must agree.
    n = 3_000_000
    low, high = ci_ranks(n, 99, 100)
    k = np.arange(low - 50, high + 50)
    cdf = binom.cdf(k, n, 0.99)
    assert (low, high) == (int(k[cdf <= 0.025][-1]) + 1, int(k[cdf >= 0.975][0]) + 1)


def _cdf_by_recurrence(n: int, num: int, den: int, ks: list[int], span: int) -> list[float]:
    """P(B <= k) for B ~ Binomial(n, num/den), neither by lgamma nor by scipy: the pmf relative to
    the mode by the ratio pmf(k+1)/pmf(k) = (n-k)/(k+1) * num/(den-num), summed with fsum over
    mode +- span (~1e-12 relative error)."""
    mode = (n + 1) * num // den
    w = {mode: 1.0}
    x = 1.0
    for k in range(mode, min(n, mode + span)):
        x *= (n - k) / (k + 1) * num / (den - num)
        w[k + 1] = x
    x = 1.0
    for k in range(mode, max(0, mode - span), -1):
        x /= (n - k + 1) / k * num / (den - num)
        w[k - 1] = x
    total = math.fsum(w.values())
    return [math.fsum(v for j, v in w.items() if j <= k) / total for k in ks]


def test_interval_rank_of_tens_of_millions_is_exact():
    # n = 43,902,618, p99: P(B <= 43,464,883) = 0.97500004 >= 0.975, so u = 43,464,884. A CDF summed
    # from lgamma terms (the hand-written one this module had) is 4e-8 low there and said 43,464,885.
    n = 43_902_618
    below, at = _cdf_by_recurrence(n, 99, 100, [43_464_882, 43_464_883], span=20_000)
    assert below < 0.975 <= at and at - 0.975 == pytest.approx(3.5e-8, rel=0.01)
    assert ci_ranks(n, 99, 100)[1] == 43_464_884


def test_closing_counts_and_the_maximum_rule():
    # Pinned in specs/VALIDATION.md: the p99 is the maximum for n <= 99 and closes from n = 368.
    assert maximum_below(99, 100) == 99 and maximum_below(999, 1000) == 999 and maximum_below(50, 100) == 1
    assert nearest_rank_of(99, 99, 100) == 99 and nearest_rank_of(100, 99, 100) == 99
    assert [min_count(num, den, ALPHA / 2) for num, den in PERCENTILES.values()] == [6, 36, 72, 368, 3688]
    assert ci_ranks(367, 99, 100)[1] is None and ci_ranks(368, 99, 100)[1] is not None
    assert 0.99 ** 367 > 0.025 >= 0.99 ** 368


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "integer-ms-with-ties"])
def test_interval_coverage_by_simulation(discrete):
    """Draw many samples from a known distribution: the interval must hold the true quantile in
    at least 95 % of them (minus 3 standard errors of the simulation), ties or no ties."""
    rng = np.random.default_rng(14)
    reps, scale = 4000, 3.0
    for n in (6, 30, 99, 150, 368, 1000):
        x = np.sort(rng.exponential(scale, size=(reps, n)), axis=1)
        if discrete:
            x = np.floor(x)         # whole "ms": many ties
        for name, (num, den) in PERCENTILES.items():
            q = num / den
            true_q = -scale * math.log1p(-q)
            if discrete:            # inf{x : F(x) >= q} of floor(E): F(k) = 1 - exp(-(k+1)/scale)
                true_q = math.ceil(true_q - 1)
            low, high = ci_ranks(n, num, den)
            ok = np.ones(reps, dtype=bool)
            if low is not None:
                ok &= x[:, low - 1] <= true_q
            if high is not None:
                ok &= x[:, high - 1] >= true_q
            assert ok.mean() >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / reps), (n, name, ok.mean())
            if n == 1000 and name == "p99" and not discrete:
                # The control: the neighbours of the nearest rank are far too narrow an interval.
                r = nearest_rank_of(n, num, den)
                assert ((x[:, r - 2] <= true_q) & (x[:, r] >= true_q)).mean() < 0.5


def test_latency_stats_carry_counts_and_intervals():
    lat = np.random.default_rng(3).permutation(np.arange(1, 1001))
    s = latency_stats(lat)
    # Values 1..1000: the value of rank r is r, so the interval's values are its ranks.
    assert (s.p99_ci_low_ms, s.p99_ci_high_ms) == ci_ranks(1000, 99, 100) == (983, 997)
    assert (s.p50_ci_low_ms, s.p50_ci_high_ms) == ci_ranks(1000, 50, 100)
    assert s.p999_ci_high_ms is None and s.p999_ci_low_ms == ci_ranks(1000, 999, 1000)[0]
    assert s.to_dict()["p99_ci_low_ms"] == 983 and s.percentile("p99").n == 1000
    six = latency_stats(np.array([609, 402, 300, 250, 500, 200]))
    assert (six.count, six.p99_ms, six.p99_ci_low_ms, six.p99_ci_high_ms) == (6, 609, 500, None)
    with pytest.raises(CepkitError, match="6 samples give a 95 % interval"):
        dataclasses.replace(six, p99_ci_high_ms=609)
    with pytest.raises(CepkitError, match="outside its interval"):
        dataclasses.replace(six, p99_ci_low_ms=700)
    assert latency_stats(np.array([], dtype=np.int64)).p99_ci_low_ms is None


def test_wording_of_a_percentile():
    text = lambda values, name="p99": percentile_text(  # noqa: E731
        latency_stats(np.asarray(values)).percentile(name), "orders")
    assert text([609, 402, 300, 250, 500, 200]) == \
        "p99 = 609 ms (the maximum of 6 orders: too few for a p99; 95 % CI ≥ 500 ms)"
    assert text([42]) == "p99 = 42 ms (the only order: too few for a p99; 95 % CI ≥ 42 ms)"
    assert text([3, 1, 2, 4], "p50") == "p50 = 2 ms (4 orders; 95 % CI unbounded)"
    assert "the maximum of 99 orders" in text(np.arange(1, 100))
    assert text(np.arange(1, 101)) == \
        "p99 = 99 ms (100 orders; 95 % CI ≥ 97 ms, no upper bound below 368 orders)"
    assert text(np.arange(1, 1001)) == "p99 = 990 ms (1,000 orders; 95 % CI 983–997 ms)"
    short = lambda values: percentile_text(latency_stats(np.asarray(values)).percentile("p99"),  # noqa: E731
                                           unit="", short=True)
    assert short([609, 402, 300, 250, 500, 200]) == "609 (max of 6: too few; CI ≥ 500)"
    assert short(np.arange(1, 1001)) == "990 (CI 983–997)"
    assert percentile_text(Percentile("p99", 0, None), "orders") == "p99: none (no orders)"
    with pytest.raises(CepkitError, match="unknown name"):
        Percentile("p42", 1, 1, 1)


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


def test_pscore_interval_follows_from_the_p99_interval():
    clocks = Clocks(W0, T0, 1.0)
    # 1,000 orders in the MI with latencies 1..1000 ms: p99 = 990 ms in [983, 997] ms.
    many = pscore_for_run(2, stamped(10_000 + 10 * np.arange(1000), np.arange(1, 1001)), SMALL, clocks)
    assert (many.mi_rows, many.p99_ci_low_ms, many.p99_ci_high_ms) == (1000, 983, 997)
    # pscore = load / p99 falls as p99 rises: [load / p99_high, load / p99_low].
    assert many.pscore_ci_low == pytest.approx(6 / 0.997) and many.pscore_ci_high == pytest.approx(6 / 0.983)
    assert many.pscore_ci_low < many.pscore < many.pscore_ci_high and many.pscore == pytest.approx(6 / 0.99)
    assert many.text() == "pscore: 6.06 (95 % CI 6.02–6.10; p99 from 1,000 orders)"
    # 6 orders: the p99 is their maximum with only a lower bound, x(5), so the pscore has only an upper one.
    six = pscore_for_run(2, stamped(10_000 + 100 * np.arange(6), [609, 402, 300, 250, 500, 200]), SMALL, clocks)
    assert (six.mi_rows, six.p99_latency_s, six.p99_ci_low_ms, six.p99_ci_high_ms) == (6, 0.609, 500, None)
    assert six.pscore_ci_low is None and six.pscore_ci_high == pytest.approx(6 / 0.5)
    assert six.text() == "pscore: 9.85 (95 % CI ≤ 12.00; p99 from the maximum of 6 orders: too few for a p99)"
    # 200 orders: a p99 past the maximum but without an upper bound until 368 orders.
    mid = pscore_for_run(2, stamped(10_000 + 50 * np.arange(200), np.arange(1, 201)), SMALL, clocks)
    assert mid.pscore_ci_low is None and mid.p99_ci_low_ms == ci_ranks(200, 99, 100)[0]
    assert "no lower bound below 368 orders; p99 from 200 orders" in mid.text()
    # A lower p99 bound of 0 ms leaves the pscore without an upper bound.
    assert pscore_interval(1, 0, 10) == (pytest.approx(300.0), None) and pscore_interval(1, None, None) == (None, None)
    with pytest.raises(CepkitError, match="does not follow from the p99 interval"):
        dataclasses.replace(six, pscore_ci_high=13.0)
    with pytest.raises(CepkitError, match="6 samples give a 95 % interval"):
        dataclasses.replace(six, p99_ci_high_ms=700, pscore_ci_low=6 / 0.7)


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
