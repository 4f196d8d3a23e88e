"""`cepkit validate pairs|micro`: check an engine's outputs against the reference answers.

The engine can be anything that left an output log (specs/OUTPUT_LOG.md): a run of `cepkit pairs`
or `cepkit micro`, or an engine cepkit cannot run, whose output log the user wrote
(OUTPUT_LOG.md, "Writing an output log from your own engine"; examples/external_engine/). Exit
code 0 when every stream passes (or when there is no log to check), 1 when one fails, 2 for a bad
input (one line naming the file and the key, column or line).
"""

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
    micro = kinds.add_parser("micro", help="validate one microbenchmark workload's run (or just compute its "
                                           "expected answers)",
                             description="Check an engine's output log for one microbenchmark workload against "
                                         "the reference answers over the workload's dataset: the same check "
                                         "`cepkit micro` makes after each run.")
    add_config_options(micro)
    micro.add_argument("--spec", required=True, metavar="FILE",
                       help="a workload XML, or a suite XML (or a shipped suite's name, e.g. filtering-quick)")
    micro.add_argument("--workload", metavar="ID", help="which workload of a suite (needed when it has several)")
    micro.add_argument("--data", required=True, metavar="DIR", help="the dataset the engine read (datagen micro)")
    micro.add_argument("--log", metavar="DIR", help="the engine's output log (run dir, outputs/ or output-log.json);"
                                                    " without it only the expected answers are written")
    micro.add_argument("--out", metavar="DIR", help="report directory (must not exist); default: a new one "
                                                    "under paths.validator_dir")
    micro.set_defaults(handler=run_micro)


def run_pairs(args: argparse.Namespace) -> int:
    import dataclasses

    from cepkit_app.cli.progress import console, progress_bar
    from kit.atomic import StagedDir
    from kit.errors import CepkitError
    from kit.manifest import read_manifest
    from kit.paths import output_path, path_option
    from validator.pairs_run import PairsValidation, validate_pairs

    config = command_config(args)
    path_option(args.log, "--log")      # empty is an error, not "the run directory's log"
    out = output_path(args.out, Path(config.paths.validator_dir), "pairs-validation")
    if out.exists():
        raise CepkitError(f"{out}: report directory already exists; refusing to overwrite it")
    request = PairsValidation(Path(args.data), Path(args.strategies), out,
                              Path(args.log) if args.log else None, args.strategy,
                              measure_ms=config.run.measure_ms, verify=not args.no_verify)
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


def run_micro(args: argparse.Namespace) -> int:
    from cepkit_app.cli.progress import console
    from cepkit_app.cli.querygen_cmd import shipped_suite_file
    from kit.atomic import StagedDir, check_parent
    from kit.errors import CepkitError
    from kit.manifest import load_manifest
    from kit.paths import output_path, path_option
    from validator.latency import latency_stats
    from validator.micro_reference import expected_for_dataset
    from validator.micro_run import validate_micro_run
    from validator.report import NOT_VALIDATED, format_text_report

    config = command_config(args)
    path_option(args.out)       # before any work: empty is an error, not the default folder
    path_option(args.log, "--log")
    spec_path = shipped_suite_file(args.spec)
    workload = _workload(spec_path, args.workload)
    data = Path(args.data)
    manifest = load_manifest(data)
    if manifest.kind != "micro":
        raise manifest.error("streams", "not a microbenchmark dataset (no streams); `cepkit validate pairs` "
                                        "checks Pairs runs")
    out = output_path(args.out, Path(config.paths.validator_dir), f"micro-validation-{workload.name}")
    if out.exists():
        raise CepkitError(f"{out}: report directory already exists; refusing to overwrite it")
    check_parent(out)       # one line, before any work, if --out cannot be created there
    _check_columns(manifest, workload)
    con = console()
    # Not an error: the reference answers are computed from the very dataset given, so the verdict
    # holds for it; but the run is then not the workload's load point. Said once the inputs are
    # read, so that a refused input stays a single error line.
    notes = _dataset_differences(manifest, workload)

    if args.log is None:
        expected = expected_for_dataset(workload.query_set, data)
        with StagedDir(out) as tmp:
            (tmp / "expected").mkdir()
            for qid, df in expected.items():
                df.to_parquet(tmp / "expected" / f"{qid}.parquet", index=False)
            _write_json(tmp / "validation.json", {"workload": workload.name, "verdict": NOT_VALIDATED,
                                                  "expected_rows": {q: len(df) for q, df in expected.items()},
                                                  "notes": notes})
        for line in notes:
            con.print(f"note: {line}", markup=False)
        con.print(f"verdict: [bold]{NOT_VALIDATED}[/] (no engine log: expected answers only)")
        for qid, df in expected.items():
            con.print(f"  {qid}: {len(df):,} expected rows -> {out / 'expected' / f'{qid}.parquet'}", markup=False)
        return 0

    _check_log_clocks(Path(args.log), manifest)
    # Every input is read and checked before anything is written: a refused log leaves no report.
    outcome, latencies = validate_micro_run(workload, data, Path(args.log), manifest.rate_profile())
    stats = latency_stats(latencies)
    text = format_text_report(tuple(q.comparison for q in outcome.queries))
    with StagedDir(out) as tmp:
        _write_json(tmp / "validation.json", {**outcome.to_dict(), "spec": str(spec_path), "dataset": str(data),
                                              "log": str(args.log), "latency": stats.to_dict(), "notes": notes})
        (tmp / "report.txt").write_text(text, encoding="utf-8")
    print(text, end="")
    for line in notes:
        con.print(f"note: {line}", markup=False)
    con.print(f"verdict: [bold]{outcome.verdict}[/]")
    if stats.count:
        con.print(f"event-time latency over {stats.count:,} rows: p50 {stats.p50_ms} ms, p99 {stats.p99_ms} ms"
                  f"{f', {stats.negatives:,} negative (check the stamps)' if stats.negatives else ''}", markup=False)
    if outcome.adaptivity_note:
        con.print(f"no adaptivity metrics: {outcome.adaptivity_note}", markup=False)
    con.print(f"report: {out}")
    return 0 if outcome.passed else 1


def _workload(spec_path: Path, name: str | None):
    """The workload to validate: the file's only one, or `name` of a suite."""
    from kit.errors import CepkitError
    from kit.workload import Suite, Workload, read_spec

    spec = read_spec(spec_path)
    if isinstance(spec, Workload):
        if name is not None and name != spec.name:
            raise CepkitError(f"{spec_path}: the workload is {spec.name!r}, not {name!r}")
        return spec
    if not isinstance(spec, Suite):
        raise CepkitError(f"{spec_path}: expected a <Workload> or <Suite> file, found a {type(spec).__name__} spec")
    names = [w.name for w in spec.workloads]
    if name is None:
        if len(names) > 1:
            raise CepkitError(f"{spec_path}: a suite of {len(names)} workloads; name one with --workload "
                              f"({', '.join(names)})")
        name = names[0]
    if name not in names:
        raise CepkitError(f"{spec_path}: no workload {name!r} (has {', '.join(names)})")
    return spec.workload(name)


def _check_columns(manifest, workload) -> None:
    """A generated dataset must have the streams and attributes the workload's queries read (fewer
    would be columns the reference cannot find)."""
    cfg = manifest.get("config")
    if manifest.generator != "micro" or not isinstance(cfg, dict):
        return
    want = workload.micro_settings()
    for key in ("streams", "attributes"):
        have, need = cfg.get(key), want.get(f"micro.{key}")
        if isinstance(have, int) and isinstance(need, int) and have < need:
            raise manifest.error(f"config.{key}", f"{have}, but workload {workload.name} reads {need}")


def _dataset_differences(manifest, workload) -> list[str]:
    """How a generated dataset's settings differ from the workload's Dataset and Load (empty for a
    converted dataset, which records no such settings)."""
    cfg = manifest.get("config")
    if manifest.generator != "micro" or not isinstance(cfg, dict):
        return []
    out = []
    for key, want in workload.micro_settings().items():
        node = cfg
        for part in key.split(".")[1:]:          # "micro.rate.duration_s" -> config["rate"]["duration_s"]
            node = node.get(part) if isinstance(node, dict) else None
        if node != want:
            out.append(f"{manifest.path}: config {key} = {node!r}, but workload {workload.name} has {want!r}")
    return out


def _check_log_clocks(log: Path, manifest) -> None:
    """The log's `sim_start_ms` must be the dataset's `start_epoch_ms`: every time-valued output is
    shifted back by `run_start_wall_ms - sim_start_ms` before comparing, so another value would turn
    every row into a missing and an undue one instead of saying what is wrong."""
    from kit.errors import at
    from kit.jsonfile import read_json_object
    from validator.outputlog import log_path

    lpath = log_path(log)
    if not lpath.is_file():
        return                   # the reader says what is missing
    meta = read_json_object(lpath, what="an output log")
    sim = meta.get("sim_start_ms")
    if isinstance(sim, int) and not isinstance(sim, bool) and sim != manifest.start_epoch_ms:
        raise at(lpath, "sim_start_ms", f"{sim} is not the dataset's start_epoch_ms {manifest.start_epoch_ms} "
                                        f"({manifest.path})")


def _write_json(path: Path, doc: dict) -> None:
    from kit.jsonfile import dumps_json

    path.write_text(dumps_json(doc), encoding="utf-8")
