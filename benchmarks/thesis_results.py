"""The thesis's results redone: one page from Pairs and microbenchmark run directories.

Gathers finished runs and writes the results page (validator/thesis_page.py) into a new directory:
Table 7.1's layout (engine x SF, MarketOrder p99 with its order count and interval, pscore) with
the thesis's engines X and Y beside our standard two-hour runs; Q7's sustainable throughput
against interval, MAX_ID and selectivity (Figure 4.15); Q2's against the count window's size
(Figure 4.5). The page the repository commits is built by this script from the runs its notes name.

    .venv/bin/python benchmarks/thesis_results.py --out results/thesis \\
        --pairs runs/pairs-sf1-standard-keyed-... --pairs runs/repeat-pairs-sf256-... \\
        --micro runs/micro-patterns-sustainable-... --micro runs/micro-count-windows-sustainable-...

--pairs takes a Pairs run directory or a `--repeat` directory (its runs become one row: median
and range); only the standard two-hour profile is Table 7.1's run, so a quick run is refused
unless --allow-quick (its row then says "quick"). --micro takes `cepkit micro --sustainable` run
directories of the patterns and count-windows suites (a quick suite's points are drawn hollow).
--keep carries an earlier page over (its results.json holds every row, detail and point whole), so
the committed page grows run by run: `--keep results/thesis --out /tmp/page --micro runs/...`, then
the new page replaces results/thesis (`--fresh-notes` drops the kept page's notes, so that
outdated ones can be restated with --note). It reads only what the runs wrote and starts no engine, so
it may run beside other work.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from kit.errors import CepkitError
from validator.thesis_page import ThesisInputs, read_kept_page, read_micro_points, read_pairs_rows, write_thesis_page


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, metavar="DIR", help="the page's new directory (must not exist)")
    ap.add_argument("--pairs", action="append", default=[], metavar="RUN",
                    help="a Pairs run directory, or a --repeat directory (repeatable)")
    ap.add_argument("--micro", action="append", default=[], metavar="RUN",
                    help="a `cepkit micro --sustainable` run directory (repeatable)")
    ap.add_argument("--keep", metavar="PAGE",
                    help="an earlier page's directory (its results.json): its Table 7.1 rows, run details, micro "
                         "points and notes are carried over (a run also given with --pairs/--micro is read anew)")
    ap.add_argument("--allow-quick", action="store_true",
                    help="list quick-profile Pairs runs too, marked as such (not the thesis's two-hour run)")
    ap.add_argument("--note", action="append", default=[], help="a line for the page's notes (repeatable)")
    ap.add_argument("--fresh-notes", action="store_true",
                    help="do not carry the kept page's notes over (its rows, details and points still are): "
                         "the page's notes are the --note lines alone, so an outdated note can go")
    args = ap.parse_args(argv)
    try:
        inputs = ThesisInputs(read_pairs_rows(args.pairs, args.allow_quick), read_micro_points(args.micro),
                              tuple(args.note))
        if args.keep:
            kept = read_kept_page(args.keep)
            inputs = inputs.keeping(dataclasses.replace(kept, notes=()) if args.fresh_notes else kept)
        page = write_thesis_page(inputs, args.out)
    except CepkitError as e:
        print(f"thesis_results: error: {e}", file=sys.stderr)
        return 2
    print((page.parent / "results.md").read_text(encoding="utf-8"))
    print(f"page: {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
