"""`cepkit translate pairs`: compile a strategies spec into a runnable engine program.

It only writes the program (under `paths.translator_dir` by default, never over an existing
file); it never starts the engine. Run the program with `cepkit pairs` or by hand (see its header).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.cli import add_config_options


def register(sub, name: str, help_text: str) -> None:
    from translators.registry import ENGINES, PLANS

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


def run_pairs(args: argparse.Namespace) -> int:
    from kit.cli.progress import console
    from kit.config import load_config
    from kit.paths import fresh_path
    from translators.output import write_program
    from translators.registry import engine_module
    from translators.request import PairsTranslation

    config = load_config(args.config, args.overrides)
    engine = args.engine or config.run.engine
    plan = args.plan or config.run.plan
    req = PairsTranslation.from_file(Path(args.strategies), plan)
    text = engine_module(engine).translate_pairs(req)
    name = f"pairs-{engine}-{plan}-{Path(args.strategies).stem}.py"
    out = Path(args.out) if args.out else fresh_path(Path(config.paths.translator_dir), name)
    write_program(text, out)
    console().print(f"[bold green]wrote[/] {engine} program ({plan} plan, {len(req.strategies)} strategies, "
                    f"{text.count(chr(10))} lines) to {out}")
    print(out)
    return 0
