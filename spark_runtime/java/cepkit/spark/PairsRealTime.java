package cepkit.spark;

import cepkit.logic.PairsBook;
import cepkit.logic.PairsBucket;
import cepkit.logic.PairsLayout;
import cepkit.logic.PairsPartials;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
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
 * The Pairs JVM plan on Spark (specs/TRANSLATION.md), in real-time mode and in micro-batches, all in
 * the JVM:
 *
 * <ol>
 *   <li>in the source's tasks, the ticks become partial rows as runtime_common/pairs_partials.py
 *   makes them ({@link TickRows}, with the shared cepkit.logic.PairsPartials): at the first tick of
 *   a granule a clock row for every bucket, and per monitored symbol one aggregate row of the
 *   granule's ticks (count, sum, last price), sent before the next granule's clock rows or when the
 *   task's input ends;</li>
 *   <li>one shuffle by bucket key (keys picked to land on different shuffle partitions), then the
 *   JVM {@code transformWithState} runs each bucket's strategies ({@link Processor}, with the
 *   shared {@link PairsBucket} and {@link PairsBook}) with their state in Spark's state store.</li>
 * </ol>
 *
 * Real-time mode: one source partition, one producer per shuffle partition, so a bucket's rows come
 * in the feed's order; every row is handled as it arrives and its outputs leave at once.
 * Micro-batches: a batch's offset ranges are read by several source tasks, each making the partial
 * rows of its range, and the shuffle hands a bucket every task's rows at once in no set order, so
 * the processor puts them in feed order first ({@link #feedOrder}). Either way the bucket logic
 * checks the order and fails the query on a row out of it.
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
   * {@code partitions} shuffle partitions; {@code realTime}: Spark's real-time mode (output mode
   * update, rows handled as they come), else micro-batches (append, a bucket's rows of a batch put
   * in feed order first).
   */
  public static Dataset<Row> plan(Dataset<Row> ticks, String strategies, int buckets, int partitions,
                                  boolean realTime) {
    int n = PairsLayout.fromJson(strategies, buckets, null).buckets.size();
    PairsLayout layout = PairsLayout.fromJson(strategies, buckets, spreadKeys(n, partitions));
    Dataset<Row> partials = ticks.select("symbol", "price", "tickTS", "TS", "offset", "ingestTS")
        .mapPartitions(new TickRows(layout), Encoders.row(PARTIAL));
    // Grouped by the key column (not by a key function, whose AppendColumnsWithObject real-time
    // mode does not admit).
    return partials.groupBy("key").as(Encoders.INT(), Encoders.row(PARTIAL))
        .transformWithState(new Processor(layout, realTime), TimeMode.None(),
            realTime ? OutputMode.Update() : OutputMode.Append(), Encoders.row(OUTPUT));
  }

  /**
   * Feed order for one bucket's partial rows of a micro-batch: by the tick they came from
   * ({@code offset}: a clock row's is its tick's, an aggregate row's its granule's last tick of the
   * symbol in its task), a clock row before an aggregate row of the same tick. The batch's offset
   * ranges are disjoint and each task's ticks are in feed order, so this puts every task's rows
   * after those of the ranges before it, and within a task reorders only aggregate rows of one
   * granule, which touch different symbols and commute. A granule cut by a task's or a batch's end
   * thus reaches the bucket as in real-time mode: the first part's aggregate rows, the next task's
   * clock row of that granule (ignored: the granule is open), then its aggregate rows, which the
   * bucket adds to the same open-period sums.
   */
  static Row[] feedOrder(Iterator<Row> rows) {
    ArrayList<Row> list = new ArrayList<>();
    rows.forEachRemaining(list::add);
    Row[] sorted = list.toArray(new Row[0]);
    Arrays.sort(sorted, FEED_ORDER);
    return sorted;
  }

  private static final Comparator<Row> FEED_ORDER = Comparator.<Row>comparingLong(r -> r.getLong(6))
      .thenComparingInt(r -> r.getLong(3) == 0 ? 0 : 1);

  /** One partial row (PARTIAL) through its bucket. */
  static void apply(PairsBucket bucket, Row r, PairsBook.Out sink) {
    bucket.process(r.getLong(1), r.getInt(2), r.getLong(3), r.getLong(4), r.getLong(5), r.getLong(7), r.getLong(8),
        r.getLong(9), sink);
  }

  /** A micro-batch's rows of one bucket: put in feed order, handled, and what they changed written. */
  static void handleBatch(PairsBucket bucket, Iterator<Row> rows, PairsBook.Out sink) {
    for (Row r : feedOrder(rows)) {
      apply(bucket, r, sink);
    }
    bucket.flush();
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
    private final boolean realTime;
    private transient PairsBucket.Store store;
    private transient Map<Integer, PairsBucket> logic;

    Processor(PairsLayout layout, boolean realTime) {
      this.layout = layout;
      this.realTime = realTime;
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
      // A task's buckets start unattached: init runs once per task (a real-time batch's, or a
      // micro-batch's partition), and what a bucket keeps in memory is only valid within the task
      // that read it from the store.
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
          out.add(RowFactory.create(PairsBook.indicatorRow(strategy, ratio, avg, upper, lower, tickTs, ts, ingestTs)));
        }

        @Override
        public void order(String strategy, String type, String symbol, long price, long size, long tickTs, long ts,
                          long ingestTs) {
          out.add(RowFactory.create(PairsBook.orderRow(strategy, type, symbol, price, size, tickTs, ts, ingestTs)));
        }
      };
      if (!realTime) {
        // A micro-batch hands the key all its rows of the batch at once, from every source task.
        handleBatch(bucket, CollectionConverters.asJava(rows), sink);
        return CollectionConverters.asScala(out.iterator());
      }
      // Real-time: rows are handled as they are pulled, so an output leaves as soon as its row
      // came; what they changed is written once the key's rows are all handled.
      Iterator<Row> lazy = new QueuedRows<Row>(CollectionConverters.asJava(rows), out) {
        @Override
        protected void take(Row r) {
          apply(bucket, r, sink);
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
