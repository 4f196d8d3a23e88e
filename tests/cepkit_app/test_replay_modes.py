"""Replaying a dataset three ways (recorded pace x speed, constant rate, as fast as pulled) and the
time axis the validator then measures on (specs/VALIDATION.md, "Which profile")."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from cepkit_app.pipelines.pairs import driver_config, mean_release_eps
from kit.config import Config, RunConfig, load_config
from kit.errors import CepkitError
from validator.outputlog import Clocks
from validator.pairs_run import run_profile

GENERATED = {"total_rows": 600_000, "start_epoch_ms": 1_000_000,
             "profile": {"name": "constant", "duration_ms": 120_000, "expected_events": 600_000.0,
                         "phases": [{"name": "steady", "start_ms": 0, "end_ms": 120_000, "start_rate_eps": 5000.0,
                                     "end_rate_eps": 5000.0, "measured": True}]}}
# A converted dataset: no profile, its recorded span from the manifest (36 months of monthly ticks).
CONVERTED = {"total_rows": 180, "start_epoch_ms": 946_684_800_000, "last_epoch_ms": 1_038_700_800_000}


def cfg(**run) -> Config:
    return dataclasses.replace(Config(), run=RunConfig(**run))


def test_recorded_replay_of_a_converted_dataset_runs_at_its_span_over_speed(tmp_path):
    c = cfg(speed=3e6)                      # 36 months in about 31 s
    span_s = (CONVERTED["last_epoch_ms"] - CONVERTED["start_epoch_ms"] + 1) / 1000
    assert mean_release_eps(c, CONVERTED) == pytest.approx(180 / span_s * 3e6)      # ~5.9 ev/s
    assert c.run.backlog_limit_events(mean_release_eps(c, CONVERTED)) == 1000           # the floor: 30 s of ~6 ev/s is less
    d = driver_config(c, tmp_path)
    assert (d.pacing, d.speed, d.stamp) == ("tickts", 3e6, "scheduled")


def test_constant_and_pulled_replays(tmp_path):
    c = cfg(replay="constant", replay_rate_eps=2000.0, max_backlog_s=10.0)
    assert mean_release_eps(c, GENERATED) == 2000.0
    assert c.run.backlog_limit_events(mean_release_eps(c, GENERATED)) == 20_000
    assert (driver_config(c, tmp_path).pacing, driver_config(c, tmp_path).rate_eps) == ("rate", 2000.0)
    p = cfg(replay="pull")
    assert mean_release_eps(p, GENERATED) is None and p.run.backlog_limit_events(mean_release_eps(p, GENERATED)) is None
    assert (driver_config(p, tmp_path).pacing, driver_config(p, tmp_path).stamp) == ("pull", "send")
    # The generated dataset's own profile, at speed 2: twice its mean rate.
    assert mean_release_eps(cfg(speed=2.0), GENERATED) == pytest.approx(10_000.0)


def test_replay_settings_are_checked():
    with pytest.raises(CepkitError, match="run.replay_rate_eps"):
        load_config(None, ["run.replay=\"constant\""])
    with pytest.raises(CepkitError, match="run.replay_rate_eps"):
        load_config(None, ["run.replay_rate_eps=10"])
    with pytest.raises(CepkitError, match="run.replay"):
        load_config(None, ["run.replay=\"fast\""])
    with pytest.raises(CepkitError, match="run.measure_to_s"):
        load_config(None, ["run.measure_from_s=10", "run.measure_to_s=5"])
    assert load_config(None, ["run.measure_from_s=1.5"]).run.measure_ms == (1500, None)


def _orders(run_ms: list[int], start: int = 5_000_000) -> pd.DataFrame:
    return pd.DataFrame({"inputTS": pd.array([start + t for t in run_ms], dtype="Int64")})


def test_run_profile_follows_the_dataset_only_when_paced_by_its_times():
    recorded = Clocks(5_000_000, 1_000_000, 1.0, "tickts")
    assert run_profile(GENERATED, recorded, [_orders([1])]).measurement_window() == (0, 120_000)
    # A converted dataset played at its recorded pace: its span on the simulated axis.
    conv = run_profile(CONVERTED, Clocks(5_000_000, CONVERTED["start_epoch_ms"], 3e9, "tickts"), [])
    assert conv.measurement_window() == (0, CONVERTED["last_epoch_ms"] - CONVERTED["start_epoch_ms"] + 1)
    # Constant-rate and pulled replays: wall time, the whole run up to the last output's inputTS.
    for pacing in ("rate", "pull"):
        whole = run_profile(GENERATED, Clocks(5_000_000, 1_000_000, 1.0, pacing),
                            [_orders([10, 7_000]), _orders([]), _orders([3_500])])
        assert whole.measurement_window() == (0, 7_001)
    # Without a log: the dataset's profile, or none for a converted dataset.
    assert run_profile(GENERATED, None, []).name == "constant"
    assert run_profile(CONVERTED, None, []).measurement_window()[1] > 0


def test_a_given_measurement_interval_replaces_the_measured_phases():
    prof = run_profile(GENERATED, Clocks(5_000_000, 1_000_000, 1.0, "tickts"), [], (30_000, 60_000))
    assert prof.measurement_window() == (30_000, 60_000)
    pulled = run_profile(GENERATED, Clocks(5_000_000, 1_000_000, 1.0, "pull"), [_orders([9_000])], (2_000, None))
    assert pulled.measurement_window() == (2_000, 9_001)
