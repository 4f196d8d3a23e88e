"""The `cepkit` command line: one entry point, subcommands from a table of handler modules.

Each row of COMMANDS names a module with `register(subparsers)`, which adds its parser and sets
`handler` to a function taking the parsed arguments. Handlers turn arguments into config objects
and call library functions; user errors are `CepkitError`, caught once here: one line on stderr,
exit code 2, a traceback only with `-v` (the exit code stays 2). An `OSError` that escapes (a
directory where a file was expected, a read-only or full disk) is the last line of defence: one
line `cepkit: error: <file>: <reason>`, exit code 2. Handlers import the packages they wire inside
their functions, so `cepkit --help` stays light (no pyspark, no JVM).

Exit codes mean one thing each (specs/EXIT_CODES.md): 0 done (a validation PASSED), 1 a FAILED
verdict, 2 the command could not do its job, 128+N ended by signal N. Two rules keep them so:

- stdout and stderr are wrapped (`_Stream`) while a command runs: a write that fails (ENOSPC on
  /dev/full, EPIPE when the reader closed the pipe, EIO) is noted and the rest of that stream is
  dropped (its descriptor is pointed at /dev/null, so Python's own flush at exit cannot fail and
  turn the code into 120); the command goes on and its exit code stays what its work decided.
  Only for a command whose product *is* its stdout (`config`), a stdout that could not take the
  text (not a closed pipe: the reader took what it wanted) makes the code 2.
- every catchable signal whose default action ends the process (`kit.atomic.TERMINATION_SIGNALS`)
  is raised as a KeyboardInterrupt in the main thread, so every `with` block cleans up (staged
  outputs are removed, engines stopped); SIGINT exits 130 ("cepkit: interrupted"), any other N
  exits 128+N ("cepkit: terminated by SIGTERM"). A signal that was ignored when cepkit started
  (SIGHUP under nohup) stays ignored.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import threading
import traceback

from kit import __version__
from kit.atomic import TERMINATION_SIGNALS
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
    ("cluster", "cepkit_app.cli.cluster_cmd", "start, inspect or stop a Spark or Flink standalone cluster on this machine"),
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
ENGINE_FLAGS = (("engine", "run.engine"), ("master", "run.master"), ("fault", "run.faults"), ("launch", "run.launch"),
                ("trigger", "run.trigger"))


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that run an engine: which, where, with which faults, started by whom."""
    from kit.config import LAUNCHES, TRIGGERS
    from kit.engines import ENGINE_NAMES

    add_engine_choice(parser, f"the engine under test: {', '.join(ENGINE_NAMES)} (run.engine, default spark)")
    parser.add_argument("--master", metavar="URL", help="where the engine runs (run.master, default local[*]: "
                                                        "local[N] cores; a cluster: spark://HOST:PORT or flink://HOST:PORT, see "
                                                        "`cepkit cluster`)")
    parser.add_argument("--fault", action="append", default=None, metavar="KIND@SECONDS",
                        help="inject a fault: kill-engine@40s (SIGKILL the engine's driver JVM 40 s into the run; the "
                             "harness restarts it from its checkpoint), kill-executor@40s (a Spark cluster's executor), "
                             "kill-taskmanager@40s (a Flink cluster's TaskManager), or on a worker host of a "
                             "cluster on other machines, through run.fault_command, cut-link@40s (its network "
                             "link cut for a while) or kill-worker@40s (its engine processes killed); "
                             "repeatable (run.faults)")
    parser.add_argument("--launch", choices=LAUNCHES,
                        help="who starts the engine: the harness (default), or you (external: the harness feeds, "
                             "writes engine/spark-submit.sh and waits for it) (run.launch)")
    parser.add_argument("--trigger", choices=TRIGGERS,
                        help="how a Spark query runs: micro-batches (default), or Spark's real-time mode for what it "
                             "admits (filters, the in-memory table join, time windows, Pairs' keyed plan) (run.trigger)")


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

    from kit.paths import path_option
    from kit.shipped import config_names, config_path

    value = path_option(value, "--config")
    if value is None or os.path.exists(value) or os.sep in value or value not in config_names():
        return value
    return config_path(value)


EXIT_INTERRUPTED = 130      # 128 + SIGINT
EXIT_TERMINATED = 143       # 128 + SIGTERM

# Commands whose product is the text they print: a stdout that cannot take it means the job is not done.
STDOUT_IS_THE_PRODUCT = frozenset({"config"})


class Terminated(KeyboardInterrupt):
    """A termination signal other than SIGINT, raised in the main thread where SIGINT raises
    KeyboardInterrupt; `signum` says which."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def line(self) -> str:
        return f"cepkit: terminated by {signal_name(self.signum)}"


def signal_name(signum: int) -> str:
    """SIGTERM, SIGHUP, ...; a real-time signal as SIGRTMIN+k."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        if hasattr(signal, "SIGRTMIN") and signal.SIGRTMIN <= signum <= signal.SIGRTMAX:
            return f"SIGRTMIN+{signum - signal.SIGRTMIN}"
        return f"signal {signum}"


def _on_termination(signum, frame) -> None:
    raise Terminated(signum)


def _install_signal_handlers() -> dict[int, object]:
    """Route every termination signal but SIGINT (Python's KeyboardInterrupt already) to
    `Terminated`; returns the previous handlers. Left alone: a signal ignored when we started (nohup's
    SIGHUP, a background job's SIGINT), one handled outside Python, and every signal off the main
    thread (only the main thread may set handlers)."""
    previous: dict[int, object] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for sig in TERMINATION_SIGNALS:
        if sig == signal.SIGINT:
            continue
        try:
            current = signal.getsignal(sig)
            if current is None or current is signal.SIG_IGN:
                continue
            previous[sig] = signal.signal(sig, _on_termination)
        except (ValueError, OSError):
            continue
    return previous


def _restore_signal_handlers(previous: dict[int, object]) -> None:
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


class _Stream:
    """sys.stdout or sys.stderr while a command runs: a failed write or flush (ENOSPC, EPIPE, EIO, a
    closed file) is noted in `failure`, and everything after it is dropped instead of raising: the
    text a command prints reports its outcome, it is not the outcome. The descriptor is then
    pointed at /dev/null, so the interpreter's flush at exit finds nothing that can fail."""

    def __init__(self, stream):
        self._stream = stream
        self.failure: OSError | ValueError | None = None

    def write(self, text):
        if self.failure is None:
            try:
                return self._stream.write(text)
            except (OSError, ValueError) as e:
                self._failed(e)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.failure is None:
            try:
                self._stream.flush()
            except (OSError, ValueError) as e:
                self._failed(e)

    def _failed(self, e: OSError | ValueError) -> None:
        self.failure = e
        try:
            fd = self._stream.fileno()
        except (OSError, ValueError, AttributeError):
            return                  # not a real file (a StringIO of a test): nothing buffered below
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
        except OSError:
            pass

    @property
    def closed_pipe(self) -> bool:
        return isinstance(self.failure, OSError) and self.failure.errno == errno.EPIPE

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _fail(args: argparse.Namespace, line: str, code: int) -> int:
    if getattr(args, "verbose", False):
        traceback.print_exc()
    print(f"cepkit: error: {line}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stdout, stderr = sys.stdout, sys.stderr
    out, err = _Stream(stdout), _Stream(stderr)
    sys.stdout, sys.stderr = out, err
    args = argparse.Namespace()
    try:
        try:
            code = _run(argv, args)
        except Terminated as e:         # a signal in the last instructions of _run, after its own handlers
            print(e.line, file=sys.stderr)
            code = e.exit_code
        except KeyboardInterrupt:
            print("cepkit: interrupted", file=sys.stderr)
            code = EXIT_INTERRUPTED
        out.flush()             # here, not at exit: a late failure must not become exit code 120
        if (out.failure is not None and not out.closed_pipe and code == 0
                and getattr(args, "command", None) in STDOUT_IS_THE_PRODUCT):
            reason = getattr(out.failure, "strerror", None) or str(out.failure)
            print(f"cepkit: error: standard output: cannot write the {args.command} text: {reason}", file=sys.stderr)
            code = 2
        return code
    finally:
        for stream in (out, err):
            stream.flush()
        sys.stdout, sys.stderr = stdout, stderr


def _run(argv: list[str], args: argparse.Namespace) -> int:
    parser = build_parser()
    parser.parse_args(argv, namespace=args)
    previous = _install_signal_handlers()
    try:
        result = args.handler(args)
        return int(result or 0)
    except CepkitError as e:
        return _fail(args, str(e), e.exit_code)
    except Terminated as e:
        print(e.line, file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("cepkit: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:       # the last line of defence: an OS condition nobody turned into a CepkitError
        return _fail(args, describe_os_error(e), 2)
    except Exception as e:     # a bug: its traceback, and code 2 (Python's 1 would read as a FAILED verdict)
        traceback.print_exc()
        print(f"cepkit: error: internal error, a bug in cepkit (the traceback above says where): "
              f"{type(e).__name__}: {e}", file=sys.stderr)
        return 2
    finally:
        _restore_signal_handlers(previous)


if __name__ == "__main__":
    sys.exit(main())
