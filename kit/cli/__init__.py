"""The `cepkit` command line: one entry point, subcommands from a table of handler modules.

Each row of COMMANDS names a module with `register(subparsers)`, which adds its parser and sets
`handler` to a function taking the parsed arguments. Handlers turn arguments into config objects
and call library functions; user errors are `CepkitError`, caught once here: one line on stderr,
exit code 2, a traceback only with `-v`. This package is the only part of `kit` that may import
the other cepkit packages, and it does so inside handlers, so `cepkit --help` stays light.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from kit import __version__
from kit.errors import CepkitError

# (command, handler module, one-line help)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("config", "kit.cli.config_cmd", "show the resolved configuration or the valid keys"),
    ("datagen", "kit.cli.datagen_cmd", "generate input data (Pairs ticks, microbenchmark streams)"),
    ("querygen", "kit.cli.querygen_cmd", "generate workload specs (Pairs strategies, microbenchmark query suites)"),
    ("pairs", "kit.cli.pairs_cmd", "run the Pairs benchmark end to end: data, strategies, engine, validation, pscore"),
    ("micro", "kit.cli.micro_cmd", "run microbenchmark suites end to end: data, queries, engine, validation"),
    ("translate", "kit.cli.translate_cmd", "compile a workload spec into a runnable engine program (no engine started)"),
    ("validate", "kit.cli.validate_cmd", "check an engine's outputs against the reference answers; report"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cepkit",
        description="Benchmark kit for event-processing engines: the Pairs benchmark and the "
                    "FINCoS microbenchmarks, with Apache Spark (PySpark) as the engine under test.")
    parser.add_argument("--version", action="version", version=f"cepkit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module, help_text in COMMANDS:
        importlib.import_module(module).register(sub, name, help_text)
    return parser


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """The options every config-driven command shares."""
    parser.add_argument("-c", "--config", metavar="FILE", help="TOML config file (default: built-in defaults)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config key, e.g. --set pairs.scale_factor=2 (repeatable)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.handler(args)
        return int(result or 0)
    except CepkitError as e:
        if args.verbose:
            raise
        print(f"cepkit: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("cepkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
