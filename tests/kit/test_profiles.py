"""Rate profiles: shapes, phases, integrals and their inverse."""

import numpy as np
import pytest

from kit.errors import CepkitError
from kit.profiles import (adaptivity_profile, build_profile, constant_profile, standard_profile,
                          whole_run_profile)


def test_standard_shape_and_measurement_interval():
    p = standard_profile(5000, 7500)
    assert [ph.name for ph in p.phases] == ["ramp-up", "decline", "mi-rise", "mi-fall", "final-rise"]
    assert p.duration_ms == 121 * 60_000
    assert p.measurement_window() == (31 * 60_000, 91 * 60_000)
    assert p.rate_at([0, 60_000, 31 * 60_000, 61 * 60_000, 91 * 60_000]).tolist() == [0, 7500, 5000, 7500, 5000]
    # 1 min at 3750 avg + 120 min at 6250 avg
    assert p.expected_events == pytest.approx(60 * 3750 + 7200 * 6250)


def test_adaptivity_phases():
    p = adaptivity_profile(2000)
    assert [(ph.name, ph.duration_ms) for ph in p.phases] == [
        ("warm-up", 60_000), ("steady", 300_000), ("peak", 10_000), ("recovery", 300_000)]
    assert p.rate_at([p.phase_window("peak")[0]])[0] == 3000


@pytest.mark.parametrize("name", ["standard", "adaptivity", "constant"])
def test_quick_keeps_shape(name):
    full = build_profile(name, basis_eps=1000, peak_eps=1500)
    quick = build_profile(name, basis_eps=1000, peak_eps=1500, quick=True)
    assert quick.duration_ms < full.duration_ms
    assert [p.name for p in quick.phases] == [p.name for p in full.phases]
    frac_full = np.array([p.duration_ms for p in full.phases]) / full.duration_ms
    frac_quick = np.array([p.duration_ms for p in quick.phases]) / quick.duration_ms
    assert np.allclose(frac_full, frac_quick, atol=1e-3)
    assert [(p.start_rate_eps, p.end_rate_eps) for p in quick.phases] == \
           [(p.start_rate_eps, p.end_rate_eps) for p in full.phases]


def test_scaled_to_exact_total_and_flattened():
    p = standard_profile(5000, 7500).scaled_to(100_003)
    assert p.duration_ms == 100_003
    flat = p.flattened(5000)
    assert {(ph.start_rate_eps, ph.end_rate_eps) for ph in flat.phases} == {(5000, 5000)}


def test_cumulative_inverse_roundtrip():
    p = standard_profile(5000, 7500)
    u = np.linspace(0, p.expected_events, 1001)
    t = p.inverse_cumulative(u)
    assert np.all(np.diff(t) >= 0)
    assert np.allclose(p.cumulative(t), u, rtol=0, atol=1e-6 * p.expected_events)
    # Integral of a linear ramp 0 -> 7500 over 60 s is 225,000 events.
    assert p.expected_between(0, 60_000) == pytest.approx(225_000)


def test_bad_profiles():
    with pytest.raises(CepkitError, match="unknown rate profile"):
        build_profile("sawtooth", basis_eps=1, peak_eps=1)
    with pytest.raises(CepkitError, match="zero"):
        constant_profile(0.0, 1000)


def test_with_measurement_splits_phases_and_keeps_the_rates():
    p = build_profile("standard", basis_eps=100, peak_eps=150, quick=True)
    q = p.with_measurement(10_000, 50_000)
    assert q.measurement_window() == (10_000, 50_000)
    assert q.duration_ms == p.duration_ms
    assert q.expected_events == pytest.approx(p.expected_events)
    t = np.arange(0, p.duration_ms, 997)
    assert np.allclose(q.rate_at(t), p.rate_at(t))
    # The decline phase (1 s to 31 s, 150 -> 100 ev/s) is cut at 10 s: 150 - 50 * 9/30 = 135 ev/s.
    cut = next(ph for ph in q.phases if ph.name == "decline (from 10 s)")
    assert cut.measured and cut.start_rate_eps == pytest.approx(135.0)
    # Open ends: the profile's start / end.
    assert p.with_measurement(None, 5_000).measurement_window() == (0, 5_000)
    assert p.with_measurement(120_000, None).measurement_window() == (120_000, p.duration_ms)


def test_with_measurement_past_the_end_extends_the_last_phase():
    p = constant_profile(10.0, 1_000)
    q = p.with_measurement(500, 3_000)
    assert q.duration_ms == 3_000 and q.measurement_window() == (500, 3_000)
    assert q.phases[-1].start_rate_eps == q.phases[-1].end_rate_eps == 10.0
    with pytest.raises(CepkitError, match="empty"):
        p.with_measurement(700, 700)


def test_whole_run_profile_is_one_measured_phase():
    p = whole_run_profile(5_000, 100)
    assert p.measurement_window() == (0, 5_000)
    assert p.expected_events == pytest.approx(100)
    assert whole_run_profile(0, 0).duration_ms == 1       # never an empty profile
