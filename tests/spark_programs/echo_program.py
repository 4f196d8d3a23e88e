"""A hand-written engine program for the harness tests: every tick comes back out, unchanged.

Stateless: one output stream `Echo` with the tick's fields, its TS as inputTS, and the source's
offset and ingestTS, so a test can check that each input event appears exactly once and that
the time stamps line up (TS <= ingestTS <= arrivalTS).
"""

from pyspark.sql import functions as F

ECHO_COLUMNS = ["symbol", "price", "tickTS", "inputTS", "offset", "ingestTS"]


def build(spark, events):
    out = events.select(F.lit("Echo").alias("stream"), "symbol", "price", "tickTS",
                        F.col("TS").alias("inputTS"), "offset", "ingestTS")
    return out, {"Echo": ECHO_COLUMNS}


if __name__ == "__main__":
    from spark_runtime.app import run_app

    raise SystemExit(run_app(build, app_name="cepkit echo test"))
