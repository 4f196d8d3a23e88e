"""cepkit's runtime for Apache Flink (PyFlink): the cepkit package a generated Flink program imports.

- app.py: `run_app(build, ...)`, the program's main: Flink's local mini-cluster with event time
  and checkpoints, the job `build` describes, submitted and watched to the end of the run;
- jvm.py: the SQL queries' feed and sink in the JVM (the Java source and sink of java/cepkit/flink,
  compiled into cepkit's Flink runtime jar by harness/flink_jar.py);
- feed.py: the harness's feed as a stream pulled by Python (a keyed puller driven by Flink's
  datagen source), for the plans that hand whole ranges to Python;
- emitter.py: output rows to the harness sink from the job's last Python operator;
- tables.py: the feed's events as a table with an event-time attribute and watermarks;
- pairs.py: the Pairs plans: the JVM plan (java/cepkit/flink/PairsFlink.java over the shared Java
  logic of runtime_common/java, in Flink's operators) and the Python plan (runtime_common's Python
  logic in keyed functions);
- micro.py: the microbenchmark query kinds in Flink SQL, the kit's Java logic in keyed operators
  (java/cepkit/flink/MicroFlink.java) or its Python cores in a keyed function, as each query's plan
  says; jdbc.py: J3's JDBC connection for its lookup in the JVM (java/cepkit/flink/MicroLookup.java).

It imports pyflink, pandas, pyarrow, numpy (and psycopg for J3), of cepkit only runtime_common
and kit's records, output-log names, errors and wire (tests/test_layering.py checks it). It runs
in the Flink environment (`.venv-flink`, scripts/setup.sh --engine flink), never in cepkit's own.
"""
