package cepkit.spark;

import cepkit.logic.MicroQuery;
import cepkit.logic.Out;
import cepkit.logic.ChunkCandidates;
import cepkit.logic.StreamLogic;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import cepkit.logic.Event;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.StructType;

/**
 * {@link LogicPlan} without Spark, for the tests (tests/spark_runtime/test_logic_plan.py): the
 * events routed by the plan's own {@link LogicPlan.Routes#route} and handled by its own
 * {@link LogicPlan.Group}, with each group's state in memory between calls as Spark's state store
 * keeps it.
 *
 * <ul>
 *   <li>{@code micro}: the events cut into micro-batches at random (empty ones included), each
 *   read by 1 to 4 source tasks (contiguous offset ranges) that bundle them per group as the
 *   plan's {@link LogicPlan.Bundler} does; a group's bundles of a batch are shuffled (a shuffle
 *   keeps no order), merged as the processor merges them, and handled in one call; every batch is
 *   a new task (whole-stream logics read back from their bytes);</li>
 *   <li>{@code realtime}: the rows in feed order, each group's rows handed over in runs of random
 *   length (real-time mode hands a key a few rows at a time), the task ended at random.</li>
 * </ul>
 *
 * <pre>java -cp JAR:PYSPARK_JARS/* cepkit.spark.LogicPlanTrace QUERIES.json EVENTS.csv MODE SEED OUT.csv</pre>
 *
 * EVENTS.csv: a header with ID, A1..An, TS, offset, ingestTS and stream (the stream's name), one event
 * per line in feed order. OUT.csv: per output row, the output columns of {@code stream string,
 * <every query's fields>, ingestTS long} in the order of the queries' fields: the query id, then its
 * fields and ingestTS, doubles as {@code x} and their bits in hex (exact), ints and longs in decimal.
 */
public final class LogicPlanTrace {
  private LogicPlanTrace() {
  }

  public static void main(String[] args) throws IOException {
    String queries = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
    MicroQuery[] qs = LogicPlan.parse(queries);
    int attributes = 0;
    for (MicroQuery q : qs) {
      attributes = Math.max(attributes, q.attributes());
    }
    List<Row> events = readEvents(args[1], attributes);
    boolean micro = args[2].equals("micro");
    Random rng = new Random(Long.parseLong(args[3]));
    // One output column per distinct field name, as the program's OUTPUT_FIELDS: every query's rows
    // are placed by name and read back in the query's own field order.
    StringBuilder ddl = new StringBuilder("stream string");
    List<String> seen = new ArrayList<>();
    for (MicroQuery q : qs) {
      String[] f = q.fields();
      String[] t = q.types();
      for (int i = 0; i < f.length; i++) {
        if (!seen.contains(f[i])) {
          seen.add(f[i]);
          ddl.append(", `").append(f[i]).append("` ").append(t[i]);
        }
      }
    }
    ddl.append(", ingestTS long");
    StructType output = StructType.fromDDL(ddl.toString());
    LogicPlan.Placement placement = new LogicPlan.Placement(qs, output);
    List<String> out = new ArrayList<>();
    Map<List<Long>, Memory> stores = new HashMap<>();
    Map<Integer, StreamLogic> live = new HashMap<>();
    Map<String, int[]> streams = new HashMap<>();
    double[] a = new double[attributes];
    Event e = new Event();
    int start = 0;
    while (start < events.size()) {
      int end = Math.min(events.size(), start + rng.nextInt(micro ? 60 : 400));
      // The batch's (or real-time task's) routed rows, per group in arrival order: in micro-batches
      // each source task's bundles (one row per group and task), in real time one row per event.
      Map<List<Long>, List<Row>> groups = new LinkedHashMap<>();
      int tasks = micro ? 1 + rng.nextInt(4) : 1;
      int from = start;
      for (int t = 0; t < tasks; t++) {
        int to = t == tasks - 1 ? end : Math.min(end, from + rng.nextInt(end - from + 1));
        List<Row> routed = new ArrayList<>();
        if (micro) {
          LogicPlan.Bundler bundler = new LogicPlan.Bundler(qs);
          for (Row r : events.subList(from, to)) {
            LogicPlan.Routes.route(qs, streams, r, a, e, attributes, true, bundler);
          }
          for (Row x : bundler.rows()) {
            groups.computeIfAbsent(List.of((long) x.getInt(1), x.getLong(0)), k -> new ArrayList<>()).add(x);
          }
        } else {
          LogicPlan.Routed one = (q, k, s, id, v, n, ts, offset, ingest) ->
              routed.add(RowFactory.create(q, k, s, id, LogicPlan.pack(v, n), ts, offset, ingest));
          for (Row r : events.subList(from, to)) {
            LogicPlan.Routes.route(qs, streams, r, a, e, attributes, true, one);
          }
          for (Row x : routed) {
            groups.computeIfAbsent(List.of((long) x.getInt(0), x.getLong(1)), k -> new ArrayList<>()).add(x);
          }
        }
        from = to;
      }
      if (micro) {
        live.clear();           // a batch is a new task
        for (Map.Entry<List<Long>, List<Row>> g : groups.entrySet()) {
          List<Row> bundles = g.getValue();
          Collections.shuffle(bundles, rng);      // a shuffle keeps no order
          call(qs, placement, g.getKey(), bundles, true, stores, live, out);
        }
      } else {
        // Real-time mode: rows in feed order, a group handed a few at a time, in arrival order across groups.
        List<Row> all = new ArrayList<>();
        for (List<Row> rows : groups.values()) {
          all.addAll(rows);
        }
        all.sort(LogicPlan.FEED_ORDER);
        int at = 0;
        while (at < all.size()) {
          List<Long> key = List.of((long) all.get(at).getInt(0), all.get(at).getLong(1));
          List<Row> run = new ArrayList<>();
          int stop = at + 1 + rng.nextInt(5);
          while (at < all.size() && at < stop && key.equals(List.of((long) all.get(at).getInt(0),
              all.get(at).getLong(1)))) {
            run.add(all.get(at++));
          }
          call(qs, placement, key, run, false, stores, live, out);
        }
        if (rng.nextInt(3) == 0) {
          live.clear();         // the real-time batch (the task) ended
        }
      }
      start = end;
    }
    try (BufferedWriter w = Files.newBufferedWriter(Paths.get(args[4]))) {
      for (String line : out) {
        w.write(line);
        w.newLine();
      }
    }
  }

  private static void call(MicroQuery[] qs, LogicPlan.Placement placement, List<Long> key, List<Row> rows,
                           boolean bundled, Map<List<Long>, Memory> stores, Map<Integer, StreamLogic> live, List<String> out) {
    int qi = (int) (long) key.get(0);
    MicroQuery q = qs[qi];
    Memory store = stores.computeIfAbsent(key, k -> new Memory());
    LogicPlan.Group group = new LogicPlan.Group(q, qi, store, live);
    Out sink = (values, ingestTs) -> {
      Row row = placement.row(q, qi, values, ingestTs);
      StringBuilder line = new StringBuilder(row.getString(placement.stream));
      for (int i = 0; i < values.length; i++) {
        line.append(',').append(text(row.get(placement.at[qi][i])));
      }
      line.append(',').append(text(row.get(placement.ingest)));
      out.add(line.toString());
    };
    if (bundled) {
      List<byte[]> bundles = new ArrayList<>();
      for (Row r : rows) {
        bundles.add((byte[]) r.get(2));
      }
      new LogicPlan.Bundles(bundles, q.attributes()).feed(group, sink);
    } else {
      for (Row r : rows) {
        group.take(r, sink);
      }
    }
    group.end();
  }

  private static String text(Object v) {
    if (v instanceof Double) {
      return "x" + Long.toHexString(Double.doubleToRawLongBits((Double) v));
    }
    return String.valueOf(v);
  }

  /** The events in the plan's select order: ID, A1..An, TS, offset, ingestTS, stream. */
  private static List<Row> readEvents(String path, int attributes) throws IOException {
    List<Row> events = new ArrayList<>();
    try (BufferedReader in = Files.newBufferedReader(Paths.get(path))) {
      List<String> header = List.of(in.readLine().split(","));
      List<String> wanted = new ArrayList<>(List.of("ID"));
      for (int i = 1; i <= attributes; i++) {
        wanted.add("A" + i);
      }
      wanted.addAll(List.of("TS", "offset", "ingestTS", "stream"));
      int[] at = new int[wanted.size()];
      for (int i = 0; i < at.length; i++) {
        at[i] = header.indexOf(wanted.get(i));
        if (at[i] < 0) {
          throw new IllegalArgumentException(path + ": no column " + wanted.get(i));
        }
      }
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        String[] f = line.split(",");
        Object[] row = new Object[at.length];
        row[0] = Integer.parseInt(f[at[0]]);
        for (int i = 1; i <= attributes; i++) {
          row[i] = Double.parseDouble(f[at[i]]);
        }
        for (int i = 0; i < 3; i++) {
          row[attributes + 1 + i] = Long.parseLong(f[at[attributes + 1 + i]]);
        }
        row[attributes + 4] = f[at[attributes + 4]];
        events.add(RowFactory.create(row));
      }
    }
    return events;
  }

  /** One group's state as Spark's state store keeps it: the logic's bytes, the candidates' records. */
  private static final class Memory implements LogicPlan.States, ChunkCandidates.Store {
    private byte[] logic;
    private long[] counters;
    private final Map<Long, byte[]> records = new HashMap<>();

    @Override
    public byte[] logic() {
      return logic == null ? null : logic.clone();
    }

    @Override
    public void logic(byte[] bytes) {
      logic = bytes.clone();
    }

    @Override
    public ChunkCandidates.Store candidates() {
      return this;
    }

    @Override
    public long[] counters() {
      return counters == null ? null : counters.clone();
    }

    @Override
    public void counters(long[] values) {
      counters = values == null ? null : values.clone();
    }

    @Override
    public byte[] get(long seq) {
      byte[] r = records.get(seq);
      if (r == null) {
        throw new IllegalStateException("candidate record " + seq + " read but not stored");
      }
      return r.clone();
    }

    @Override
    public void put(long seq, byte[] record) {
      records.put(seq, record.clone());
    }

    @Override
    public void remove(long seq) {
      if (records.remove(seq) == null) {
        throw new IllegalStateException("candidate record " + seq + " removed but not stored");
      }
    }

    int size() {
      return records.size();
    }
  }
}
