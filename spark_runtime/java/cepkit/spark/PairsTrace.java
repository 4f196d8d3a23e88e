package cepkit.spark;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * The real-time Pairs logic without Spark, for the tests (tests/spark_runtime/test_pairs_realtime.py):
 * ticks cut into source tasks at random (each task's {@link PairsRealTime.TickRows} starts afresh,
 * as a real-time batch's reader does), their partial rows routed by key, and each bucket fed in
 * runs of random length with its state written to bytes and read back between runs, as Spark's
 * state store keeps it.
 *
 * <pre>java -cp JAR:PYSPARK_JARS/* cepkit.spark.PairsTrace STRATEGIES.json TICKS.csv BUCKETS SEED OUT.csv</pre>
 *
 * TICKS.csv: symbol,price,tickTS,TS,offset,ingestTS per line, in feed order. OUT.csv: one output
 * row per line (stream, strategy, the four doubles as their IEEE bits, type, symbol, price, size,
 * inputTickTS, inputTS, ingestTS), so the test compares the doubles exactly.
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
    Map<Integer, PairsBucket> logic = new HashMap<>();
    Map<Integer, byte[][]> stored = new HashMap<>();
    for (int b = 0; b < layout.keys.length; b++) {
      logic.put(layout.keys[b], new PairsBucket(layout.buckets.get(b), layout.granuleMs));
      stored.put(layout.keys[b], new byte[2][]);
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
        PairsBucket bucket = logic.get(e.getKey());
        byte[][] state = stored.get(e.getKey());
        List<Row> rows = e.getValue();
        int at = 0;
        while (at < rows.size()) {
          int stop = Math.min(rows.size(), at + 1 + rng.nextInt(50));
          bucket.load(state[0], () -> state[1]);
          for (Row r : rows.subList(at, stop)) {
            bucket.process(r.getLong(1), r.getInt(2), r.getLong(3), r.getLong(4), r.getLong(5), r.getLong(7),
                r.getLong(8), r.getLong(9), sink);
          }
          if (bucket.openChanged) {
            state[0] = bucket.openRecord();
          }
          if (bucket.booksChanged) {
            state[1] = bucket.booksRecord();
          }
          at = stop;
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

  private static String bits(double v) {
    return Long.toString(Double.doubleToRawLongBits(v));
  }
}
