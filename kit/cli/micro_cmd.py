"""`cepkit micro`: run microbenchmark suites on the engine, validate every query, one summary per suite.

Each workload of the suite gets its dataset, program, engine run and validation in a subdirectory
of one new run directory (layout: kit/cli/micro_pipeline.py). Suites are the files of
specs/suites/ (`NAME.xml`, or `NAME-quick.xml` with --quick), or any suite file (--suite-file).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kit.cli import add_config_options

SUITE_NAMES = ("filtering", "count-windows", "time-windows", "joins", "patterns", "adaptivity", "scalability")


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    add_config_options(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--suite", choices=SUITE_NAMES + ("all",), help="a suite of specs/suites/, or all of them")
    which.add_argument("--suite-file", metavar="FILE", help="any suite XML file")
    p.add_argument("--quick", action="store_true", help="the quick variant of the suite (toy sizes, seconds each)")
    p.add_argument("--workload", action="append", default=[], metavar="NAME",
                   help="run only this workload of the suite (repeatable)")
    p.add_argument("--master", metavar="URL", help="Spark master URL (run.master, default local[*])")
    p.add_argument("--sustainable", action="store_true",
                   help="search each workload's maximum sustainable throughput (bisection on the rate, "
                        "backlog thresholds q^a/q^b, a confirming run at 90%%) instead of one run at its rate")
    p.add_argument("--calibrate", action="store_true",
                   help="burst (adaptivity) workloads: find the maximum sustainable rate at constant load first, "
                        "then run the burst at the lambda where the engine used --lambda-fraction of the CPU "
                        "(or that share of the rate found, if it fell behind first)")
    p.add_argument("--lambda-fraction", type=float, default=0.75,
                   help="lambda's share of the machine's CPU, or of capacity (default 0.75)")
    p.add_argument("--step-seconds", type=float, default=20.0, help="length of each search step's run (default 20)")
    p.add_argument("--max-steps", type=int, default=8, help="most runs per search, confirmation included (default 8)")
    p.add_argument("--out", metavar="DIR", help="run directory (must not exist; with --suite all, the parent "
                                                "of one directory per suite); default: under paths.runs_dir")
    p.set_defaults(handler=run)


def _suite_files(args: argparse.Namespace) -> list[Path]:
    from kit.paths import SPECS_DIR

    if args.suite_file:
        return [Path(args.suite_file)]
    names = SUITE_NAMES if args.suite == "all" else (args.suite,)
    return [SPECS_DIR / "suites" / f"{n}{'-quick' if args.quick else ''}.xml" for n in names]


def run(args: argparse.Namespace) -> int:
    from kit.cli.micro_pipeline import MicroSuiteRequest, run_micro_suite, search_table, summary_table
    from kit.cli.sustainable import SearchConfig
    from kit.cli.progress import console, run_progress
    from kit.config import load_config
    from kit.atomic import check_parent
    from kit.paths import fresh_path
    from kit.workload import read_suite

    overrides = tuple(args.overrides) + ((f"run.master={args.master!r}",) if args.master else ())
    config_path = Path(args.config) if args.config else None
    runs_dir = Path(load_config(config_path, overrides).paths.runs_dir)     # also checks the config early
    con = console()
    files = _suite_files(args)
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
        req = MicroSuiteRequest(config_path, overrides, suite, run_dir, tuple(args.workload))
        con.print(f"[bold]suite {suite.name}[/]: {len(req.selected())} workload(s) -> {run_dir}")
        steps = SearchConfig(duration_s=args.step_seconds, max_steps=args.max_steps)
        search = steps if args.sustainable else None
        with run_progress() as on_progress:
            results = run_micro_suite(req, stage=lambda s: con.print(f"[bold]>[/] {s}"), on_progress=on_progress,
                                      search=search, calibrate=steps if args.calibrate else None,
                                      lambda_fraction=args.lambda_fraction)
        if search is not None:
            print(search_table(results))
            passed = all(r.confirmed for r in results)
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

