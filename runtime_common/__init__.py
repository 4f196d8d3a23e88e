"""What every engine's runtime shares: the engine-neutral logic generated programs run.

- events.py: the program's stdout events (`started`, `progress`, ..., specs/ENGINE_RUN.md);
- outputs.py: a batch of output rows cut into its streams, as the harness sink takes them;
- pairs_partials.py / pairs_bucket.py / pairs_strategies.py: the Pairs logic (ticks to partial
  aggregates, a bucket of strategies over a batch of them, the strategies of one period length);
- micro_cores/, micro_rows.py, micro_lookup.py: the microbenchmark kinds no engine operator
  expresses exactly (count windows, time windows, window joins, patterns) and J3's lookups.

Plain numpy, pandas, pyarrow (and psycopg for J3): every engine's environment has them, and
spark_runtime and flink_runtime place this logic in their engine (tests/test_layering.py).
"""
