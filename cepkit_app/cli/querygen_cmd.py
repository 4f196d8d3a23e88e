"""`cepkit querygen pairs|micro|check`: write workload specs and show what was written.

- `pairs` reads a dataset's `pairs-aux.json` and writes the Pairs strategies file;
- `micro` writes a microbenchmark suite (Table 4.2's sweeps), full or quick;
- `check` parses and validates spec files (and strategies against an auxiliary file).
Output goes under `paths.querygen_dir` by default, never over an existing file.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cepkit_app.cli import add_config_options, command_config


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    gens = p.add_subparsers(dest="spec", metavar="SPEC")
    gens.required = True

    pairs = gens.add_parser("pairs", help="Pairs strategies from a dataset's auxiliary file",
                            description="Write the strategies XML (thesis B.2): 25 x SF strategies (or --count) over "
                                        "the dataset's correlated pairs, parameters drawn from Table B.1.")
    add_config_options(pairs)
    pairs.add_argument("--aux", required=True, metavar="PATH",
                       help="pairs-aux.json, or the dataset directory that holds it")
    pairs.add_argument("--seed", type=int, help="random seed (default: the dataset's seed)")
    pairs.add_argument("--count", type=int, metavar="N",
                       help="number of strategies (default: pairs.strategies, else the aux file's 25 x SF)")
    pairs.add_argument("--out", metavar="FILE", help="output file (must not exist); default: a new file under "
                                                     "paths.querygen_dir")
    pairs.set_defaults(handler=run_pairs)

    micro = gens.add_parser("micro", help="a microbenchmark suite (Table 4.2's parameter sweeps)",
                            description="Write a microbenchmark suite: filtering, count-windows, time-windows, "
                                        "joins, patterns, adaptivity, scalability, or all.")
    add_config_options(micro)
    micro.add_argument("--suite", required=True, metavar="NAME", help="suite name, or 'all'")
    micro.add_argument("--quick", action="store_true", help="the small variant (seconds of data, toy sizes)")
    micro.add_argument("--out", metavar="PATH", help="output file (must not exist), or with --suite all a "
                                                     "directory; default: paths.querygen_dir")
    micro.set_defaults(handler=run_micro)

    check = gens.add_parser("check", help="validate spec files and summarise them",
                            description="Parse spec files (strategies, workload, suite) against the XSD and the "
                                        "model; with --aux, strategies must watch the dataset's pairs.")
    check.add_argument("files", nargs="+", metavar="FILE",
                       help="spec files, or names of shipped suites (e.g. filtering-quick)")
    check.add_argument("--aux", metavar="PATH", help="pairs-aux.json (or its dataset directory)")
    check.set_defaults(handler=run_check)


def _show(rows, title: str) -> None:
    """The summary table on stderr, then each file's path on stdout (for scripts)."""
    from rich.table import Table

    from cepkit_app.cli.progress import console
    table = Table(title=title)
    table.add_column("file", overflow="fold")
    table.add_column("spec")
    table.add_column("size", justify="right")
    table.add_column("details")
    for w in rows:
        size = (f"{w.items:,} strategies" if w.kind == "strategies"
                else f"{w.items:,} workloads, {w.queries:,} queries")
        table.add_row(str(w.path), f"{w.kind} {w.name}", size, w.details)
    console().print(table)
    for w in rows:
        print(w.path)


def run_pairs(args: argparse.Namespace) -> int:
    from kit.config import INT64_MAX
    from kit.errors import CepkitError
    from kit.paths import output_path, path_option
    from kit.workload import load_aux
    from querygen.output import default_strategies_name, write_strategies

    path_option(args.out)       # before any work: an empty --out is an error, not the default
    config = command_config(args)
    aux = load_aux(args.aux)
    seed = args.seed if args.seed is not None else (aux.seed if aux.seed is not None else config.pairs.seed)
    if not 0 <= seed <= INT64_MAX:      # the strategies file's seed is an xs:long
        raise CepkitError(f"--seed must be in 0..{INT64_MAX}, got {seed}")
    out = output_path(args.out, Path(config.paths.querygen_dir), default_strategies_name(aux, seed))
    count = args.count if args.count is not None else config.pairs.strategies
    _show([write_strategies(aux, seed, out, count)], "querygen pairs: wrote")
    return 0


def run_micro(args: argparse.Namespace) -> int:
    from kit.errors import CepkitError
    from kit.paths import fresh_path, path_option
    from kit.shipped import SUITE_NAMES, suite_file_name
    from querygen.output import write_suite

    config = command_config(args)
    if args.suite != "all" and args.suite not in SUITE_NAMES:
        raise CepkitError(f"--suite {args.suite}: unknown suite (valid: {', '.join(SUITE_NAMES)}, all)")
    names = SUITE_NAMES if args.suite == "all" else (args.suite,)
    path_option(args.out)       # an empty --out is an error, not the default folder
    if args.suite != "all" and args.out:
        rows = [write_suite(args.suite, args.quick, Path(args.out))]
    elif args.out:      # --suite all: a new directory of suite files, staged so it appears complete or not at all
        import dataclasses

        from kit.atomic import StagedDir
        final = Path(args.out)
        if os.path.lexists(final):
            raise CepkitError(f"{args.out}: already exists; with --suite all, --out names a new directory")
        with StagedDir(final) as tmp:
            staged = [write_suite(n, args.quick, tmp / suite_file_name(n, args.quick)) for n in names]
        rows = [dataclasses.replace(w, path=final / w.path.name) for w in staged]
    else:
        parent = Path(config.paths.querygen_dir)
        rows = [write_suite(n, args.quick, fresh_path(parent, suite_file_name(n, args.quick))) for n in names]
    _show(rows, "querygen micro: wrote")
    return 0


def shipped_suite_file(value: str) -> Path:
    """A spec file argument: the file, or a shipped suite by name (NAME or NAME-quick) when no such
    file exists."""
    from kit.shipped import SUITE_NAMES, suite_path

    name = value.removesuffix("-quick")
    if os.path.exists(value) or os.sep in value or name not in SUITE_NAMES:
        return Path(value)
    return suite_path(name, quick=value.endswith("-quick"))


def run_check(args: argparse.Namespace) -> int:
    from kit.paths import path_option
    from kit.workload import load_aux, read_spec
    from querygen.output import describe

    aux = load_aux(args.aux) if path_option(args.aux, "--aux") is not None else None
    files = [shipped_suite_file(f) for f in args.files]
    rows = [describe(read_spec(f, aux=aux), f, aux) for f in files]
    _show(rows, "querygen check: valid")
    return 0
