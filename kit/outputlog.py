"""The output log's identity (specs/OUTPUT_LOG.md): its file name, kind, schema version, formats,
pacings and the columns the harness stamps on every output row.

The harness sink writes the log and the validator reads it (`validator.outputlog`); both take these
names from here, so the writer and the reader cannot drift apart. Only constants: the sink's
writer needs pyarrow, the validator's reader pandas, and kit stays free of both at import.
"""

from __future__ import annotations

from kit.records import FILE_FORMATS

LOG_NAME = "output-log.json"
KIND = "cepkit.output-log"
SCHEMA_VERSION = 1
FORMATS = FILE_FORMATS
# How the driver released the events (harness.config.DriverConfig.pacing), recorded in the log:
# at their recorded times ("tickts"), at a constant rate, or as fast as the engine pulls.
PACINGS = ("tickts", "rate", "pull")
# Wall-clock epoch ms when the sink received a row; when the engine's source pulled the event
# (optional); the engine's micro-batch id (optional).
ARRIVAL_TS, INGEST_TS, BATCH_ID = "arrivalTS", "ingestTS", "batchId"
