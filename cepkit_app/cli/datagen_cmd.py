"""`cepkit datagen pairs|micro|convert`: one module per data generator subcommand."""

from __future__ import annotations

import importlib

SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("pairs", "cepkit_app.cli.datagen_pairs"),
    ("micro", "cepkit_app.cli.datagen_micro"),
    ("convert", "cepkit_app.cli.datagen_convert"),
)


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    gens = p.add_subparsers(dest="generator", metavar="GENERATOR")
    gens.required = True
    for gen_name, module in SUBCOMMANDS:
        importlib.import_module(module).register(gens, gen_name)
