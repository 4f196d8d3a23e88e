"""`cepkit pairs`: the Pairs benchmark end to end, ending with the verdict, p99 and pscore.

datagen -> querygen -> translate -> run on the engine (harness) -> validate -> report, into one
new run directory under `paths.runs_dir` (see cepkit_app/pipelines/pairs.py for its layout).
`--repeat K` runs the same inputs K times under one `repeat-...` directory and sums them up by
median and range (cepkit_app/pipelines/repeat.py); with several engines, K runs of each.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cepkit_app.cli import ENGINE_FLAGS, add_config_options, add_engine_options, command_config
from kit.config import PLANS, REPLAYS


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    add_config_options(p)
    p.add_argument("--sf", type=int, help="scale factor (pairs.scale_factor)")
    p.add_argument("--quick", action="store_true", help="the quick rate profile: the standard shape in ~2 minutes")
    p.add_argument("--plan", choices=PLANS, help="plan mode (run.plan)")
    add_engine_options(p)
    p.add_argument("--data", metavar="DIR", help="replay this existing dataset (generated, or converted from a CSV) "
                                                 "instead of generating one")
    p.add_argument("--replay", choices=REPLAYS,
                   help="pace the data at its recorded times x --speed (default), at a constant --rate, or as "
                        "fast as the engine pulls (run.replay)")
    p.add_argument("--speed", type=float, metavar="X", help="recorded replay: simulated ms per wall ms (run.speed)")
    p.add_argument("--rate", type=float, metavar="EPS", help="constant replay: events per second (run.replay_rate_eps)")
    p.add_argument("--no-verify", action="store_true",
                   help="with --data: skip the sha256 check of the dataset's files (huge, trusted data)")
    p.add_argument("--strategies", metavar="FILE", help="use this strategies XML instead of generating one")
    p.add_argument("--strategy-limit", type=int, metavar="N", help="keep only the first N strategies")
    p.add_argument("--out", metavar="DIR", help="run directory (must not exist); default: a new one under "
                                                "paths.runs_dir")
    p.add_argument("--repeat", metavar="K",
                   help="run the same dataset and strategies K times (K >= 1, default 1), each run its own "
                        "directory run-1 ... run-K under one repeat-... directory (--out), then repeat.json "
                        "and repeat.md: each run's figures and the median and range (min-max) of the "
                        "MarketOrder p99, pscore and throughput over the runs that completed and PASSED; "
                        "with several engines, K runs of each, taking turns")
    p.set_defaults(handler=run)


# (argparse dest, config key) of this command's own options.
FLAGS = (("sf", "pairs.scale_factor"), ("quick", "pairs.rate.quick"), ("plan", "run.plan"), *ENGINE_FLAGS,
         ("replay", "run.replay"), ("speed", "run.speed"), ("rate", "run.replay_rate_eps"))


def run(args: argparse.Namespace) -> int:
    from cepkit_app.pipelines.repeat import repeat_count
    from kit.engines import engine_list
    from kit.paths import path_option

    # An empty path is an error, never "unset": an empty --data would generate a new dataset, an
    # empty --out would write under runs/.
    for option, given in (("--out", args.out), ("--data", args.data), ("--strategies", args.strategies)):
        path_option(given, option)
    repeat = 1 if args.repeat is None else repeat_count(args.repeat)     # one line, before any work
    engines = engine_list(args.engine) if args.engine else ()
    if repeat > 1:
        return run_repeated(args, engines, repeat)
    if len(engines) > 1:
        return run_side_by_side(args, engines)
    if engines:
        args.engine = engines[0]
    return run_one(args)


def _stem(config) -> str:
    p, r = config.pairs, config.run
    return f"pairs-sf{p.scale_factor}-{p.rate.profile}{'-quick' if p.rate.quick else ''}-{r.plan}-" \
           f"{time.strftime('%Y%m%d-%H%M%S')}"


def run_side_by_side(args: argparse.Namespace, engines: tuple[str, ...]) -> int:
    """`--engine spark,flink`: the same dataset and strategies on each engine in turn, one run
    directory each under one parent, then `cepkit compare` over them (RUN/compare/compare.html)."""
    import copy

    from cepkit_app.cli.progress import console
    from kit.atomic import check_parent
    from kit.paths import output_path
    from validator.compare_page import write_comparison

    config = command_config(args, tuple(f for f in FLAGS if f[0] != "engine"))
    parent = output_path(args.out, Path(config.paths.runs_dir), "compare-" + _stem(config))
    check_parent(parent)
    parent.mkdir(parents=True)
    con = console()
    codes, runs = [], []
    for i, engine in enumerate(engines):
        one = copy.copy(args)
        one.engine, one.out = engine, str(parent / engine)
        if i > 0:       # the first engine's inputs, so the engines answer the very same questions
            one.data, one.strategies, one.strategy_limit, one.no_verify = \
                str(runs[0] / "data") if args.data is None else args.data, str(runs[0] / "strategies.xml"), None, True
        con.print(f"[bold]== {engine}[/]")
        codes.append(run_one(one))
        runs.append(parent / engine)
    report = write_comparison(runs, parent / "compare")
    con.print(f"side by side: {report}")
    return max(codes)


def run_repeated(args: argparse.Namespace, engines: tuple[str, ...], repeat: int) -> int:
    """`--repeat K`: the same inputs K times on each engine (cepkit_app/pipelines/repeat.py), each
    run printed as a plain run is, then the table of the runs and the median lines; with several
    engines, `cepkit compare` of the repetition directory too (RUN/compare/compare.html). Exit
    code 0 only when every run completed and PASSED."""
    import copy

    from cepkit_app.cli.progress import console
    from cepkit_app.pipelines.repeat import RepeatPlan, RunInputs, repeat_text, run_repeats
    from kit.atomic import check_parent
    from kit.paths import output_path
    from validator.compare_page import write_comparison
    from validator.compare_runs import REPEAT_DOC

    flags = tuple(f for f in FLAGS if f[0] != "engine") if len(engines) > 1 else FLAGS
    one_engine = copy.copy(args)
    if len(engines) == 1:
        one_engine.engine = engines[0]
    config = command_config(one_engine, flags)
    engines = engines if len(engines) > 1 else (config.run.engine,)
    parent = output_path(args.out, Path(config.paths.runs_dir), "repeat-" + _stem(config))
    check_parent(parent)        # one line, before any work, if --out cannot be created there
    plan = RepeatPlan(parent, repeat, engines)
    con = console()

    def one(engine: str, i: int, run_dir: Path, inputs: RunInputs) -> int:
        a = copy.copy(args)
        a.engine, a.out, a.repeat = engine, str(run_dir), None
        a.data = None if inputs.data_dir is None else str(inputs.data_dir)
        a.strategies = None if inputs.strategies_file is None else str(inputs.strategies_file)
        a.strategy_limit, a.no_verify = inputs.strategy_limit, not inputs.verify
        return run_one(a)

    given = RunInputs(Path(args.data) if args.data else None, Path(args.strategies) if args.strategies else None,
                      args.strategy_limit, verify=not args.no_verify)
    doc = run_repeats(plan, given, one, stage=lambda s: con.print(f"[bold]== {s}[/]"))
    print(repeat_text(doc), end="")
    if plan.several:
        con.print(f"side by side: {write_comparison([parent], parent / 'compare')}")
    colour = "green" if doc["passed"] else "red"
    con.print(f"repetition: [bold {colour}]{'every run PASSED' if doc['passed'] else 'not every run PASSED'}[/]  "
              f"summary: {parent / REPEAT_DOC}")
    return 0 if doc["passed"] else 1


def run_one(args: argparse.Namespace) -> int:
    from cepkit_app.cli.progress import console, progress_bar, run_progress
    from cepkit_app.pipelines.pairs import PairsRunRequest, run_pairs_pipeline
    from kit.atomic import check_parent
    from kit.paths import output_path

    config = command_config(args, FLAGS)
    run_dir = output_path(args.out, Path(config.paths.runs_dir), _stem(config))
    check_parent(run_dir)       # one line, before any work, if --out cannot be created there
    req = PairsRunRequest(config, run_dir, Path(args.data) if args.data else None,
                          Path(args.strategies) if args.strategies else None, args.strategy_limit,
                          verify=not args.no_verify)
    con = console()
    with progress_bar("verify dataset (sha256)") as verify_progress, progress_bar("datagen ticks") as data_progress, \
            run_progress() as on_progress:
        outcome = run_pairs_pipeline(req, stage=lambda s: con.print(f"[bold]>[/] {s}"), data_progress=data_progress,
                                     on_progress=on_progress, verify_progress=verify_progress)
    if outcome.text:
        print(outcome.text)
    status = {"completed": "green", "unsustainable": "yellow", "failed": "red"}.get(outcome.status, "white")
    con.print(f"engine run: [{status}]{outcome.status}[/]" + (f" ({outcome.message})" if outcome.message else ""))
    colour = "green" if outcome.verdict == "PASSED" else "red"
    con.print(f"validation: [bold {colour}]{outcome.verdict}[/]")
    for line in outcome.lines or ("pscore: not computed",):   # with order count and 95 % interval
        con.print(line, markup=False)
    if outcome.report:
        con.print(f"report: {outcome.report}")
    con.print(f"run directory: {outcome.run_dir}")
    return 0 if outcome.verdict == "PASSED" and outcome.status == "completed" else 1
