"""cepkit's runtime for Apache Spark (PySpark): with runtime_common, what a generated program imports.

- app.py: `run_app(build, ...)`, the program's main: session, source, one streaming query whose
  foreachBatch hands each micro-batch to the harness sink, watched to the end (watch.py);
- source.py: the `cepkit_driver` streaming source, pulling events from the harness's driver by
  offset (optionally turning each partition's events into other rows where they are read);
- pairs_plan.py: the Pairs plans: the JVM plan (cepkit.spark.PairsRealTime over the Java Pairs
  logic, the default) and the Python plan (runtime_common's pairs_partials, pairs_bucket,
  pairs_strategies) placed in Spark;
- micro_plan.py / driver_cores.py: the microbenchmark query kinds (runtime_common's cores in
  Spark's stateful operator, or on the driver).

It imports pyspark, pandas, pyarrow, numpy (and psycopg for J3) and of cepkit only runtime_common
and kit's records, output-log names, errors and wire (tests/test_layering.py checks it), so a
program runs, and ships to Spark's executors, without the harness or a checkout of this repository.
"""
