package cepkit.flink;

import cepkit.logic.PairsBook;
import cepkit.logic.PairsBucket;
import cepkit.logic.PairsLayout;
import cepkit.logic.PairsMemoryStore;
import cepkit.logic.PairsPartials;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;

/**
 * The Flink Pairs plan's logic on traces, for the tests (tests/flink_runtime/test_pairs_flink.py):
 *
 * <ul>
 *   <li>{@code job}: {@link PairsFlink#plan} itself in a local Flink mini-cluster, the ticks from an
 *   in-memory source (one split, in feed order), the buckets over {@code PARALLELISM} subtasks; with
 *   {@code FAIL > 0}, checkpoints every 50 ms and the job failed once, at its tick {@code FAIL} or
 *   the first after it once two checkpoints have completed, and restored by Flink from its latest
 *   checkpoint (the partials'
 *   operator state, the buckets' keyed state, the source's position; the collected answers are
 *   those of checkpointed work only, exactly once);</li>
 *   <li>{@code restore}: the same calls the plan's functions make (PairsPartials.tick, state and
 *   restore; PairsBucket.attach, process and flush after every row), without Flink, with a
 *   checkpoint (the partials' state and a copy of every bucket's records) at random ticks and, at
 *   random, a failure that throws away the answers since the last checkpoint, restores it into fresh
 *   objects and reads the ticks again from its position: Flink's recovery, many times per trace.</li>
 * </ul>
 *
 * <pre>java -cp JAR:PYFLINK_JARS cepkit.flink.PairsFlinkTrace job STRATEGIES.json TICKS.csv BUCKETS PARALLELISM FAIL OUT.csv
 * java -cp JAR:PYFLINK_JARS cepkit.flink.PairsFlinkTrace restore STRATEGIES.json TICKS.csv BUCKETS SEED OUT.csv</pre>
 *
 * TICKS.csv: symbol,price,tickTS,TS,offset,ingestTS per line, in feed order. OUT.csv: one output
 * row per line (stream, strategy, the four doubles as their IEEE bits, type, symbol, price, size,
 * inputTickTS, inputTS, ingestTS), as cepkit.spark.PairsTrace writes them.
 */
public final class PairsFlinkTrace {
  private PairsFlinkTrace() {
  }

  public static void main(String[] args) throws Exception {
    String strategies = new String(Files.readAllBytes(Paths.get(args[1])), StandardCharsets.UTF_8);
    List<Row> ticks = new ArrayList<>();
    try (BufferedReader in = Files.newBufferedReader(Paths.get(args[2]))) {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        String[] f = line.split(",");
        ticks.add(Row.of(f[0], Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]),
            Long.parseLong(f[4]), Long.parseLong(f[5])));
      }
    }
    int buckets = Integer.parseInt(args[3]);
    List<String> out;
    String target;
    switch (args[0]) {
      case "job":
        out = job(strategies, ticks, buckets, Integer.parseInt(args[4]), Integer.parseInt(args[5]));
        target = args[6];
        break;
      case "restore":
        out = restore(strategies, ticks, buckets, new Random(Long.parseLong(args[4])));
        target = args[5];
        break;
      default:
        throw new IllegalArgumentException("mode job or restore, got " + args[0]);
    }
    try (BufferedWriter w = Files.newBufferedWriter(Paths.get(target))) {
      for (String line : out) {
        w.write(line);
        w.newLine();
      }
    }
  }

  // -- job ----------------------------------------------------------------------------------------

  /** Fails the job once: at the first tick from tick {@code at} on once two checkpoints have completed
   * (until they have, each tick from {@code at} on waits 5 ms, so that they come). */
  static final class FailOnce extends RichMapFunction<Row, Row> implements CheckpointListener {
    private static final long serialVersionUID = 1L;
    static final AtomicBoolean FAILED = new AtomicBoolean();
    static final AtomicInteger COMPLETED = new AtomicInteger();
    private final int at;
    private transient long seen;

    FailOnce(int at) {
      this.at = at;
    }

    @Override
    public Row map(Row tick) throws InterruptedException {
      if (at > 0 && !FAILED.get() && ++seen >= at) {
        if (COMPLETED.get() >= 2 && FAILED.compareAndSet(false, true)) {
          throw new IllegalStateException("cepkit trace: the injected failure");
        }
        Thread.sleep(5);
      }
      return tick;
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) {
      COMPLETED.incrementAndGet();
    }
  }

  static List<String> job(String strategies, List<Row> ticks, int buckets, int parallelism, int fail)
      throws Exception {
    Configuration conf = new Configuration();
    conf.setString("restart-strategy.type", fail > 0 ? "fixed-delay" : "none");
    conf.setString("restart-strategy.fixed-delay.attempts", "1");
    conf.setString("restart-strategy.fixed-delay.delay", "0 ms");
    StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);
    if (fail > 0) {
      env.enableCheckpointing(50);
    }
    RowTypeInfo type = new RowTypeInfo(new TypeInformation<?>[] {Types.STRING, Types.INT, Types.LONG, Types.LONG,
        Types.LONG, Types.LONG}, PairsFlink.TICK_COLUMNS);
    DataStream<Row> source = env.fromData(ticks, type).setParallelism(1)
        .map(new FailOnce(fail), type).setParallelism(1);
    List<String> out = new ArrayList<>();
    try (CloseableIterator<Row> rows = PairsFlink.plan(source, strategies, buckets, parallelism)
        .executeAndCollect("cepkit pairs trace")) {
      while (rows.hasNext()) {
        Row r = rows.next();
        Object[] v = new Object[r.getArity()];
        for (int i = 0; i < v.length; i++) {
          v[i] = r.getField(i);
        }
        out.add(line(v));
      }
    }
    if (fail > 0 && !FailOnce.FAILED.get()) {
      throw new IllegalStateException("cepkit trace: the job ended before its failure (" + FailOnce.COMPLETED.get()
          + " checkpoints): a trace shorter than FAIL = " + fail);
    }
    System.err.println("cepkit trace: " + (FailOnce.FAILED.get() ? 1 : 0) + " restores");
    return out;
  }

  // -- restore ------------------------------------------------------------------------------------

  /** A bucket's records in keyed state, and a copy of them as a checkpoint keeps it. */
  static List<String> restore(String strategies, List<Row> ticks, int buckets, Random rng) {
    PairsLayout layout = PairsLayout.fromJson(strategies, buckets, null);
    List<String> out = new ArrayList<>();
    PairsBook.Out sink = new PairsBook.Out() {
      @Override
      public void indicator(String strategy, double ratio, double avg, double upper, double lower, long tickTs,
                            long ts, long ingestTs) {
        out.add(line(PairsBook.indicatorRow(strategy, ratio, avg, upper, lower, tickTs, ts, ingestTs)));
      }

      @Override
      public void order(String strategy, String type, String symbol, long price, long size, long tickTs, long ts,
                        long ingestTs) {
        out.add(line(PairsBook.orderRow(strategy, type, symbol, price, size, tickTs, ts, ingestTs)));
      }
    };
    // The job's state: the partials operator's, each bucket's records and decoded bucket (key b is bucket b).
    Map<Integer, PairsMemoryStore> stores = new HashMap<>();
    Map<Integer, PairsBucket> logic = new HashMap<>();
    PairsPartials partials = new PairsPartials(layout);
    // The last checkpoint: where the source was, the partials' state, the buckets' records, the answers.
    int cpAt = 0;
    long[] cpPartials = partials.state();
    Map<Integer, PairsMemoryStore> cpStores = new HashMap<>();
    int cpOut = 0;
    int failures = 0;
    int at = 0;
    // About 30 checkpoints and as many failures over a short trace, one in 400 ticks over a long one.
    int every = Math.max(3, Math.min(400, ticks.size() / 30));
    PairsPartials.Out route = (key, granule, code, cnt, sum, price, offset, tickTs, ts, ingestTs) -> {
      PairsBucket bucket = logic.computeIfAbsent(key, k -> new PairsBucket(layout.buckets.get(k), layout.granuleMs));
      if (!bucket.attached()) {
        bucket.attach(stores.computeIfAbsent(key, k -> new PairsMemoryStore()));
      }
      bucket.process(granule, code, cnt, sum, price, tickTs, ts, ingestTs, sink);
      bucket.flush();
    };
    while (at < ticks.size()) {
      Row t = ticks.get(at);
      partials.tick((String) t.getField(0), (Integer) t.getField(1), (Long) t.getField(2), (Long) t.getField(3),
          (Long) t.getField(4), (Long) t.getField(5), route);
      at++;
      int dice = rng.nextInt(every);
      if (dice == 0) {                  // a checkpoint
        cpAt = at;
        cpPartials = partials.state();
        cpStores = new HashMap<>();
        for (Map.Entry<Integer, PairsMemoryStore> e : stores.entrySet()) {
          cpStores.put(e.getKey(), e.getValue().copy());
        }
        cpOut = out.size();
      } else if (dice == 1 && failures < 50) {     // a failure: restored from the last checkpoint
        failures++;
        at = cpAt;
        out.subList(cpOut, out.size()).clear();
        partials = new PairsPartials(layout);
        partials.restore(cpPartials);
        stores.clear();
        for (Map.Entry<Integer, PairsMemoryStore> e : cpStores.entrySet()) {
          stores.put(e.getKey(), e.getValue().copy());
        }
        logic.clear();
      }
    }
    System.err.println("cepkit trace: " + failures + " restores");
    return out;
  }

  static String line(Object[] v) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < v.length; i++) {
      if (i > 0) {
        b.append(',');
      }
      Object x = v[i];
      if (i >= 2 && i <= 5) {
        // the doubles as their IEEE bits; an order's are empty
        b.append("Indicator".equals(v[0]) ? Long.toString(Double.doubleToRawLongBits((Double) x)) : "");
      } else {
        b.append(x);
      }
    }
    return b.toString();
  }
}
