package cepkit.spark;

import cepkit.logic.PairsBook;
import cepkit.logic.PairsBucket;
import cepkit.logic.PairsLayout;
import cepkit.logic.PairsPartials;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;

import scala.jdk.javaapi.CollectionConverters;

/**
 * The Pairs keyed plan in Spark's real-time mode (specs/TRANSLATION.md), all in the JVM, since the
 * mode admits no Python in a query:
 *
 * <ol>
 *   <li>in the source's task, the ticks become partial rows as runtime_common/pairs_partials.py
 *   makes them ({@link TickRows}, with the shared cepkit.logic.PairsPartials): at the first tick of
 *   a granule a clock row for every bucket, and per monitored symbol one aggregate row of the
 *   granule's ticks (count, sum, last price), sent before the next granule's clock rows;</li>
 *   <li>one shuffle by bucket key (keys picked to land on different shuffle partitions), then the
 *   JVM {@code transformWithState} runs each bucket's strategies ({@link Processor}, with the
 *   shared {@link PairsBucket} and {@link PairsBook}) with their state in Spark's state store.</li>
 * </ol>
 *
 * Every row is handled as it arrives and its outputs leave at once. The ticks reach the plan in
 * the feed's order (one source partition, one producer per shuffle partition), which the bucket
 * logic checks.
 */
public final class PairsRealTime {
  public static final StructType PARTIAL = new StructType()
      .add("key", DataTypes.IntegerType).add("granule", DataTypes.LongType).add("code", DataTypes.IntegerType)
      .add("cnt", DataTypes.LongType).add("sum", DataTypes.LongType).add("price", DataTypes.LongType)
      .add("offset", DataTypes.LongType).add("tickTS", DataTypes.LongType).add("TS", DataTypes.LongType)
      .add("ingestTS", DataTypes.LongType);
  // runtime_common/pairs_bucket.OUTPUT_SCHEMA: both streams' columns, `stream` saying which.
  public static final StructType OUTPUT = new StructType()
      .add("stream", DataTypes.StringType).add("strategy", DataTypes.StringType)
      .add("ratio", DataTypes.DoubleType).add("avgRatio", DataTypes.DoubleType)
      .add("upperBand", DataTypes.DoubleType).add("lowerBand", DataTypes.DoubleType)
      .add("type", DataTypes.StringType).add("symbol", DataTypes.StringType)
      .add("price", DataTypes.IntegerType).add("size", DataTypes.IntegerType)
      .add("inputTickTS", DataTypes.LongType).add("inputTS", DataTypes.LongType).add("ingestTS", DataTypes.LongType);
  // Spark's hash partitioning of an int grouping key: Murmur3 with this seed, modulo the partitions.
  private static final int HASH_SEED = 42;

  private PairsRealTime() {
  }

  /**
   * The plan over the feed's ticks (columns symbol, price, tickTS, TS, offset, ingestTS);
   * {@code strategies}: the program's strategy rows as JSON; {@code buckets} state keys over
   * {@code partitions} shuffle partitions.
   */
  public static Dataset<Row> plan(Dataset<Row> ticks, String strategies, int buckets, int partitions) {
    int n = PairsLayout.fromJson(strategies, buckets, null).buckets.size();
    PairsLayout layout = PairsLayout.fromJson(strategies, buckets, spreadKeys(n, partitions));
    Dataset<Row> partials = ticks.select("symbol", "price", "tickTS", "TS", "offset", "ingestTS")
        .mapPartitions(new TickRows(layout), Encoders.row(PARTIAL));
    // Grouped by the key column (not by a key function, whose AppendColumnsWithObject real-time
    // mode does not admit).
    return partials.groupBy("key").as(Encoders.INT(), Encoders.row(PARTIAL))
        .transformWithState(new Processor(layout), TimeMode.None(), OutputMode.Update(), Encoders.row(OUTPUT));
  }

  /** n key values that Spark's hash partitioning puts on partitions 0, 1, 2, ... round-robin (as
   * spark_runtime/pairs_plan.spread_keys picks them for the micro-batch plan). */
  static int[] spreadKeys(int n, int partitions) {
    int[] keys = new int[n];
    int found = 0;
    for (int k = 0; found < n; k++) {
      if (Math.floorMod(Murmur3_x86_32.hashInt(k, HASH_SEED), partitions) == found % partitions) {
        keys[found++] = k;
      }
    }
    return keys;
  }

  /**
   * A source task's partial rows ({@link PairsPartials}, the logic Flink's plan shares): each
   * granule's ticks of a symbol summed into one aggregate row, and every bucket's clock row at a
   * granule's first tick; the task starts afresh and sends its open granule's sums when its input
   * ends.
   */
  static final class TickRows implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final PairsLayout layout;

    TickRows(PairsLayout layout) {
      this.layout = layout;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> ticks) {
      PairsPartials partials = new PairsPartials(layout);
      return new QueuedRows<Row>(ticks) {
        private final PairsPartials.Out out = (key, granule, code, cnt, sum, price, offset, tickTs, ts, ingestTs) ->
            queued.add(RowFactory.create(key, granule, code, cnt, sum, price, offset, tickTs, ts, ingestTs));

        @Override
        protected void end() {
          partials.flush(out);
        }

        @Override
        protected void take(Row t) {
          partials.tick(t.getString(0), t.getInt(1), t.getLong(2), t.getLong(3), t.getLong(4), t.getLong(5), out);
        }
      };
    }
  }

  /** The buckets' logic over Spark's state store: one bucket per key. */
  static final class Processor extends StatefulProcessor<Integer, Row, Row> {
    private static final long serialVersionUID = 1L;
    private final PairsLayout layout;
    private transient PairsBucket.Store store;
    private transient Map<Integer, PairsBucket> logic;

    Processor(PairsLayout layout) {
      this.layout = layout;
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
      // The handles act on the key being handled, so one store serves every bucket.
      ValueState<byte[]> clock = getHandle().getValueState("clock", Encoders.BINARY(), TTLConfig.NONE());
      MapState<Integer, byte[]> symbols = getHandle().getMapState("symbols", Encoders.INT(), Encoders.BINARY(),
          TTLConfig.NONE());
      ValueState<byte[]> books = getHandle().getValueState("books", Encoders.BINARY(), TTLConfig.NONE());
      store = new PairsBucket.Store() {
        @Override
        public byte[] clock() {
          return clock.exists() ? clock.get() : null;
        }

        @Override
        public void clock(byte[] record) {
          clock.update(record);
        }

        @Override
        public byte[] symbol(int code) {
          return symbols.containsKey(code) ? symbols.getValue(code) : null;
        }

        @Override
        public void symbol(int code, byte[] record) {
          symbols.updateValue(code, record);
        }

        @Override
        public byte[] books() {
          return books.exists() ? books.get() : null;
        }

        @Override
        public void books(byte[] record) {
          books.update(record);
        }
      };
      // A task's buckets start unattached: init runs once per task, and what a bucket keeps in
      // memory is only valid within the task that read it from the store.
      logic = new HashMap<>();
      for (int b = 0; b < layout.keys.length; b++) {
        logic.put(layout.keys[b], new PairsBucket(layout.buckets.get(b), layout.granuleMs));
      }
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Integer key, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
      PairsBucket bucket = logic.get(key);
      if (bucket == null) {
        throw new IllegalStateException("pairs: no bucket has key " + key);
      }
      if (!bucket.attached()) {
        bucket.attach(store);
      }
      ArrayDeque<Row> out = new ArrayDeque<>();
      PairsBook.Out sink = new PairsBook.Out() {
        @Override
        public void indicator(String strategy, double ratio, double avg, double upper, double lower, long tickTs,
                              long ts, long ingestTs) {
          out.add(RowFactory.create("Indicator", strategy, ratio, avg, upper, lower, "", "", 0, 0, tickTs, ts,
              ingestTs));
        }

        @Override
        public void order(String strategy, String type, String symbol, long price, long size, long tickTs, long ts,
                          long ingestTs) {
          out.add(RowFactory.create("MarketOrder", strategy, Double.NaN, Double.NaN, Double.NaN, Double.NaN, type,
              symbol, (int) price, (int) size, tickTs, ts, ingestTs));
        }
      };
      // Rows are handled as they are pulled, so an output leaves as soon as its row came; what
      // they changed is written once the key's rows are all handled.
      Iterator<Row> lazy = new QueuedRows<Row>(CollectionConverters.asJava(rows), out) {
        @Override
        protected void take(Row r) {
          bucket.process(r.getLong(1), r.getInt(2), r.getLong(3), r.getLong(4), r.getLong(5), r.getLong(7),
              r.getLong(8), r.getLong(9), sink);
        }

        @Override
        protected void end() {
          bucket.flush();
        }
      };
      return CollectionConverters.asScala(lazy);
    }
  }
}
