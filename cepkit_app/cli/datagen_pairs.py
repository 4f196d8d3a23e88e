"""`cepkit datagen pairs`: generate a Pairs tick dataset with a progress bar."""

from __future__ import annotations

import argparse
from pathlib import Path

from cepkit_app.cli import add_config_options, command_config
from kit.config import FORMATS, PROFILES


def register(gens, name: str) -> None:
    p = gens.add_parser(name, help="generate Pairs stock ticks, the auxiliary file and a manifest",
                        description="Generate StockTick files (thesis 7.3.2) for a scale factor and rate "
                                    "profile, plus pairs-aux.json for the query generator and manifest.json.")
    add_generator_options(p)
    p.add_argument("--sf", type=int, help="scale factor (same as --set pairs.scale_factor=N)")
    p.add_argument("--out", metavar="DIR", help="output directory (must not exist); default: a new "
                                                "directory under paths.datagen_dir")
    p.set_defaults(handler=run)


def add_generator_options(p) -> None:
    """The options `datagen pairs` and `datagen micro` share (each sets its own section's keys)."""
    add_config_options(p)
    p.add_argument("--quick", action="store_true", help="the quick variant of the rate profile (same shape, shorter)")
    p.add_argument("--profile", choices=PROFILES, help="rate profile")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument("--format", choices=FORMATS, help="file format (default parquet)")


def generator_flags(section: str) -> tuple[tuple[str, str], ...]:
    """(argparse dest, config key) of the shared generator options for `section` (pairs, micro)."""
    return tuple((dest, f"{section}.{key}") for dest, key in
                 (("seed", "seed"), ("format", "format"), ("profile", "rate.profile"), ("quick", "rate.quick")))


def generate(args: argparse.Namespace, config, generator, section, stem: str, label: str):
    """Run a generator on its config section into --out (or a fresh directory named `stem` under
    paths.datagen_dir) with a progress bar labelled `label`; the dataset it returns."""
    from cepkit_app.cli.progress import progress_bar
    from kit.paths import output_path

    out = output_path(args.out, Path(config.paths.datagen_dir), stem)
    with progress_bar(label) as update:
        return generator(section, out, config_toml=config.to_toml(), progress=update)


def run(args: argparse.Namespace) -> int:
    from cepkit_app.cli.progress import console
    from datagen.pairs import generate_pairs

    config = command_config(args, (("sf", "pairs.scale_factor"), *generator_flags("pairs")))
    cfg = config.pairs
    r = cfg.rate
    ds = generate(args, config, generate_pairs, cfg,
                  f"pairs-sf{cfg.scale_factor}-{r.profile}{'-quick' if r.quick else ''}-seed{cfg.seed}",
                  f"ticks SF={cfg.scale_factor}")
    m = ds.manifest
    con = console()
    con.print(f"[bold green]wrote[/] {ds.total_rows:,} ticks in {len(m['files'])} {cfg.format} file(s) "
              f"to {ds.directory}")
    con.print(f"  {ds.total_rows / ds.elapsed_s:,.0f} ticks/s ({ds.elapsed_s:.1f} s); "
              f"{m['scale']['symbols']} symbols, {len(m['profile']['phases'])} phases, "
              f"{m['profile']['duration_ms'] / 1000:.0f} s simulated")
    con.print(f"  auxiliary file for the query generator: {ds.directory / m['aux_file']}")
    print(ds.directory)
    return 0
