package cepkit.spark;

import cepkit.logic.PairsBook;
import cepkit.logic.PairsBucket;
import cepkit.logic.PairsLayout;
import cepkit.logic.PairsMemoryStore;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * The Pairs JVM plan's logic without Spark, for the tests (tests/spark_runtime/test_pairs_realtime.py),
 * in either of Spark's modes:
 *
 * <ul>
 *   <li>{@code realtime}: ticks cut into source tasks at random (each task's
 *   {@link PairsRealTime.TickRows} starts afresh, as a real-time batch's reader does), their partial
 *   rows routed by key, and each bucket fed in runs of random length: after each run what it changed
 *   is written to its store, and at random (and at every source task's end) the bucket is made
 *   afresh and reads its state back, as a new Spark task does from the state store;</li>
 *   <li>{@code micro}: ticks cut into micro-batches of random length and each batch into 1-4 source
 *   tasks at random boundaries (contiguous offset ranges, some empty), each task's partial rows made
 *   afresh; a bucket gets all its rows of the batch at once, every task's mixed in random order (a
 *   shuffle's fetch order), through {@link PairsRealTime#handleBatch} in a bucket made afresh from
 *   its store (a micro-batch's task); at random a batch fails after its buckets ran: its answers
 *   are dropped (the sink's replay filter), its stores put back as the last batch left them, and it
 *   runs again with its rows in another order.</li>
 * </ul>
 *
 * <pre>java -cp JAR:PYSPARK_JARS/* cepkit.spark.PairsTrace STRATEGIES.json TICKS.csv BUCKETS SEED OUT.csv [MODE]</pre>
 *
 * TICKS.csv: symbol,price,tickTS,TS,offset,ingestTS per line, in feed order. MODE: realtime (the
 * default) or micro. OUT.csv: one output row per line (stream, strategy, the four doubles as their
 * IEEE bits, type, symbol, price, size, inputTickTS, inputTS, ingestTS), so the test compares the
 * doubles exactly.
 */
public final class PairsTrace {
  private PairsTrace() {
  }

  public static void main(String[] args) throws IOException {
    String strategies = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
    List<Row> ticks = new ArrayList<>();
    try (BufferedReader in = Files.newBufferedReader(Paths.get(args[1]))) {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        String[] f = line.split(",");
        ticks.add(RowFactory.create(f[0], Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]),
            Long.parseLong(f[4]), Long.parseLong(f[5])));
      }
    }
    int buckets = Integer.parseInt(args[2]);
    Random rng = new Random(Long.parseLong(args[3]));
    PairsLayout layout = PairsLayout.fromJson(strategies, buckets, null);
    Map<Integer, PairsMemoryStore> stored = new HashMap<>();
    for (int b = 0; b < layout.keys.length; b++) {
      stored.put(layout.keys[b], new PairsMemoryStore());
    }
    List<String> out = new ArrayList<>();
    PairsBook.Out sink = new PairsBook.Out() {
      @Override
      public void indicator(String strategy, double ratio, double avg, double upper, double lower, long tickTs,
                            long ts, long ingestTs) {
        out.add(String.join(",", "Indicator", strategy, bits(ratio), bits(avg), bits(upper), bits(lower), "", "",
            "0", "0", Long.toString(tickTs), Long.toString(ts), Long.toString(ingestTs)));
      }

      @Override
      public void order(String strategy, String type, String symbol, long price, long size, long tickTs, long ts,
                        long ingestTs) {
        out.add(String.join(",", "MarketOrder", strategy, "", "", "", "", type, symbol, Long.toString(price),
            Long.toString(size), Long.toString(tickTs), Long.toString(ts), Long.toString(ingestTs)));
      }
    };
    String mode = args.length > 5 ? args[5] : "realtime";
    if (mode.equals("realtime")) {
      realTime(ticks, layout, stored, rng, sink);
    } else if (mode.equals("micro")) {
      microBatches(ticks, layout, stored, rng, sink, out);
    } else {
      throw new IllegalArgumentException("mode: realtime or micro, got " + mode);
    }
    try (BufferedWriter w = Files.newBufferedWriter(Paths.get(args[4]))) {
      for (String line : out) {
        w.write(line);
        w.newLine();
      }
    }
  }

  private static void realTime(List<Row> ticks, PairsLayout layout, Map<Integer, PairsMemoryStore> stored, Random rng,
                               PairsBook.Out sink) {
    Map<Integer, PairsBucket> logic = new HashMap<>();
    PairsRealTime.TickRows rowsOf = new PairsRealTime.TickRows(layout);
    int start = 0;
    while (start < ticks.size()) {
      int end = Math.min(ticks.size(), start + 1 + rng.nextInt(4000));
      Map<Integer, List<Row>> byKey = new HashMap<>();
      for (Iterator<Row> it = rowsOf.call(ticks.subList(start, end).iterator()); it.hasNext(); ) {
        Row r = it.next();
        byKey.computeIfAbsent(r.getInt(0), k -> new ArrayList<>()).add(r);
      }
      for (Map.Entry<Integer, List<Row>> e : byKey.entrySet()) {
        List<Row> rows = e.getValue();
        int at = 0;
        while (at < rows.size()) {
          int stop = Math.min(rows.size(), at + 1 + rng.nextInt(50));
          // A new task reads the bucket back from its store; within one, its decoded state stays.
          PairsBucket bucket = logic.get(e.getKey());
          if (bucket == null || rng.nextInt(4) == 0) {
            bucket = new PairsBucket(layout.buckets.get(e.getKey()), layout.granuleMs);  // key b: bucket b
            logic.put(e.getKey(), bucket);
            bucket.attach(stored.get(e.getKey()));
          }
          for (Row r : rows.subList(at, stop)) {
            PairsRealTime.apply(bucket, r, sink);
          }
          bucket.flush();
          at = stop;
        }
      }
      // The source's task ends: so do the shuffle side's (a real-time batch ends them all).
      logic.clear();
      start = end;
    }
  }

  private static void microBatches(List<Row> ticks, PairsLayout layout, Map<Integer, PairsMemoryStore> stored, Random rng,
                                   PairsBook.Out sink, List<String> out) {
    PairsRealTime.TickRows rowsOf = new PairsRealTime.TickRows(layout);
    int start = 0;
    while (start < ticks.size()) {
      int end = Math.min(ticks.size(), start + 1 + rng.nextInt(rng.nextInt(3) == 0 ? 20 : 8000));
      // The batch's offset ranges: 1-4 contiguous tasks at random boundaries (an empty one reads nothing).
      int tasks = 1 + rng.nextInt(4);
      int[] cuts = new int[tasks + 1];
      cuts[0] = start;
      cuts[tasks] = end;
      for (int t = 1; t < tasks; t++) {
        cuts[t] = start + rng.nextInt(end - start + 1);
      }
      Arrays.sort(cuts);
      Map<Integer, List<Row>> byKey = new TreeMap<>();
      for (int t = 0; t < tasks; t++) {
        for (Iterator<Row> it = rowsOf.call(ticks.subList(cuts[t], cuts[t + 1]).iterator()); it.hasNext(); ) {
          Row r = it.next();
          byKey.computeIfAbsent(r.getInt(0), k -> new ArrayList<>()).add(r);
        }
      }
      Map<Integer, PairsMemoryStore> before = new HashMap<>();
      for (Map.Entry<Integer, PairsMemoryStore> e : stored.entrySet()) {
        before.put(e.getKey(), e.getValue().copy());
      }
      while (true) {
        int answered = out.size();
        for (Map.Entry<Integer, List<Row>> e : byKey.entrySet()) {
          List<Row> rows = new ArrayList<>(e.getValue());
          Collections.shuffle(rows, rng);
          PairsBucket bucket = new PairsBucket(layout.buckets.get(e.getKey()), layout.granuleMs);  // key b: bucket b
          bucket.attach(stored.get(e.getKey()));
          PairsRealTime.handleBatch(bucket, rows.iterator(), sink);
        }
        if (rng.nextInt(5) != 0) {
          break;
        }
        // The batch failed after its buckets ran: run it again from the last batch's state.
        out.subList(answered, out.size()).clear();
        for (Map.Entry<Integer, PairsMemoryStore> e : before.entrySet()) {
          stored.put(e.getKey(), e.getValue().copy());
        }
      }
      start = end;
    }
  }

  /** A bucket's records as Spark's state store would keep them between tasks. */
  private static String bits(double v) {
    return Long.toString(Double.doubleToRawLongBits(v));
  }
}
