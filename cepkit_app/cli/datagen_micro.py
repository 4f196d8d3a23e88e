"""`cepkit datagen micro`: generate microbenchmark streams (and the join table) with a progress bar."""

from __future__ import annotations

import argparse

from cepkit_app.cli import command_config
from cepkit_app.cli.datagen_pairs import add_generator_options, generate, generator_flags

# (argparse dest, config key) of the micro-only options.
MICRO_FLAGS = (("streams", "micro.streams"), ("max_id", "micro.max_id"), ("zipf_s", "micro.zipf_s"),
               ("attributes", "micro.attributes"), ("table_rows", "micro.table_rows"), ("files", "micro.file_count"))


def register(gens, name: str) -> None:
    p = gens.add_parser(name, help="generate microbenchmark streams S1..Sn, an optional join table T "
                                   "and a manifest",
                        description="Generate the microbenchmark dataset of thesis Table 4.1 (ID, A1..AN in "
                                    "U(1,100), TS) for one or more streams, and optionally the static table "
                                    "T of the stream-to-table join (Q6), plus manifest.json.")
    add_generator_options(p)
    p.add_argument("--streams", type=int, help="number of streams S1..Sn (2 for the window join Q5)")
    p.add_argument("--max-id", dest="max_id", type=int, help="IDs are drawn from 1..MAX_ID")
    p.add_argument("--zipf-s", dest="zipf_s", type=float,
                   help="Zipf exponent of the ID law (0: equiprobable; > 0: ID 1 most frequent)")
    p.add_argument("--attributes", type=int, help="number of attributes A1..AN per event")
    p.add_argument("--table-rows", dest="table_rows", type=int,
                   help="rows of the join table T (IDs 1..N; 0: no table)")
    p.add_argument("--files", type=int, help="files per stream (same as --set micro.file_count=N)")
    p.add_argument("--out", metavar="DIR", help="output directory (must not exist); default: a new "
                                                "directory under paths.datagen_dir")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cepkit_app.cli.progress import console
    from datagen.micro import generate_micro

    config = command_config(args, (*generator_flags("micro"), *MICRO_FLAGS))
    cfg = config.micro
    r = cfg.rate
    stem = (f"micro-{r.profile}{'-quick' if r.quick else ''}-s{cfg.streams}-id{cfg.max_id}"
            f"{f'-zipf{cfg.zipf_s:g}' if cfg.zipf_s > 0 else ''}-seed{cfg.seed}")
    ds = generate(args, config, generate_micro, cfg, stem, f"micro {cfg.streams} stream(s)")
    m = ds.manifest
    con = console()
    con.print(f"[bold green]wrote[/] {ds.total_rows:,} events in {cfg.streams} stream(s) x {cfg.file_count} "
              f"{cfg.format} file(s) to {ds.directory}")
    con.print(f"  {ds.total_rows / max(ds.elapsed_s, 1e-9):,.0f} events/s ({ds.elapsed_s:.1f} s); "
              f"{cfg.attributes} attributes, IDs {m['ids']['law']} in 1..{cfg.max_id}, "
              f"{len(m['profile']['phases'])} phase(s), {m['profile']['duration_ms'] / 1000:.0f} s simulated")
    if m["table"] is not None:
        t = m["table"]
        con.print(f"  join table {t['path']}: {t['rows']:,} rows, {len(t['columns']) - 1} attributes")
    print(ds.directory)
    return 0
