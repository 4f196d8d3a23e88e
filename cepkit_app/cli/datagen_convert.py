"""`cepkit datagen convert`: turn the user's own CSV of timestamped events into a dataset."""

from __future__ import annotations

import argparse
from pathlib import Path

from cepkit_app.cli import add_config_options, command_config
from kit.config import FORMATS


def register(gens, name: str) -> None:
    p = gens.add_parser(name, help="convert your own CSV of events (micro) or stock ticks into a dataset",
                        description="Read a CSV with a header line, check every row (rows must be in time "
                                    "order, or give --sort) and write the same files as the generators: "
                                    "stream S1 (ID, A1..AN, TS) for --kind micro, ticks files (symbol, price, "
                                    "size, tickTS) for --kind ticks, plus manifest.json. Rules: "
                                    "specs/DATA.md, 'Converting your own CSV'.")
    add_config_options(p)
    p.add_argument("input", metavar="INPUT.csv", help="the CSV file to convert")
    p.add_argument("--kind", choices=("micro", "ticks"), required=True, help="what the rows are")
    p.add_argument("--ts-column", dest="ts_column", metavar="NAME",
                   help="timestamp column (default TS for micro, tickTS for ticks)")
    # Not an argparse exclusive group: ConvertSpec refuses the pair in one line, without a usage dump.
    p.add_argument("--ts-unit", dest="ts_unit", choices=("ms", "s", "us", "iso"),
                   help="epoch milliseconds, seconds or microseconds, or ISO-8601 datetimes (UTC "
                        "unless they carry an offset); default ms")
    p.add_argument("--ts-format", dest="ts_format", metavar="PATTERN",
                   help="times as text in this strptime pattern, e.g. '%%b %%d %%Y' for 'Jan 1 2000' or "
                        "'%%Y-%%m-%%d %%H:%%M:%%S'; UTC unless the pattern has %%z")
    p.add_argument("--id-column", dest="id_column", default="ID", metavar="NAME", help="micro: the ID column")
    p.add_argument("--attributes", metavar="A,B,..",
                   help="micro: attribute columns, renamed A1..AN in this order (default: every column "
                        "named A<number>, in numeric order)")
    p.add_argument("--symbol-column", dest="symbol_column", default="symbol", metavar="NAME")
    p.add_argument("--price-column", dest="price_column", default="price", metavar="NAME",
                   help="ticks: the price column, in --price-unit")
    p.add_argument("--price-unit", dest="price_unit", choices=("cents", "dollars"), default="cents",
                   help="ticks: integer cents (default), or dollars with at most 2 decimals (39.81), "
                        "converted to cents exactly")
    p.add_argument("--size-column", dest="size_column", default="size", metavar="NAME")
    p.add_argument("--default-size", dest="default_size", type=int, metavar="N",
                   help="ticks: when the CSV has no size column, every tick gets size N")
    p.add_argument("--correlations", metavar="FILE",
                   help="ticks: CSV of correlated pairs (symbol1,symbol2); writes pairs-aux.json")
    p.add_argument("--sf", type=int, default=1, help="ticks: scale factor recorded in pairs-aux.json")
    p.add_argument("--format", choices=FORMATS, default="parquet", help="file format")
    p.add_argument("--files", type=int, default=1,
                   help="split the rows on time into N files (each gets at least one row)")
    p.add_argument("--sort", action="store_true",
                   help="sort the rows stably on time instead of requiring time order (holds the "
                        "parsed columns in memory, about 55 bytes a tick)")
    p.add_argument("--out", metavar="DIR", help="output directory (must not exist); default: a new "
                                                "directory under paths.datagen_dir")
    p.set_defaults(handler=run)


def spec_from_args(args: argparse.Namespace):
    from datagen.convert import ConvertSpec

    attrs = None
    if args.attributes is not None:
        attrs = tuple(a.strip() for a in args.attributes.split(","))
    return ConvertSpec(input=Path(args.input), kind=args.kind, ts_column=args.ts_column, ts_unit=args.ts_unit,
                       ts_format=args.ts_format, id_column=args.id_column, attribute_columns=attrs,
                       symbol_column=args.symbol_column, price_column=args.price_column,
                       price_unit=args.price_unit, size_column=args.size_column, default_size=args.default_size,
                       correlations=None if args.correlations is None else Path(args.correlations),
                       scale_factor=args.sf, format=args.format, file_count=args.files, sort=args.sort)


def run(args: argparse.Namespace) -> int:
    from cepkit_app.cli.progress import console, progress_bar
    from datagen.convert import convert_csv
    from kit.paths import output_path, path_option

    path_option(args.out)       # before any work: an empty --out is an error, not the default
    spec = spec_from_args(args)
    config = command_config(args)
    stem = f"convert-{spec.kind}-{spec.input.stem}"
    out = output_path(args.out, Path(config.paths.datagen_dir), stem)
    with progress_bar(f"convert {spec.input.name}") as update:
        ds = convert_csv(spec, out, progress=update)
    m = ds.manifest
    con = console()
    what = "events" if spec.kind == "micro" else "ticks"
    con.print(f"[bold green]wrote[/] {ds.total_rows:,} {what} in {len(m['files'])} {spec.format} file(s) "
              f"to {ds.directory}")
    con.print(f"  {ds.total_rows / max(ds.elapsed_s, 1e-9):,.0f} rows/s ({ds.elapsed_s:.1f} s); "
              f"{(m['last_epoch_ms'] - m['start_epoch_ms']) / 1000:,.1f} s of event time; columns "
              + ", ".join(_column_note(c) for c in m["columns"]))
    if spec.kind == "ticks" and m["aux_file"]:
        con.print(f"  auxiliary file for the query generator: {ds.directory / m['aux_file']}")
    print(ds.directory)
    return 0


def _column_note(column: dict) -> str:
    if column["source"] is None:
        return f"{column['name']}={column['value']}"
    return column["name"] if column["name"] == column["source"] else f"{column['name']}<-{column['source']}"
