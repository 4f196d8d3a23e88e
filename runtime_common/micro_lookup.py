"""J3's stream-to-database join for every engine: the matches of a batch of events, looked up in
PostgreSQL with one query per batch (`= ANY(keys)`), joined in pandas; the table never enters the
engine's memory (specs/SEMANTICS.md section 7, `storage = database`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from runtime_common.micro_rows import NUMPY_OPS


def table_fields(q) -> list[str]:
    """The table columns a join query reads: those it selects or compares, and the key."""
    return sorted({f.partition(".")[2] for f in q["select"] + [w[0] for w in q["where"]]
                   if f.partition(".")[0] == q["table"]} | {q["table_key"]})


def lookup_sql(q) -> str:
    return (f"SELECT {', '.join(c.lower() for c in table_fields(q))} FROM t "
            f"WHERE {q['table_key'].lower()} = ANY(%s)")


def lookup_rows(q, events: pd.DataFrame, conn) -> pd.DataFrame:
    """The output rows of J3 query q for `events` (its input stream's), through the open psycopg
    connection `conn`: `stream`, the query's fields, `inputTS` and `ingestTS` of each event."""
    t_fields = table_fields(q)
    keys = [int(k) for k in pd.unique(events[q["stream_key"]])]
    found = conn.execute(lookup_sql(q), (keys,)).fetchall() if keys else []
    table = pd.DataFrame(found, columns=[f"T_{c}" for c in t_fields])
    table[f"T_{q['table_key']}"] = table[f"T_{q['table_key']}"].astype(events[q["stream_key"]].dtype)
    joined = events.merge(table, left_on=q["stream_key"], right_on=f"T_{q['table_key']}")

    def column(name: str):
        head, _, field = name.partition(".")
        return joined[f"T_{field}"] if head == q["table"] else joined[field]

    keep = np.ones(len(joined), dtype=bool)
    for field, op, value in q["where"]:
        keep &= NUMPY_OPS[op](column(field).to_numpy(), value)
    joined = joined[keep]
    out = pd.DataFrame({out: column(f).to_numpy() for f, out in zip(q["select"], q["fields"])})
    out["inputTS"] = joined["TS"].to_numpy()
    out["ingestTS"] = joined["ingestTS"].to_numpy()
    out.insert(0, "stream", q["id"])
    return out
