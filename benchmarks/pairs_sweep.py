"""Pairs scalability sweep on PySpark: quick-profile runs at SF 1, 2, 4, 8, ... in both plan modes.

For each plan mode the scale factor doubles until the run's p99 latency passes 2 s, the run is
stopped as unsustainable (backlog above q^b), or --max-sf is reached. Each run is a full
`cepkit pairs` pipeline (fresh data, strategies, program, run, validation) in its own directory
under --runs. Prints one table: SF, mean/peak input rate, strategies, p50/p99 event-time latency
(Indicator and MarketOrder rows in the measurement interval) with the number of latencies behind
them, the MarketOrder p99 with its order count, pscore, CPU, RSS, verdict. A p99 shows its 95 %
interval and says when it is merely the maximum of too few values (validator.order_stats).

    .venv/bin/python benchmarks/pairs_sweep.py [--plans shared,per-strategy] [--max-sf 64]
           [--runs runs/sweep] [--per-strategy-limit N | --strategy-limit N] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from cepkit_app.pipelines.pairs import PairsRunRequest, run_pairs_pipeline
from kit.config import load_config
from kit.jsonfile import read_json_object
from kit.manifest import load_manifest
from kit.paths import fresh_path
from kit.profiles import RateProfile
from kit.shipped import config_path
from validator.latency import (LatencyStats, Pscore, event_time_latency_ms, latency_stats,
                               measurement_mask)
from validator.order_stats import percentile_text
from validator.outputlog import read_output_log

P99_LIMIT_MS = 2000.0


def _latency(run_dir: Path, profile: RateProfile) -> LatencyStats | None:
    """Event-time latency of every output row whose input is in the measurement interval."""
    log = read_output_log(run_dir / "engine" / "outputs")
    lat = []
    for name in ("Indicator", "MarketOrder"):
        rows = log.stream(name)
        if len(rows):
            mask = measurement_mask(rows["inputTS"].to_numpy(np.int64), profile, log.clocks)
            lat.append(event_time_latency_ms(rows[mask]))
    values = np.concatenate(lat) if lat else np.array([])
    return latency_stats(values) if len(values) else None


def _order_p99(run_dir: Path) -> str | None:
    """The pscore's MarketOrder p99 with its order count and interval, from the validation summary."""
    path = run_dir / "report" / "summary.json"
    pscore = read_json_object(path).get("pscore") if path.exists() else None
    if pscore is None:
        return None
    p = Pscore(**pscore).p99
    return f"{p.n:,} orders: {percentile_text(p, unit='', short=True)}"


def one_run(base_args: list[str], sf: int, plan: str, runs: Path, limit: int | None) -> dict:
    config = load_config(config_path("quick"),
                         base_args + [f"pairs.scale_factor={sf}", f"run.plan={plan!r}"])
    run_dir = fresh_path(runs, f"sf{sf}-{plan}")
    started = time.time()
    outcome = run_pairs_pipeline(PairsRunRequest(config, run_dir, strategy_limit=limit),
                                 stage=lambda s: print(f"  [{plan} SF={sf}] {s}", file=sys.stderr, flush=True))
    manifest = load_manifest(run_dir / "data")
    profile = manifest.rate_profile()
    duration_s = profile.duration_ms / 1000
    eng = outcome.engine
    strategies = (run_dir / "strategies.xml").read_text().count("<PairsStrategy ")
    stats = _latency(run_dir, profile) if outcome.status != "failed" else None
    p50, p99 = (None, None) if stats is None else (stats.p50_ms, stats.p99_ms)
    return {"sf": sf, "plan": plan, "mean_eps": manifest.get("total_rows") / duration_s,
            "peak_eps": manifest.get("scale")["peak_rate_eps"], "strategies": strategies, "p50_ms": p50, "p99_ms": p99,
            "latencies": None if stats is None else stats.count,
            "p99": None if stats is None else percentile_text(stats.percentile("p99"), unit="", short=True),
            "order_p99_ms": outcome.p99_ms, "order_p99": _order_p99(run_dir), "pscore": outcome.pscore,
            "cpu": eng.mean_cpu_percent,
            "rss_mib": (eng.peak_rss_bytes or 0) / 2**20, "status": outcome.status, "verdict": outcome.verdict,
            "wall_s": time.time() - started, "run": str(run_dir)}


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", default="shared,per-strategy")
    ap.add_argument("--max-sf", type=int, default=64)
    ap.add_argument("--runs", default="runs/sweep")
    ap.add_argument("--per-strategy-limit", type=int, default=None,
                    help="keep only the first N strategies in per-strategy runs (default: all)")
    ap.add_argument("--strategy-limit", type=int, default=None,
                    help="keep only the first N strategies in every run (both plans: a like-for-like comparison)")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    runs = Path(args.runs)
    rows = []
    for plan in args.plans.split(","):
        sf = 1
        while sf <= args.max_sf:
            limit = args.strategy_limit or (args.per_strategy_limit if plan == "per-strategy" else None)
            row = one_run(args.overrides, sf, plan, runs, limit)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if row["status"] != "completed" or (row["p99_ms"] or 0) > P99_LIMIT_MS:
                break
            sf *= 2
    head = ("plan", "SF", "in ev/s (mean/peak)", "strategies", "latencies", "p50 ms", "p99 ms (95 % CI)",
            "order p99 ms (95 % CI)", "pscore", "CPU %", "RSS MiB", "run", "verdict")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print(f"| {r['plan']} | {r['sf']} | {r['mean_eps']:,.0f} / {r['peak_eps']:,.0f} | {r['strategies']} | "
              f"{_fmt(r['latencies'], ',')} | {_fmt(r['p50_ms'], ',.0f')} | {r['p99'] or '-'} | "
              f"{r['order_p99'] or _fmt(r['order_p99_ms'], ',.0f')} | "
              f"{_fmt(r['pscore'], '.2f')} | {_fmt(r['cpu'], '.0f')} | {r['rss_mib']:,.0f} | {r['status']} | "
              f"{r['verdict']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
