"""`cepkit compare RUN_DIR...`: several finished runs side by side, one column per engine.

The runs are `cepkit pairs` run directories, or `cepkit micro` suite run directories of one mode
(fixed rate, or --sustainable); validator/compare_page.py reads them and writes compare.html,
compare.json and the figures into a new directory (specs/VALIDATION.md, "Comparing engines").
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cepkit_app.cli import add_config_options, command_config


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    add_config_options(p)
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="a run directory of `cepkit pairs` (or of `cepkit pairs --repeat`), or of `cepkit micro` "
                        "(all of one kind)")
    p.add_argument("--out", metavar="DIR", help="report directory (must not exist); default: a new one under "
                                                "paths.validator_dir")
    p.add_argument("--spread", action="store_true",
                   help="group the Pairs run directories by engine: one column each, the median and [min-max] "
                        "of p99, pscore and throughput over its runs (a `cepkit pairs --repeat` directory "
                        "is always shown so)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cepkit_app.cli.progress import console
    from kit.errors import CepkitError
    from kit.jsonfile import read_json_object
    from kit.paths import fresh_path, path_option
    from validator.compare_page import DOC, comparison_text, write_comparison

    runs = [Path(d) for d in args.run_dirs]
    if path_option(args.out) is not None:
        out = Path(args.out)
        if out.exists():        # one line before any run is read (the library refuses it too)
            raise CepkitError(f"{out}: output directory already exists; refusing to overwrite it")
    else:
        config = command_config(args)
        out = fresh_path(Path(config.paths.validator_dir), "compare")
    report = write_comparison(runs, out, spread=args.spread)
    print(comparison_text(read_json_object(out / DOC, what="a comparison")), end="")
    console().print(f"report: {report}")
    return 0
