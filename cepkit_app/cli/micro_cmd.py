"""`cepkit micro`: run microbenchmark suites on the engine, validate every query, one summary per suite.

Each workload of the suite gets its dataset, program, engine run and validation in a subdirectory
of one new run directory (layout: cepkit_app/pipelines/micro.py). Suites are the files of
kit/specs/suites/ (`NAME.xml`, or `NAME-quick.xml` with --quick), or any suite file (--suite-file).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cepkit_app.cli import ENGINE_FLAGS, add_config_options, add_engine_options, command_config
from kit.shipped import SUITE_NAMES



def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    add_config_options(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--suite", choices=SUITE_NAMES + ("all",), help="a shipped suite (kit/specs/suites/), or all of them")
    which.add_argument("--suite-file", metavar="FILE", help="any suite XML file")
    p.add_argument("--quick", action="store_true", help="the quick variant of the suite (toy sizes, seconds each)")
    p.add_argument("--workload", action="append", default=[], metavar="NAME",
                   help="run only this workload of the suite (repeatable)")
    add_engine_options(p)
    p.add_argument("--sustainable", action="store_true",
                   help="search each workload's maximum sustainable throughput (bisection on the rate, "
                        "backlog thresholds q^a/q^b, a confirming run at 90%%) instead of one run at its rate")
    p.add_argument("--calibrate", action="store_true",
                   help="burst (adaptivity) workloads: find the maximum sustainable rate at constant load first, "
                        "then run the burst at the lambda where the engine used --lambda-fraction of the CPU "
                        "(or that share of the rate found, if it fell behind first)")
    p.add_argument("--lambda-fraction", type=float, default=0.75,
                   help="lambda's share of the machine's CPU, or of capacity (default 0.75)")
    p.add_argument("--step-seconds", type=float, default=20.0,
                   help="length of each search step's run, seconds > 0 (default 20)")
    p.add_argument("--start-rate", type=float, metavar="EPS",
                   help="the search's first rate, events/s > 0 (default: the workload's own rate; start near "
                        "an earlier search's answer to spend the steps there)")
    p.add_argument("--validate-confirmation-only", action="store_true",
                   help="validate only each search's confirming run, the found rate's evidence (default: every "
                        "step; the others are judged by backlog and latency alone, which saves the validation of "
                        "the fastest steps' tens of millions of rows)")
    p.add_argument("--max-steps", type=int, default=8,
                   help="most runs per search, confirmation included, at least 2 (default 8)")
    p.add_argument("--repeat", metavar="K",
                   help="with --sustainable: search each workload K times over the same inputs (K >= 1, default "
                        "1), each search in <workload>/run-i/; the summary gives each search's rate and their "
                        "median and range (min-max) over the confirmed searches")
    p.add_argument("--out", metavar="DIR", help="run directory (must not exist; with --suite all, the parent "
                                                "of one directory per suite); default: under paths.runs_dir")
    p.set_defaults(handler=run)


def _suite_files(args: argparse.Namespace) -> list[Path]:
    from kit.shipped import suite_path

    if args.suite_file:
        return [Path(args.suite_file)]
    names = SUITE_NAMES if args.suite == "all" else (args.suite,)
    return [suite_path(n, args.quick) for n in names]


def run(args: argparse.Namespace) -> int:
    from cepkit_app.cli.progress import console, run_progress
    from cepkit_app.pipelines.micro import MicroSuiteRequest, run_micro_suite
    from cepkit_app.pipelines.micro_summary import search_table, summary_table
    from cepkit_app.pipelines.repeat import repeat_count
    from cepkit_app.pipelines.sustainable import SearchConfig
    from kit.atomic import check_parent
    from kit.errors import CepkitError
    from kit.paths import fresh_path, path_option
    from kit.workload import read_suite

    path_option(args.out)       # an empty --out is an error, not the default folder
    repeat = 1 if args.repeat is None else repeat_count(args.repeat)
    if repeat > 1 and not args.sustainable:
        raise CepkitError(f"--repeat {repeat}: repeats the sustainable-throughput search; add --sustainable")
    config = command_config(args, ENGINE_FLAGS)
    runs_dir = Path(config.paths.runs_dir)
    con = console()
    files = _suite_files(args)
    # The search's settings check themselves before any directory is made or engine started.
    steps = SearchConfig(duration_s=args.step_seconds, max_steps=args.max_steps, start_rate_eps=args.start_rate,
                         validate_steps=not args.validate_confirmation_only) \
        if args.sustainable or args.calibrate else None
    all_passed = True
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for path in files:
        suite = read_suite(path)
        if args.out and len(files) == 1:
            run_dir = Path(args.out)
            check_parent(run_dir)       # one line, before any work, if --out cannot be created there
        else:
            run_dir = fresh_path(Path(args.out) if args.out else runs_dir,
                                 f"micro-{suite.name}{'-quick' if suite.quick else ''}-{stamp}")
        req = MicroSuiteRequest(config, suite, run_dir, tuple(args.workload))
        con.print(f"[bold]suite {suite.name}[/]: {len(req.selected())} workload(s) -> {run_dir}")
        search = steps if args.sustainable else None
        with run_progress() as on_progress:
            results = run_micro_suite(req, stage=lambda s: con.print(f"[bold]>[/] {s}"), on_progress=on_progress,
                                      search=search, calibrate=steps if args.calibrate else None,
                                      lambda_fraction=args.lambda_fraction, repeat=repeat)
        if search is not None:
            print(search_table(results))
            # Repeated: every search of every workload confirmed.
            passed = all(s.confirmed for r in results for s in getattr(r, "searches", (r,)))
        else:
            for r in results:
                if r.verdict != "PASSED" and r.text:
                    print(f"{r.workload}:\n{r.text}")
            print(summary_table(results))
            passed = all(r.verdict == "PASSED" for r in results)
        all_passed &= passed
        colour = "green" if passed else "red"
        con.print(f"suite {suite.name}: [bold {colour}]{'PASSED' if passed else 'FAILED'}[/]  "
                  f"summary: {run_dir / 'summary.md'}")
    return 0 if all_passed else 1

