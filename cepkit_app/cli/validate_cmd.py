"""`cepkit validate pairs`: check an engine's Pairs outputs against the reference answers."""

from __future__ import annotations

import argparse
from pathlib import Path

from cepkit_app.cli import add_config_options, command_config


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    kinds = p.add_subparsers(dest="kind", metavar="KIND")
    kinds.required = True
    pairs = kinds.add_parser("pairs", help="validate a Pairs run (or just compute its expected answers)")
    add_config_options(pairs)
    pairs.add_argument("--data", required=True, metavar="DIR", help="the datagen dataset the run replayed")
    pairs.add_argument("--strategies", required=True, metavar="FILE", help="the strategies XML of the run")
    pairs.add_argument("--log", metavar="DIR", help="the engine's output log (run dir, outputs/ or output-log.json);"
                                                    " without it only the expected answers are written")
    pairs.add_argument("--strategy", metavar="ALIAS", help="strategy for the Figure 7.5 chart")
    pairs.add_argument("--no-verify", action="store_true",
                       help="skip the dataset's sha256 checksums and CSV row counts (for huge trusted datasets;"
                            " presence, paths, sizes and Parquet row counts are still checked)")
    pairs.add_argument("--out", metavar="DIR", help="report directory (must not exist); default: a new one "
                                                    "under paths.validator_dir")
    pairs.set_defaults(handler=run_pairs)


def run_pairs(args: argparse.Namespace) -> int:
    import dataclasses

    from cepkit_app.cli.progress import console, progress_bar
    from cepkit_app.pipelines.pairs import measure_ms
    from kit.atomic import StagedDir
    from kit.errors import CepkitError
    from kit.manifest import read_manifest
    from kit.paths import fresh_path
    from validator.pairs_run import PairsValidation, validate_pairs

    config = command_config(args)
    out = Path(args.out) if args.out else fresh_path(Path(config.paths.validator_dir), "pairs-validation")
    if out.exists():
        raise CepkitError(f"{out}: report directory already exists; refusing to overwrite it")
    request = PairsValidation(Path(args.data), Path(args.strategies), out,
                              Path(args.log) if args.log else None, args.strategy,
                              measure_ms=measure_ms(config), verify=not args.no_verify)
    # The dataset is read and verified once, here, with a bar for big ones (sha256 unless --no-verify).
    with progress_bar("verify dataset (sha256)") as bar:
        request = dataclasses.replace(request, manifest=read_manifest(Path(args.data), verify=not args.no_verify,
                                                                      progress=bar))
    # The report is written into a staging directory and renamed to --out only when complete: a
    # failed or interrupted validation leaves nothing behind (kit.atomic).
    with StagedDir(out) as tmp:
        outcome = validate_pairs(dataclasses.replace(request, out_dir=tmp))
    outcome = dataclasses.replace(outcome, report=out / Path(outcome.report).relative_to(tmp))
    print(outcome.text)
    con = console()
    con.print(f"verdict: [bold]{outcome.verdict}[/]")
    for line in outcome.lines:      # p99 and pscore with their order count and 95 % interval
        con.print(line, markup=False)
    con.print(f"report: {outcome.report}")
    return 0 if outcome.verdict in ("PASSED", "NOT VALIDATED") else 1
