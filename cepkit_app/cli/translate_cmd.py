"""`cepkit translate pairs|micro`: compile a workload spec into a runnable engine program.

It only writes the program (under `paths.translator_dir` by default, never over an existing
file); it never starts the engine. Run the program with `cepkit pairs` or by hand (see its header).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cepkit_app.cli import add_config_options, command_config
from kit.config import PLANS
from kit.engines import ENGINES


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    kinds = p.add_subparsers(dest="kind", metavar="KIND")
    kinds.required = True
    pairs = kinds.add_parser("pairs", help="a Pairs strategies XML -> an engine program",
                             description="Write a standalone engine program for a Pairs strategies file.")
    add_config_options(pairs)
    pairs.add_argument("--strategies", required=True, metavar="FILE", help="the strategies XML")
    pairs.add_argument("--engine", choices=sorted(ENGINES), help="target engine (default: run.engine)")
    pairs.add_argument("--plan", choices=PLANS, help="shared operator or one pipeline per strategy "
                                                     "(default: run.plan)")
    pairs.add_argument("--out", metavar="FILE", help="program file (must not exist); default: a new file under "
                                                     "paths.translator_dir")
    pairs.set_defaults(handler=run_pairs)
    micro = kinds.add_parser("micro", help="a microbenchmark workload XML -> an engine program",
                             description="Write a standalone engine program for one microbenchmark workload "
                                         "(a Workload file, or one workload of a suite such as "
                                         "joins-quick).")
    add_config_options(micro)
    micro.add_argument("--spec", required=True, metavar="FILE",
                       help="a workload XML, or a suite XML (or a shipped suite's name, e.g. joins-quick)")
    micro.add_argument("--workload", metavar="NAME", help="which workload of a suite file")
    micro.add_argument("--data", metavar="DIR", help="the workload's dataset (needed for in-memory table joins)")
    micro.add_argument("--engine", choices=sorted(ENGINES), help="target engine (default: run.engine)")
    micro.add_argument("--out", metavar="FILE", help="program file (must not exist); default: a new file under "
                                                     "paths.translator_dir")
    micro.set_defaults(handler=run_micro)


def _write(args: argparse.Namespace, config, text: str, name: str, what: str) -> int:
    """Write the program (never over a file) and say where."""
    from cepkit_app.cli.progress import console
    from kit.paths import output_path
    from translators.output import write_program

    out = output_path(args.out, Path(config.paths.translator_dir), name)
    write_program(text, out)
    console().print(f"[bold green]wrote[/] {what}, {text.count(chr(10))} lines, to {out}")
    print(out)
    return 0


def run_pairs(args: argparse.Namespace) -> int:
    from kit.paths import path_option
    from translators.registry import engine_module
    from translators.request import PairsTranslation

    path_option(args.out)       # before any work: an empty --out is an error, not the default
    config = command_config(args, (("engine", "run.engine"), ("plan", "run.plan")))
    engine, plan = config.run.engine, config.run.plan
    req = PairsTranslation.from_file(Path(args.strategies), plan, config.run.buckets, config.run.trigger,
                                     config.run.work)
    text = engine_module(engine).translate_pairs(req)
    return _write(args, config, text, f"pairs-{engine}-{plan}-{Path(args.strategies).stem}.py",
                  f"{engine} program ({plan} plan, {len(req.strategies)} strategies)")


def run_micro(args: argparse.Namespace) -> int:
    from cepkit_app.cli.querygen_cmd import shipped_suite_file
    from kit.paths import path_option
    from translators.registry import engine_module
    from translators.request import MicroTranslation

    path_option(args.out)
    config = command_config(args, (("engine", "run.engine"),))
    engine = config.run.engine
    data = path_option(args.data, "--data")     # empty is an error, not "no dataset"
    req = MicroTranslation.from_files(shipped_suite_file(args.spec), None if data is None else Path(data),
                                      args.workload, database_join=config.run.database_join,
                                      trigger=config.run.trigger, work=config.run.work)
    text = engine_module(engine).translate_micro(req)
    n = len(req.workload.queries)
    return _write(args, config, text, f"micro-{engine}-{req.workload.name}.py",
                  f"{engine} program ({n} quer{'y' if n == 1 else 'ies'} of {req.workload.name})")
