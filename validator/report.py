"""The validation verdict and the plain-text report, in the style of thesis Figure B.3.

`format_text_report(comparisons)` gives the console report: per stream the expected, engine,
correct, missing, undue and wrong answer counts and the verdict, then the first incorrect answers
side by side (Figure B.5), and, when given, each stream's p50/p99 latency and the pscore;
`pscore_lines` gives the closing lines of a Pairs validation. Wherever a percentile or the pscore
is shown it comes with its sample count and 95 % interval, worded once by validator.order_stats
(a p99 of fewer than 100 values says it is their maximum). The HTML page, which shows the same
verdict and cells, is validator.report_page.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from validator.compare import StreamComparison, all_passed
from validator.latency import Pscore, StreamLatency
from validator.order_stats import percentile_text

PASSED, FAILED, NOT_VALIDATED = "PASSED", "FAILED", "NOT VALIDATED"
TEXT_SHOWN = 10


def format_text_report(comparisons: Sequence[StreamComparison], shown: int = TEXT_SHOWN,
                       latency: Sequence[StreamLatency] = (), pscore: Pscore | None = None) -> str:
    """The console report of thesis Figure B.3, followed by the first incorrect answers (B.5),
    then each stream's event-time p50 and p99 and the pscore, when given."""
    verdict = overall_verdict(comparisons)
    lines = [f"Validation result: {verdict}" + ("!" if verdict == FAILED else "")]
    for c in comparisons:
        lines += [f"- {c.stream}:",
                  f"  # expected answers: {c.expected}",
                  f"  # engine answers: {c.engine}",
                  f"  # correct answers: {c.correct}",
                  f"  # missing answers: {c.missing}",
                  f"  # undue answers: {c.undue}" + (f" (of which {c.duplicates} duplicates)" if c.duplicates else ""),
                  f"  # wrong answers: {c.wrong}",
                  f"  verdict: {c.verdict}"]
    for c in comparisons:
        if c.passed or shown == 0:
            continue
        rows = c.incorrect.head(shown)
        lines += ["", f"Incorrect {c.stream} answers (first {len(rows)} of {c.incorrect_count}; "
                      f"keys {', '.join(c.keys)}):"]
        lines += ["  " + line for line in _text_table(rows).splitlines()]
    if latency:
        lines += ["", "Event-time latency of the outputs triggered in the measurement interval:"]
        for s in latency:
            lines += [f"- {s.stream}: {percentile_text(s.event.percentile(n), 'outputs')}" for n in ("p50", "p99")]
    if pscore is not None:
        lines += ["", pscore.text()]
    return "\n".join(lines) + "\n"


def pscore_lines(pscore: Pscore | None, note: str | None = None) -> tuple[str, ...]:
    """The closing lines of a Pairs validation: the MarketOrder p99 over the measurement interval
    and the pscore, each with its order count and 95 % interval; or why there is no pscore."""
    if pscore is None:
        return ("pscore: not computed" + (f": {note}" if note else ""),)
    return (f"MarketOrder event-time latency in the measurement interval: {percentile_text(pscore.p99, 'orders')}",
            pscore.text())


def overall_verdict(comparisons: Sequence[StreamComparison]) -> str:
    """PASSED or FAILED over all streams; NOT VALIDATED when nothing was compared."""
    if not comparisons:
        return NOT_VALIDATED
    return PASSED if all_passed(comparisons) else FAILED


def _text_table(df: pd.DataFrame) -> str:
    cells = [[cell_text(v) for v in row] for row in df.itertuples(index=False)]
    header = [str(c) for c in df.columns]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    fmt = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in cells])


def cell_text(v) -> str:
    """One value as a table cell (text report and HTML page): None as `-`, NaN spelled out."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-" if v is None else "NaN"
    if isinstance(v, (float, np.floating)):
        # Enough digits to see a difference at the comparison tolerance.
        return f"{float(v):.12g}"
    return str(v)
