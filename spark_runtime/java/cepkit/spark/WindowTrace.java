package cepkit.spark;

import cepkit.logic.WindowBucket;
import cepkit.logic.WindowQuery;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * The real-time time-window logic without Spark, for the tests (tests/spark_runtime/
 * test_window_realtime.py): events cut into source tasks at random (each task's
 * {@link WindowRealTime.EventRows} starts afresh, as a real-time batch's reader does), their rows
 * routed by key, and each bucket fed in runs of random length: after each run what it changed is
 * written to its store, and at random (and at every source task's end) the bucket is made afresh
 * and reads its state back, as a new Spark task does from the state store.
 *
 * <pre>java -cp JAR:PYSPARK_JARS/* cepkit.spark.WindowTrace QUERY.json EVENTS.csv BUCKETS SEED OUT.csv [micro]</pre>
 *
 * With {@code micro}, as Spark's micro-batches run the plan instead ({@link #microBatches}).
 * EVENTS.csv: a header, then one event per line in feed order, with at least TS, ingestTS, offset
 * and the query's fields. OUT.csv: one output row per line, the query's output schema's columns (doubles
 * as Java prints them, which reads back exactly).
 */
public final class WindowTrace {
  private WindowTrace() {
  }

  public static void main(String[] args) throws IOException {
    WindowQuery q = WindowQuery.fromJson(new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8));
    List<Row> events = readEvents(q, args[1]);
    int buckets = q.groupBy.length == 0 ? 1 : Integer.parseInt(args[2]);
    Random rng = new Random(Long.parseLong(args[3]));
    int[] keys = new int[buckets];
    Map<Integer, MemoryStore> stored = new HashMap<>();
    for (int b = 0; b < buckets; b++) {
      keys[b] = 10 * b + 3;
      stored.put(keys[b], new MemoryStore());
    }
    List<String> out = new ArrayList<>();
    WindowBucket.Out sink = values -> {
      StringBuilder line = new StringBuilder();
      for (Object v : values) {
        line.append(line.length() == 0 ? "" : ",").append(v);
      }
      out.add(line.toString());
    };
    WindowRealTime.EventRows rowsOf = new WindowRealTime.EventRows(q, keys);
    Map<Integer, WindowBucket> logic = new HashMap<>();
    if (args.length > 5 && args[5].equals("micro")) {
      microBatches(q, events, rowsOf, stored, rng, sink);
      write(out, args[4]);
      return;
    }
    int start = 0;
    while (start < events.size()) {
      int end = Math.min(events.size(), start + 1 + rng.nextInt(3000));
      Map<Integer, List<Row>> byKey = new LinkedHashMap<>();
      for (Iterator<Row> it = rowsOf.call(events.subList(start, end).iterator()); it.hasNext(); ) {
        Row r = it.next();
        byKey.computeIfAbsent(r.getInt(0), k -> new ArrayList<>()).add(r);
      }
      for (Map.Entry<Integer, List<Row>> e : byKey.entrySet()) {
        List<Row> rows = e.getValue();
        int at = 0;
        while (at < rows.size()) {
          int stop = Math.min(rows.size(), at + 1 + rng.nextInt(20));
          // A new task reads the bucket back from its store; within one, its decoded state stays.
          WindowBucket bucket = logic.get(e.getKey());
          if (bucket == null || rng.nextInt(4) == 0) {
            bucket = new WindowBucket(q);
            logic.put(e.getKey(), bucket);
            bucket.attach(stored.get(e.getKey()));
          }
          for (Row r : rows.subList(at, stop)) {
            WindowRealTime.Processor.handle(bucket, r, sink, q);
          }
          bucket.flush();
          at = stop;
        }
      }
      // The source's task ends: so do the shuffle side's (a real-time batch ends them all).
      logic.clear();
      start = end;
    }
    write(out, args[4]);
  }

  /**
   * Micro-batch mode: the events cut into batches at random, each batch read by 1 to 4 source tasks
   * (contiguous offset ranges, each starting afresh), every bucket's rows of the batch shuffled
   * (a shuffle keeps no order), then sorted as the processor sorts them and handled by a bucket
   * read afresh from its store (each batch is a new task), its changes written at the end.
   */
  private static void microBatches(WindowQuery q, List<Row> events, WindowRealTime.EventRows rowsOf,
                                   Map<Integer, MemoryStore> stored, Random rng, WindowBucket.Out sink) {
    int start = 0;
    while (start < events.size()) {
      int end = Math.min(events.size(), start + 1 + rng.nextInt(3000));
      Map<Integer, List<Row>> byKey = new LinkedHashMap<>();
      int tasks = 1 + rng.nextInt(4);
      int from = start;
      for (int t = 0; t < tasks; t++) {
        int to = t == tasks - 1 ? end : Math.min(end, from + rng.nextInt(end - from + 1));
        for (Iterator<Row> it = rowsOf.call(events.subList(from, to).iterator()); it.hasNext(); ) {
          Row r = it.next();
          byKey.computeIfAbsent(r.getInt(0), k -> new ArrayList<>()).add(r);
        }
        from = to;
      }
      for (Map.Entry<Integer, List<Row>> e : byKey.entrySet()) {
        List<Row> rows = e.getValue();
        java.util.Collections.shuffle(rows, rng);
        rows.sort(WindowRealTime.FEED_ORDER);
        WindowBucket bucket = new WindowBucket(q);
        bucket.attach(stored.get(e.getKey()));
        for (Row r : rows) {
          WindowRealTime.Processor.handle(bucket, r, sink, q);
        }
        bucket.flush();
      }
      start = end;
    }
  }

  private static void write(List<String> out, String path) throws IOException {
    try (BufferedWriter w = Files.newBufferedWriter(Paths.get(path))) {
      for (String line : out) {
        w.write(line);
        w.newLine();
      }
    }
  }

  /** The events as the plan selects them: TS, ingestTS, offset (longs), the group and value fields (doubles). */
  private static List<Row> readEvents(WindowQuery q, String path) throws IOException {
    List<Row> events = new ArrayList<>();
    try (BufferedReader in = Files.newBufferedReader(Paths.get(path))) {
      List<String> header = List.of(in.readLine().split(","));
      List<String> wanted = new ArrayList<>(List.of("TS", "ingestTS", "offset"));
      wanted.addAll(List.of(q.groupBy));
      wanted.addAll(List.of(q.valueFields));
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
        row[0] = Long.parseLong(f[at[0]]);
        row[1] = Long.parseLong(f[at[1]]);
        row[2] = Long.parseLong(f[at[2]]);
        for (int i = 3; i < at.length; i++) {
          row[i] = Double.parseDouble(f[at[i]]);
        }
        events.add(RowFactory.create(row));
      }
    }
    return events;
  }

  /** A bucket's records as Spark's state store would keep them between tasks. */
  private static final class MemoryStore implements WindowBucket.Store {
    private Long clock;
    private final Map<String, byte[]> groups = new HashMap<>();

    @Override
    public Long clock() {
      return clock;
    }

    @Override
    public void clock(long pane) {
      clock = pane;
    }

    @Override
    public Iterator<Map.Entry<String, byte[]>> groups() {
      return new HashMap<>(groups).entrySet().iterator();
    }

    @Override
    public void group(String key, byte[] record) {
      groups.put(key, record.clone());
    }

    @Override
    public void remove(String key) {
      groups.remove(key);
    }
  }
}
