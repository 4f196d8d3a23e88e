"""cepkit's runtime for Apache Spark (PySpark): the only cepkit package a generated program imports.

- app.py: `run_app(build, ...)`, the program's main: session, source, one streaming query whose
  foreachBatch hands each micro-batch to the harness sink, watched to the end (watch.py);
- source.py: the `cepkit_driver` streaming source, pulling events from the harness's driver by
  offset (optionally turning each partition's events into other rows where they are read);
- pairs_partials.py / pairs_bucket.py / pairs_strategies.py: the Pairs logic (ticks to partial
  aggregates, a bucket of strategies over a batch of them, the strategies of one period length);
  pairs_plan.py places it in Spark;
- micro_plan.py / micro_cores/: the microbenchmark query kinds.

It imports pyspark, pandas, pyarrow, numpy (and psycopg for J3) and of cepkit only kit's records,
output-log names, errors and wire (tests/test_layering.py checks it), so a program runs, and ships to Spark's
executors, without the harness or a checkout of this repository.
"""
