"""The `cepkit` command line: one entry point, subcommands from a table of handler modules.

Each row of COMMANDS names a module with `register(subparsers)`, which adds its parser and sets
`handler` to a function taking the parsed arguments. Handlers turn arguments into config objects
and call library functions; user errors are `CepkitError`, caught once here: one line on stderr,
exit code 2, a traceback only with `-v` (the exit code stays 2). An `OSError` that escapes (a
directory where a file was expected, a read-only or full disk) is the last line of defence: one
line `cepkit: error: <file>: <reason>`, exit code 2. SIGINT exits 130 ("interrupted"); SIGTERM is
turned into a KeyboardInterrupt in the main thread, so every `with` block cleans up (staged outputs
are removed, engines stopped), and exits 143 ("terminated"). Handlers import the
packages they wire inside their functions, so `cepkit --help` stays light (no pyspark, no JVM).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
import traceback

from kit import __version__
from kit.errors import CepkitError, describe_os_error

# (command, handler module, one-line help)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("config", "cepkit_app.cli.config_cmd", "show the resolved configuration or the valid keys"),
    ("datagen", "cepkit_app.cli.datagen_cmd", "generate input data (Pairs ticks, microbenchmark streams)"),
    ("querygen", "cepkit_app.cli.querygen_cmd", "generate workload specs (Pairs strategies, microbenchmark query suites)"),
    ("pairs", "cepkit_app.cli.pairs_cmd", "run the Pairs benchmark end to end: data, strategies, engine, validation, pscore"),
    ("micro", "cepkit_app.cli.micro_cmd", "run microbenchmark suites end to end: data, queries, engine, validation"),
    ("translate", "cepkit_app.cli.translate_cmd", "compile a workload spec into a runnable engine program (no engine started)"),
    ("validate", "cepkit_app.cli.validate_cmd", "check an engine's outputs against the reference answers; report"),
    ("compare", "cepkit_app.cli.compare_cmd", "compare finished runs side by side, one column per engine: table and charts"),
    ("cluster", "cepkit_app.cli.cluster_cmd", "start, inspect or stop a Spark standalone cluster on this machine"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cepkit",
        description="Benchmark kit for event-processing engines: the Pairs benchmark and the "
                    "FINCoS microbenchmarks, on Apache Spark (PySpark) and Apache Flink (PyFlink), side by side.")
    parser.add_argument("--version", action="version", version=f"cepkit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module, help_text in COMMANDS:
        importlib.import_module(module).register(sub, name, help_text)
    return parser


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """The options every config-driven command shares."""
    parser.add_argument("-c", "--config", metavar="FILE", help="TOML config file, or the name of a shipped one "
                                                               "(quick, standard); default: built-in defaults")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config key, e.g. --set pairs.scale_factor=2 (repeatable)")


# (argparse dest, config key) of the options every engine-running command shares (add_engine_options).
ENGINE_FLAGS = (("engine", "run.engine"), ("master", "run.master"), ("fault", "run.faults"), ("launch", "run.launch"))


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that run an engine: which, where, with which faults, started by whom."""
    from kit.config import LAUNCHES
    from kit.engines import ENGINE_NAMES

    add_engine_choice(parser, f"the engine under test: {', '.join(ENGINE_NAMES)} (run.engine, default spark)")
    parser.add_argument("--master", metavar="URL", help="where the engine runs (run.master, default local[*]: "
                                                        "local[N] cores; Spark also spark://HOST:PORT, see `cepkit cluster`)")
    parser.add_argument("--fault", action="append", default=None, metavar="KIND@SECONDS",
                        help="inject a fault: kill-engine@40s (SIGKILL the engine's driver JVM 40 s into the run; the "
                             "harness restarts it from its checkpoint) or kill-executor@40s (a cluster executor); "
                             "repeatable (run.faults)")
    parser.add_argument("--launch", choices=LAUNCHES,
                        help="who starts the engine: the harness (default), or you (external: the harness feeds, "
                             "writes engine/spark-submit.sh and waits for it) (run.launch)")


def add_engine_choice(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--engine", metavar="NAME", help=help_text)


def command_config(args: argparse.Namespace, flags: tuple[tuple[str, str], ...] = ()):
    """The command's configuration, loaded once: defaults, `-c FILE`, `--set`, then the command's
    own options as typed values. `flags` pairs an argparse dest with the dotted key it sets; an
    option left out (None, or False for a switch) sets nothing."""
    from kit.config import load_config

    given = {key: dest for dest, key in flags
             if getattr(args, dest, None) is not None and getattr(args, dest) is not False}
    try:
        return load_config(config_file(args.config), args.overrides, {k: getattr(args, d) for k, d in given.items()})
    except CepkitError as e:
        # A value this command's own option set is the culprit: name the option, as the user wrote it.
        for key, dest in given.items():
            head, sep, rest = str(e).partition(f"{key}: ")
            if sep and (not head or head.endswith(":")):
                raise CepkitError(f"--{dest.replace('_', '-')} ({key}): {rest}") from None
        raise


def config_file(value: str | None):
    """`-c VALUE`: a file, or the name of a shipped config (kit/specs/configs/) when no such file
    exists and VALUE is a bare name."""
    import os

    from kit.shipped import config_names, config_path

    if value is None or os.path.exists(value) or os.sep in value or value not in config_names():
        return value
    return config_path(value)


EXIT_INTERRUPTED = 130      # 128 + SIGINT
EXIT_TERMINATED = 143       # 128 + SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where SIGINT raises KeyboardInterrupt."""


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


def _install_sigterm():
    """Route SIGTERM to `Terminated`; returns the previous handler (None: not installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        return None


def _fail(args: argparse.Namespace, line: str, code: int) -> int:
    if getattr(args, "verbose", False):
        traceback.print_exc()
    print(f"cepkit: error: {line}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = _install_sigterm()
    try:
        result = args.handler(args)
        return int(result or 0)
    except CepkitError as e:
        return _fail(args, str(e), e.exit_code)
    except Terminated:
        print("cepkit: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("cepkit: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:       # the last line of defence: an OS condition nobody turned into a CepkitError
        return _fail(args, describe_os_error(e), 2)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
