"""Flink tables over the feed: the events as a table with an event-time attribute, and the types
of a result table's columns as the emitter needs them.

The feed's events enter as a DataStream of Rows (flink_runtime/jvm.py's JVM source, or the Python
puller of flink_runtime/feed.py); `events_table` turns them into a table with `rowtime` (the
event's `TS` as TIMESTAMP_LTZ(3)) and a watermark of `rowtime - 1 ms` (the JVM source emits it per
split itself; behind the Python puller a watermark assigner does): the driver releases events in `TS` order (specs/DRIVER.md), so nothing is late,
and a window [start, end) fires when an event with `TS >= end` has been seen, the way the
semantics close a window (specs/SEMANTICS.md). Watermarks are emitted every
`pipeline.auto-watermark-interval` (flink_runtime/app.py).
"""

from __future__ import annotations

ROWTIME = "rowtime"
_LOGICAL = {"INT": "int", "INTEGER": "int", "BIGINT": "long", "DOUBLE": "double", "STRING": "string",
            "VARCHAR": "string", "CHAR": "string", "BOOLEAN": "boolean", "TIMESTAMP": "timestamp_ms",
            "TIMESTAMP_LTZ": "timestamp_ms"}


def logical_columns(table) -> dict[str, str]:
    """{column: int | long | double | string | boolean | timestamp_ms} of a Table's resolved schema
    (a timestamp goes to the sink as epoch milliseconds, e.g. a window's end)."""
    schema = table.get_schema()
    out = {}
    for name, dtype in zip(schema.get_field_names(), schema.get_field_data_types()):
        text = str(dtype).upper().replace(" NOT NULL", "")
        base = text.split("(")[0].strip()
        if base not in _LOGICAL:
            raise ValueError(f"output column {name}: type {dtype} cannot go to the sink; cast it")
        out[name] = _LOGICAL[base]
    return out


def events_table(job, stream, fields, source_watermark: bool = False):
    """The feed's event stream as a table with `rowtime` and its watermark (see the module doc).
    `fields` are the feed's (name, Flink type) pairs (flink_runtime/feed.py `event_fields`). With
    `source_watermark` the stream's records carry their TS as their timestamps and its source emits
    the watermark (the JVM feed, flink_runtime/jvm.py: each split its own, `rowtime - 1 ms` too):
    `rowtime` is the record's timestamp and the table keeps the source's watermark."""
    from pyflink.table import DataTypes, Schema

    sql_types = {"INT": DataTypes.INT(), "LONG": DataTypes.BIGINT(), "DOUBLE": DataTypes.DOUBLE(),
                 "STRING": DataTypes.STRING(), "BOOLEAN": DataTypes.BOOLEAN()}
    builder = Schema.new_builder()
    for name, ftype in fields:
        builder = builder.column(name, sql_types[_type_name(ftype)])
    if source_watermark:
        schema = (builder.column_by_metadata(ROWTIME, "TIMESTAMP_LTZ(3)")
                  .watermark(ROWTIME, "SOURCE_WATERMARK()").build())
    else:
        schema = (builder.column_by_expression(ROWTIME, "TO_TIMESTAMP_LTZ(TS, 3)")
                  .watermark(ROWTIME, f"{ROWTIME} - INTERVAL '0.001' SECOND").build())
    return job.tables.from_data_stream(stream, schema)


def _type_name(ftype) -> str:
    text = repr(ftype).upper()
    for name in ("INT", "LONG", "DOUBLE", "STRING", "BOOLEAN"):
        if name in text:
            return name
    raise ValueError(f"no SQL type for {ftype!r}")
