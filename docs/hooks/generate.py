"""MkDocs hook: the documentation pages that are generated from the code and the committed results.

Generated at every build, so they cannot drift from what they describe:

- reference/cli.md: every `cepkit` command and option, walked from the real argument parsers
  (cepkit_app.cli.build_parser);
- reference/config.md: every config key with its type, range (kit.config.describe_keys), default
  (a default Config) and the comment that stands beside its field in kit/config/sections.py;
- specs/*.md and examples/external_engine/: the written specs and the external-engine example,
  included as they are (their relative links keep working, since the layout mirrors the repository);
- results/: one page per benchmark from each committed results/*/results.json, every figure with
  its provenance (command, commit, machine, plan, repetitions, verdict; "not recorded" where the
  results file has no such field).

It lives outside the kit's packages (tests/test_layering.py keeps the packages' import graph) and
is also imported by tests/docs, which check that every command, option and key has its entry.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import inspect
import io
import json
import re
import subprocess
import tokenize
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_RECORDED = "not recorded"


# -- the command line ------------------------------------------------------------------------

def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of `parser`, in the order they were added."""
    out = []
    for action in parser._actions:                      # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            out += [(name, helps.get(name, ""), p) for name, p in action.choices.items()]
    return out


def commands(parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ("cepkit",)):
    """Every command as (path, one-line help, parser), depth first: ("cepkit",), ("cepkit", "datagen"),
    ("cepkit", "datagen", "pairs"), ..."""
    if parser is None:
        from cepkit_app.cli import build_parser
        parser = build_parser()
    yield path, parser.description or "", parser
    for name, help_text, sub in _subparsers(parser):
        for found in commands(sub, path + (name,)):
            yield (found[0], help_text, found[2]) if found[0] == path + (name,) else found


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options and positional arguments a user types (subcommand choices and --help left out)."""
    return [a for a in parser._actions
            if not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction))]


def command_id(path: tuple[str, ...]) -> str:
    return "-".join(path)


def option_id(path: tuple[str, ...], action: argparse.Action) -> str:
    name = (action.option_strings[-1] if action.option_strings else action.dest).lstrip("-")
    return f"{command_id(path)}--{name}"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: escaped HTML, no pipes or line breaks."""
    return html.escape(" ".join(str(text).split())).replace("|", "&#124;")


def _code(text: str) -> str:
    """Text for a code span in a Markdown table cell (the code span escapes HTML itself)."""
    return str(text).replace("|", "\\|")


def _option_row(path, action: argparse.Action) -> str:
    names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.option_strings and action.nargs != 0:
        names += f" `{action.metavar or action.dest.upper()}`"
    what = action.help or ""
    if action.choices:
        what += f" (one of: {', '.join(map(str, action.choices))})"
    if isinstance(action, (argparse._AppendAction,)) or action.nargs in ("+", "*"):
        what += " (repeatable)" if action.option_strings and "repeatable" not in what else ""
    default = action.default
    shown = "" if default in (None, False, [], argparse.SUPPRESS) else f"`{default}`"
    if not action.option_strings:
        shown = "required" if action.nargs not in ("?", "*") else shown
    return (f"| <span id=\"{option_id(path, action)}\"></span>{names} | {_cell(what)} | {shown} |")


def cli_page(parser: argparse.ArgumentParser | None = None) -> str:
    lines = ["# Command line", "",
             "Generated from the argument parsers of `cepkit` (`cepkit_app/cli/`) at every build of this site, "
             "so it lists exactly what the installed command accepts. `cepkit COMMAND --help` prints the same.",
             "", "Options that set a config key name it in brackets (`run.engine`); the "
             "[config reference](config.md) has each key's type, default and range.", ""]
    found = list(commands(parser))
    lines += ["| command | what it does |", "|---|---|"]
    lines += [f"| [`{' '.join(p)}`](#{command_id(p)}) | {_cell(h)} |" for p, h, _ in found[1:]]
    lines.append("")
    for path, help_text, parser in found:
        level = "#" * min(len(path) + 1, 4)
        lines += [f"{level} `{' '.join(path)}` {{#{command_id(path)}}}", ""]
        if help_text:
            lines += [help_text[0].upper() + help_text[1:] + ("" if help_text.endswith(".") else "."), ""]
        usage = parser.format_usage().strip().removeprefix("usage: ")
        lines += ["```text", usage, "```", ""]
        rows = options(parser)
        if rows:
            lines += ["| option | what it does | default |", "|---|---|---|"]
            lines += [_option_row(path, a) for a in rows]
            lines.append("")
        subs = _subparsers(parser)
        if subs:
            lines += ["Subcommands: " + ", ".join(f"[`{n}`](#{command_id(path + (n,))})" for n, _, _ in subs) + ".", ""]
    return "\n".join(lines)


# -- the config model ------------------------------------------------------------------------

def field_comments(cls: type) -> dict[str, str]:
    """The comment of each field of a dataclass, from its source: the comment lines just above the
    field and the one at the end of its line."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    above: list[str] = []
    field_line = re.compile(r"^\s+([a-z_][a-z0-9_]*)\s*:\s*[^=]+(=.*)?$")
    for line in source.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# ").strip())
            continue
        code, trailing = _split_comment(line)
        m = field_line.match(code.rstrip())
        if m and m[1] in {f.name for f in dataclasses.fields(cls)}:
            out[m[1]] = " ".join([*above, *( [trailing] if trailing else [])]).strip()
        above = []
    return out


def _split_comment(line: str) -> tuple[str, str]:
    """(code, comment) of one source line, the comment found by the tokenizer (not inside a string)."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type == tokenize.COMMENT:
                code = line.strip()[:tok.start[1]]
                return "    " + code, tok.string.lstrip("# ").strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return line, ""


def _sections(cls: type, prefix: str = ""):
    """(dotted prefix, section class) of every section, depth first."""
    yield prefix, cls
    for name, tp in typing.get_type_hints(cls).items():
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            yield from _sections(tp, f"{prefix}{name}.")


def config_id(key: str) -> str:
    return "config-" + key.replace(".", "-")


def _default_of(config, key: str):
    value = config
    for part in key.split("."):
        value = getattr(value, part)
    return value


def _toml_value(v) -> str:
    if v is None:
        return "auto"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(json.dumps(x) for x in v) + "]"
    return repr(v)


def options_by_key() -> dict[str, list[str]]:
    """Config key -> the command-line options that set it, from the commands' own (dest, key)
    tables (`FLAGS`, `ENGINE_FLAGS`, ... in cepkit_app/cli/), e.g. pairs.scale_factor -> [--sf]."""
    import importlib
    import pkgutil

    import cepkit_app.cli as cli

    dests: dict[str, str] = {}
    for info in pkgutil.iter_modules(cli.__path__):
        if info.name == "__main__":             # importing it would run the command line
            continue
        module = importlib.import_module(f"cepkit_app.cli.{info.name}")
        for name, table in vars(module).items():
            if name.endswith("FLAGS") and isinstance(table, tuple):
                dests.update({dest: key for dest, key in table})
    dests.update({dest: key for dest, key in cli.ENGINE_FLAGS})
    out: dict[str, list[str]] = {}
    for _, _, parser in commands():
        for action in options(parser):
            key = dests.get(action.dest)
            if key and action.option_strings and action.option_strings[-1] not in out.get(key, []):
                out.setdefault(key, []).append(action.option_strings[-1])
    return out


def config_page() -> str:
    from kit.config import Config, describe_keys

    described = dict(describe_keys())
    by_option = options_by_key()
    default = Config()
    lines = ["# Configuration keys", "",
             "Generated from the config model (`kit/config/`) at every build of this site: every key a "
             "config file or `--set section.key=value` accepts, with its type and range as the loader "
             "checks them, its default, and what the code says of it. `cepkit config keys` prints the "
             "same list; `cepkit config show` prints a resolved config.", "",
             "A config is a TOML file (`-c FILE`, or a shipped one by name: `-c quick`, `-c standard`, from "
             "`kit/specs/configs/`), then each `--set`, then the command's own options. An unknown key or a "
             "bad value is refused in one line naming the file and the key (exit code 2). `auto` (an "
             "optional key left unset) is derived from the scale factor or the section's default.", ""]
    for prefix, cls in _sections(Config):
        keys = [(name, tp) for name, tp in typing.get_type_hints(cls).items()
                if not (isinstance(tp, type) and dataclasses.is_dataclass(tp))]
        if not keys:
            continue
        title = prefix.rstrip(".") or "(top level)"
        lines += [f"## `[{title}]` {{#config-section-{title.replace('.', '-')}}}", ""]
        doc = inspect.getdoc(cls) or ""
        if doc and not doc.startswith(cls.__name__ + "("):
            lines += [doc, ""]
        comments = field_comments(cls)
        lines += ["| key | type and range | default | what it is |", "|---|---|---|---|"]
        for name, _ in keys:
            key = prefix + name
            lines.append(f"| <span id=\"{config_id(key)}\"></span>`{key}` | {_cell(described[key])} | "
                         f"`{_code(_toml_value(_default_of(default, key)))}` | {_cell(comments.get(name, ''))}"
                         + (f" Option: {', '.join(f'`{o}`' for o in by_option[key])}." if key in by_option else "")
                         + " |")
        lines.append("")
    return "\n".join(lines)


# -- the run directory -----------------------------------------------------------------------

# (title, module whose docstring draws the layout, what the layout is of)
LAYOUTS = (("A Pairs run (`cepkit pairs`)", "cepkit_app.pipelines.pairs"),
           ("A microbenchmark suite run (`cepkit micro`)", "cepkit_app.pipelines.micro"),
           ("A repetition (`--repeat K`)", "cepkit_app.pipelines.repeat"))


def layout_block(doc: str) -> str:
    """The indented block of a module docstring that draws a directory layout."""
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("    ") and ("<run>" in line or "repeat-" in line)),
                 None)
    if start is None:
        return ""
    block = []
    for line in lines[start:]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block).strip("\n")


def run_directory_page() -> str:
    import importlib

    lines = ["# Run directory and output log", "",
             "Generated from the pipelines' own descriptions (`cepkit_app/pipelines/`) at every build of this "
             "site. Every run lands in a new directory under `paths.runs_dir` (default `runs/`), never over an "
             "earlier one; a run whose engine failed is kept, marked by the status in `engine/run.json`.", ""]
    for title, module in LAYOUTS:
        block = layout_block(importlib.import_module(module).__doc__ or "")
        if not block:
            raise SystemExit(f"{module}: its docstring draws no directory layout for the docs")
        lines += [f"## {title}", "", "```text", block, "```", ""]
    lines += ["## The engine run: `engine/`", "",
              "The harness's run directory (`run.json`, `versions.json`, `machine.json`, `outputs/`, `metrics/`, "
              "`logs/`, `checkpoint/`, `spark-submit.sh`) and what each file holds: "
              "[ENGINE_RUN.md, \"The run directory\"](../specs/ENGINE_RUN.md#the-run-directory).", "",
              "## The output log: `engine/outputs/`", "",
              "`output-log.json` and one or more Parquet or CSV files per output stream, each row with the "
              "triggering event's `inputTS` and the sink's `arrivalTS`: [OUTPUT_LOG.md](../specs/OUTPUT_LOG.md). "
              "The same format is what [your own engine](../tutorials/external-engine.md) writes.", "",
              "## The validation: `report/`", "",
              "`report.html` (self-contained), `summary.json` (every number of the page, for tools), "
              "`figures/*.png` and `expected/` (the reference answers): [reports](reports.md).", ""]
    return "\n".join(lines)


# -- the committed results -------------------------------------------------------------------

# The thesis page's figures (validator/thesis_page.py) and the micro suite each one draws.
FIGURE_SUITES = {"q7": "patterns", "count-windows": "count-windows"}
SUITE_TITLES = {"patterns": "Q7 pattern (thesis Figure 4.15)",
                "count-windows": "Q2 count windows (thesis Figures 4.5 and 4.7)"}


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def results_files() -> list[Path]:
    return sorted((ROOT / "results").glob("*/results.json"))


def _read_results(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: cannot read the results file: {e}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "cepkit.thesis-results":
        raise SystemExit(f"{path}: kind: expected 'cepkit.thesis-results', got {doc.get('kind')!r}: "
                         "docs/hooks/generate.py has no page for it")
    return doc


def _recorded(value) -> str:
    return NOT_RECORDED if value in (None, "", [], {}) else _cell(value)


def _provenance(rows: list[tuple[str, object]]) -> list[str]:
    lines = ["| | |", "|---|---|"]
    lines += [f"| {label} | {_recorded(value)} |" for label, value in rows]
    return lines + [""]


def _results_commit(path: Path) -> str | None:
    rel = path.relative_to(ROOT).as_posix()
    return _git("log", "-1", "--format=%h (%cs)", "--", rel)


def _micro_command(point: dict) -> str:
    """The recorded parts of a point's command: its suite, workload and engine."""
    if not point.get("suite") or not point.get("workload"):
        return ""
    engine = point.get("engine")
    return (f"cepkit micro --suite {point['suite']} --workload {point['workload']} --sustainable"
            + ("" if engine in (None, "spark") else f" --engine {engine}")
            + (" --quick" if point.get("quick") else ""))


def results_pages(path: Path) -> dict[str, str | bytes]:
    """{docs path: content} of the pages (and figures) drawn from one results.json."""
    doc = _read_results(path)
    name = path.parent.name
    rel = path.relative_to(ROOT).as_posix()
    commit = _results_commit(path)
    source_line = (f"Drawn at this site's build from `{rel}` (written by `benchmarks/thesis_results.py`, "
                   f"generated {doc.get('generated') or NOT_RECORDED}; last committed in "
                   f"{commit or NOT_RECORDED}). Nothing here is typed by hand.")
    if not any(isinstance(r, dict) and (r.get("bound") or r.get("verdict_bound")) for r in doc.get("micro") or []):
        # Figures from before every run said what bounded it (specs/ENGINE_RUN.md, "What bounded a run").
        source_line += ("\n\n!!! warning \"No verdict on what bounded these figures\"\n"
                        "    They were measured before the kit's JVM connectors and its verdicts: Flink's events "
                        "entered through the kit's Python puller one row at a time and its answers left through a "
                        "Python emitter, and Spark's count windows and Q7 ran the kit's core on the driver, as did "
                        "both engines' Pairs buckets in Python. They may be the kit's limit rather than the "
                        "engine's, and are not published as the engines' until they are measured again with a "
                        "verdict ([throughput and the kit's ceiling](../throughput.md) has figures that carry one).")
    notes = [str(n) for n in doc.get("notes") or []]
    pages: dict[str, str | bytes] = {}
    base = f"results/{name}"

    # Pairs: Table 7.1
    table = doc.get("table_7_1") or []
    pairs = doc.get("pairs") or []
    lines = ["# Pairs: Table 7.1 redone", "", source_line, "",
             "The thesis's engines X and Y beside cepkit's runs of the standard two-hour profile: the MarketOrder "
             "p99 with the number of orders behind it and its 95 % interval, and the pscore "
             "([concepts](../../concepts/pscore.md)).", "",
             "| SF | who | profile | strategies | MarketOrder p99 | pscore | verdict |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.get('sf')} | {_cell(r.get('who', ''))} | {_cell(r.get('profile', ''))} | {r.get('strategies', '')} | "
              f"{_cell(r.get('p99', ''))} | {_cell(r.get('pscore', ''))} | {_cell(r.get('verdict', ''))} |" for r in table]
    lines.append("")
    for row in pairs:
        runs = row.get("runs") or []
        first = runs[0] if runs else {}
        lines += [f"## {row.get('engine')} at SF {row.get('sf')}: {row.get('source')}", "",
                  f"{_cell(row.get('verdict', ''))}; MarketOrder {_cell(row.get('p99', ''))}; "
                  f"pscore {_cell(row.get('pscore', ''))}.", ""]
        lines += _provenance([
            ("command", row.get("command") or (f"cepkit pairs --sf {row.get('sf')}"
                                               + ("" if row.get("engine") == "spark" else f" --engine {row.get('engine')}")
                                               + " (its recorded parts: engine, scale factor, the standard profile)"
                                               if "standard" in str(row.get("profile", "")) else None)),
            ("run directory", row.get("source")), ("commit", row.get("commit")),
            ("machine", row.get("machine")), ("plan", row.get("plan") or first.get("plan")),
            ("repetitions", f"{len(runs)} run(s)" if runs else None),
            ("verdict", row.get("verdict")),
            ("what bounded the run", row.get("bound") or first.get("bound")),
            ("throughput", f"{first['throughput_eps']:,.0f} ev/s" if first.get("throughput_eps") else None),
            ("mean CPU / peak RSS", f"{first['mean_cpu_percent']:,.0f} % / {first['peak_rss_mib']:,.0f} MiB"
             if first.get("mean_cpu_percent") and first.get("peak_rss_mib") else None)])
    for d in doc.get("details") or []:
        lines += [f"### {_cell(d.get('heading') or d.get('title'))}: per phase", "", _cell(d.get("summary", "")) + ".", "",
                  "| phase | sim s | input ev/s (nominal) | MarketOrder n | p50 ms | p99 ms |", "|---|---|---|---|---|---|"]
        lines += [f"| {_cell(p.get('phase'))} | {_cell(p.get('sim_s'))} | {_cell(p.get('input'))} | {_cell(p.get('orders'))} | "
                  f"{_cell(p.get('p50'))} | {_cell(p.get('p99'))} |" for p in d.get("phases") or []]
        lines.append("")
        if d.get("health"):
            lines += ['??? note "Long-run health"', "",
                      "    | series | level | growth per hour | of the level | flag |", "    |---|---|---|---|---|"]
            lines += [f"    | {_cell(h.get('label'))} | {_cell(h.get('level'))} | {_cell(h.get('growth'))} | "
                      f"{_cell(h.get('pct'))} | {_cell(h.get('flag'))} |" for h in d["health"]]
            lines.append("")
    lines += ["## Notes", ""] + [f"- {_cell(n)}" for n in notes] + [""]
    pages[f"{base}/pairs.md"] = "\n".join(lines)

    # Microbenchmarks: one page per suite, each with its figure.
    micro = doc.get("micro") or []
    figures = {Path(f).stem: f for f in doc.get("figures") or []}
    suites = sorted({m.get("suite") for m in micro if m.get("suite")})
    for suite in suites:
        rows = [m for m in micro if m.get("suite") == suite]
        title = SUITE_TITLES.get(suite, f"Microbenchmark suite {suite}")
        lines = [f"# {title}", "", source_line, "",
                 "Maximum sustainable throughput, events per second, one sustainable search per point "
                 "([concepts](../../concepts/sustainable.md)).", ""]
        for fid, fpath in figures.items():
            if FIGURE_SUITES.get(fid) == suite:
                target = f"{base}/{fpath}"
                pages[target] = (path.parent / fpath).read_bytes()
                lines += [f"![{title}]({fpath})", ""]
        lines += ["## Provenance", ""]
        engines = sorted({m.get("engine") for m in rows if m.get("engine")})
        example = (rows[0].get("point") or {}) | {"engine": rows[0].get("engine")}
        lines += _provenance([
            ("command", rows[0].get("command") or (_micro_command(example | {"workload": "WORKLOAD", "engine": "spark"})
                                                   + " [--engine flink]: each point's workload and engine are in "
                                                   "its row below, the step options in the notes")),
            ("commit", rows[0].get("commit")), ("machine", rows[0].get("machine")),
            ("plan", rows[0].get("plan") or "each engine's default plan (see the notes)"),
            ("engines", ", ".join(engines)),
            ("repetitions", ", ".join(sorted({str((m.get('point') or {}).get('searches')) for m in rows}))
             + " search(es) per point"),
            ("verdict", rows[0].get("verdict") or ("every found rate confirmed (its run at 90 % kept up)"
                                                   if all((m.get("point") or {}).get("confirmed") for m in rows)
                                                   else None)),
            ("what bounded the run", rows[0].get("bound"))])
        lines += ["## Points", ""]
        lines += ["| workload | engine | params | sustainable ev/s | searches | confirmed | run directory |",
                  "|---|---|---|---|---|---|---|"]
        for m in rows:
            pt = m.get("point") or {}
            lines.append(f"| {_cell(m.get('workload'))} | {_cell(m.get('engine'))} | {_cell(m.get('params'))} | "
                         f"{_cell(m.get('eps'))} | {_recorded(pt.get('searches'))} | "
                         f"{'yes' if pt.get('confirmed') else 'no' if 'confirmed' in pt else NOT_RECORDED} | "
                         f"{_recorded(m.get('source'))} |")
        lines += ["", "(< N) is the lowest rate the search found unsustainable, so the limit lies between the two; "
                  "≥ marks a search whose every step kept up.", ""]
        lines += ["## Notes", ""] + [f"- {_cell(n)}" for n in notes if suite_mentioned(n, suite)] + [""]
        pages[f"{base}/{suite}.md"] = "\n".join(lines)

    index = [f"# Results: {name}", "", source_line, "",
             "| page | what |", "|---|---|",
             f"| [Pairs: Table 7.1]({'pairs.md'}) | {len(pairs)} cepkit run(s) beside the thesis's engines |"]
    index += [f"| [{SUITE_TITLES.get(s, s)}]({s}.md) | {sum(1 for m in micro if m.get('suite') == s)} points |"
              for s in suites]
    pages[f"{base}/index.md"] = "\n".join(index) + "\n"
    return pages


def suite_mentioned(note: str, suite: str) -> bool:
    words = {"patterns": ("Q7", "patterns"), "count-windows": ("Count windows", "count-windows", "count windows")}
    return any(w.lower() in note.lower() for w in words.get(suite, (suite,)))


# -- throughput and the kit's ceiling (benchmarks/sustainable_compare.py --results) ------------------

THROUGHPUT = ROOT / "results" / "throughput" / "figures.json"
THROUGHPUT_PAGE = "results/throughput.md"


def _eps_cell(pt: dict) -> str:
    eps = pt.get("sustainable_eps")
    if not pt.get("confirmed") or eps is None:
        return "none confirmed"
    text = f"{eps:,.0f}" + (" (≥: every rate tried kept up)" if pt.get("lowest_failing_eps") is None else "")
    bound = pt.get("bound") or {}
    if pt.get("kit_bound"):
        text += f" **{bound.get('label')}: the kit's limit, not the engine's**"
    elif bound.get("bound") == "other":
        text += " (other load on the machine: not a figure)"
    return text


def throughput_page(path: Path = THROUGHPUT) -> str | None:
    """The page of the committed throughput figures: each engine's kit ceiling (null and
    pass-through) beside the figures it bounds, each point with what produced it."""
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: cannot read the results file: {e}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "cepkit.throughput-figures":
        raise SystemExit(f"{path}: kind: expected 'cepkit.throughput-figures', got {doc.get('kind')!r}")
    points = doc.get("points") or []
    rel = path.relative_to(ROOT).as_posix()
    lines = ["# Throughput and the kit's ceiling", "",
             f"Drawn at this site's build from `{rel}` (written by `benchmarks/sustainable_compare.py --results`; "
             f"the file's last commit: {_recorded(_results_commit(path))}).", "",
             "Each engine and trigger's **ceiling** is the most the kit can feed and collect through it: "
             "`ceiling-kit-null` reads every event and answers none, `ceiling-kit-pass-through` answers every "
             "event. A figure near its ceiling is the kit's, not the engine's. Every figure carries the "
             "connectors its runs used (source → sink; a sink `driver-collect` means the plan collects every "
             "answer to Spark's driver, where the kit's core runs) and the verdict of its search's first failing step "
             "(what bounded it: [what bounds a run](../concepts/bounds.md)).", ""]
    head = ("workload", "engine", "trigger", "plan family", "connectors", "max sustainable ev/s",
            "lowest failing ev/s", "bound (first failing step)", "steps")
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = {"ceiling-kit-null": 0, "ceiling-kit-pass-through": 1}
    for pt in sorted(points, key=lambda p: (p.get("engine", ""), p.get("trigger", ""),
                                             order.get(p.get("workload"), 2), p.get("workload", ""))):
        c = pt.get("connectors") or {}
        connectors = (_cell(f"{c.get('source')} → {c.get('sink')}" + (f" ({c['why']})" if c.get("why") else ""))
                      if c else NOT_RECORDED)
        failing = pt.get("lowest_failing_eps")
        trigger = "streaming" if pt.get("engine") == "flink" else pt.get("trigger")   # Flink has no trigger
        # A point recorded before plan families ran the plans of its day (Spark's cores on the driver).
        family = pt.get("family") or "not recorded (before plan families)"
        lines.append(f"| {_cell(pt.get('workload'))} | {_cell(pt.get('engine'))} | {_recorded(trigger)} | "
                     f"{_cell(family)} | {connectors} | "
                     f"{_eps_cell(pt)} | {'none' if failing is None else f'{failing:,.0f}'} | "
                     f"{'none: every step kept up' if failing is None else _recorded((pt.get('bound') or {}).get('label'))} | "
                     f"{_recorded(pt.get('steps'))} |")
    lines += ["", "## How each figure was made", ""]
    for pt in points:
        m = pt.get("machine") or {}
        lines += [f"### {pt.get('workload')} on {pt.get('engine')} "
                  f"({'streaming' if pt.get('engine') == 'flink' else pt.get('trigger')})", ""]
        lines += _provenance([("command", f"`{pt.get('command')}`" if pt.get("command") else None),
                              ("commit", pt.get("commit")), ("measured", pt.get("measured")),
                              ("machine", f"{m.get('cores')} cores, {m.get('cpu')}, {m.get('memory_gib')} GiB"
                               if m else None),
                              ("alone on the machine", "yes" if pt.get("alone") else None),
                              ("repetitions", pt.get("repetitions")), ("steps", pt.get("steps")),
                              ("step length", f"{pt.get('step_seconds')} s" if pt.get("step_seconds") else None),
                              ("plan", "; ".join(f"{q}: {p}" for q, p in
                                                 ((pt.get("work") or {}).get("queries") or {}).items()) or None),
                              ("what bounded it", (pt.get("bound") or {}).get("why")),
                              ("run directory", pt.get("run"))])
    return "\n".join(lines) + "\n"


# -- mkdocs ----------------------------------------------------------------------------------

def generated_pages() -> dict[str, str | bytes]:
    """{docs path: content} of every generated page and file."""
    pages: dict[str, str | bytes] = {"reference/cli.md": cli_page(), "reference/config.md": config_page(),
                                     "reference/run-directory.md": run_directory_page()}
    for spec in sorted((ROOT / "specs").glob("*.md")):
        pages[f"specs/{spec.name}"] = spec.read_text(encoding="utf-8")
    example = ROOT / "examples" / "external_engine"
    for f in sorted(example.iterdir()):
        if f.suffix in (".md", ".py"):
            pages[f"examples/external_engine/{f.name}"] = f.read_text(encoding="utf-8")
    for path in results_files():
        pages.update(results_pages(path))
    throughput = throughput_page()
    if throughput is not None:
        pages[THROUGHPUT_PAGE] = throughput
    return pages


def on_files(files, config):
    from mkdocs.structure.files import File

    pages = generated_pages()
    for uri, content in pages.items():
        existing = files.get_file_from_path(uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, uri, content=content))
    _expand_nav(config, pages)
    return files


def _expand_nav(config, pages) -> None:
    """Fill the nav's generated sections: "Specs" with every spec page, "Results" with each results
    directory's pages."""
    specs = [{Path(u).stem: u} for u in pages if u.startswith("specs/")]
    results = []
    for path in results_files():
        base = f"results/{path.parent.name}"
        results += [{f"{path.parent.name}: overview": f"{base}/index.md"}, {"Pairs (Table 7.1)": f"{base}/pairs.md"}]
        results += [{SUITE_TITLES.get(Path(u).stem, Path(u).stem): u} for u in pages
                    if u.startswith(base + "/") and u.endswith(".md") and Path(u).stem not in ("index", "pairs")]
    if THROUGHPUT_PAGE in pages:
        results.append({"Throughput and the kit's ceiling": THROUGHPUT_PAGE})

    def walk(items):
        for item in items or []:
            if isinstance(item, dict):
                for key, value in item.items():
                    if value == "specs/":
                        item[key] = specs
                    elif value == "results/":
                        item[key] = ["results/index.md", *results]
                    elif isinstance(value, list):
                        walk(value)

    walk(config["nav"])
