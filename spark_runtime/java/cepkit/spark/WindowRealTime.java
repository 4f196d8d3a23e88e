package cepkit.spark;

import cepkit.logic.WindowBucket;
import cepkit.logic.WindowPanes;
import cepkit.logic.WindowQuery;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.AbstractMap;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
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

import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A time-window query (Q3, Q4) in the JVM, in Spark's real-time mode and in micro-batches
 * (specs/TRANSLATION.md). Spark's own aggregation in real-time mode updates a window's row at every
 * event, and its window() in micro-batches closes on the watermark at batch ends without naming the
 * closing event; the spec wants each window's rows once, at the event that closes it, so the plan is
 * the paned one:
 *
 * <ol>
 *   <li>in the source's task ({@link EventRows}), each pane's events become one partial record
 *   per group (count; per value field sum, M2, max, min; the values a MEDIAN reads), sent when the
 *   pane has ended: at the next pane's first event, just before that event's clock rows (one per
 *   bucket), or when the task's input ends;</li>
 *   <li>one shuffle by bucket key (groups hashed over the shuffle partitions; no groups: one
 *   bucket), then the JVM {@code transformWithState}: each bucket ({@link WindowBucket}) merges
 *   the records and, at a clock row, emits the windows it closes.</li>
 * </ol>
 *
 * In real-time mode the events reach the plan in TS order (one source partition, one producer per
 * shuffle partition), which the bucket checks, and each row is handled as it is pulled. In
 * micro-batch mode ({@code realtime} false) a batch is read by several source tasks (contiguous
 * offset ranges, each starting afresh) and the shuffle does not keep row order, so every row
 * carries {@code seq}, the feed offset it stands at (a clock row: its event's; a pane record: its
 * first event's), and a bucket sorts its rows of a call by it before handling them: every record
 * of a pane then comes before any clock of a later pane, as in the feed. Per event the plan does
 * one hash lookup and a few additions; per pane, one row per group and bucket crosses the shuffle.
 */
public final class WindowRealTime {
  public static final StructType PARTIAL = new StructType()
      .add("key", DataTypes.IntegerType).add("pane", DataTypes.LongType).add("n", DataTypes.LongType)
      .add("TS", DataTypes.LongType).add("ingestTS", DataTypes.LongType).add("group", DataTypes.BinaryType)
      .add("stats", DataTypes.BinaryType).add("vals", DataTypes.BinaryType).add("seq", DataTypes.LongType);
  private static final byte[] NOTHING = new byte[0];

  private WindowRealTime() {
  }

  /**
   * The plan over the feed's events (columns TS, ingestTS, offset and the query's fields) for the
   * query literal {@code query} (JSON), over {@code partitions} shuffle partitions, in Spark's
   * real-time mode.
   */
  public static Dataset<Row> plan(Dataset<Row> events, String query, int partitions) {
    return plan(events, query, partitions, true);
  }

  /** As {@link #plan(Dataset, String, int)}, in real-time mode or ({@code realtime} false) in micro-batches. */
  public static Dataset<Row> plan(Dataset<Row> events, String query, int partitions, boolean realtime) {
    WindowQuery q = WindowQuery.fromJson(query);
    int buckets = q.groupBy.length == 0 ? 1 : partitions;
    int[] keys = PairsRealTime.spreadKeys(buckets, partitions);
    String[] rest = new String[2 + q.groupBy.length + q.valueFields.length];
    rest[0] = "ingestTS";
    rest[1] = "offset";
    System.arraycopy(q.groupBy, 0, rest, 2, q.groupBy.length);
    System.arraycopy(q.valueFields, 0, rest, 2 + q.groupBy.length, q.valueFields.length);
    Dataset<Row> partials = events.select("TS", rest).mapPartitions(new EventRows(q, keys), Encoders.row(PARTIAL));
    return partials.groupBy("key").as(Encoders.INT(), Encoders.row(PARTIAL))
        .transformWithState(new Processor(q, realtime), TimeMode.None(),
            realtime ? OutputMode.Update() : OutputMode.Append(), Encoders.row(outputSchema(q)));
  }

  /** The plan's rows: stream, the query's fields (WindowQuery#row's order), ingestTS. */
  static StructType outputSchema(WindowQuery q) {
    StructType s = new StructType().add("stream", DataTypes.StringType);
    for (int i = 0; i < q.outFields.length; i++) {
      switch (q.outTypes[i]) {
        case "int":
          s = s.add(q.outFields[i], DataTypes.IntegerType);
          break;
        case "long":
          s = s.add(q.outFields[i], DataTypes.LongType);
          break;
        case "double":
          s = s.add(q.outFields[i], DataTypes.DoubleType);
          break;
        default:
          throw new IllegalArgumentException("time window: no Spark type for " + q.outTypes[i]);
      }
    }
    return s.add("ingestTS", DataTypes.LongType);
  }

  static byte[] pack(double[] values) {
    ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    for (double v : values) {
      b.putDouble(v);
    }
    return b.array();
  }

  static double[] unpack(byte[] bytes) {
    ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    double[] out = new double[bytes.length / 8];
    for (int i = 0; i < out.length; i++) {
      out[i] = b.getDouble();
    }
    return out;
  }

  /**
   * A task's partial and clock rows from its events (TS, ingestTS, offset, the group fields, the
   * value fields). A task starts afresh (a real-time batch's reader does): a pane cut by the batch's end
   * sends its records in two parts, and the task's first event sends its pane's clock rows, which
   * a bucket that has seen that pane ignores.
   */
  static final class EventRows implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final WindowQuery q;
    private final int[] keys;

    EventRows(WindowQuery q, int[] keys) {
      this.q = q;
      this.keys = keys;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> events) {
      int groupsN = q.groupBy.length;
      int valuesN = q.valueFields.length;
      return new QueuedRows<Row>(events) {
        // The open pane's records, in the order their groups first came.
        private final Map<WindowBucket.Key, WindowPanes.Acc> open = new LinkedHashMap<>();
        // Each open record's first event's offset (its place in the feed).
        private final Map<WindowBucket.Key, Long> firstOffset = new HashMap<>();
        private long lastPane = Long.MIN_VALUE;
        private final double[] x = new double[valuesN];

        @Override
        protected void end() {
          sendRecords();
        }

        @Override
        protected void take(Row e) {
          long ts = e.getLong(0);
          long pane = Math.floorDiv(ts, q.slideMs);
          if (pane != lastPane) {
            if (lastPane != Long.MIN_VALUE && pane < lastPane) {
              throw new IllegalStateException("time window " + q.id + ": TS " + ts + " came after an event of pane "
                  + lastPane + " (the feed's events are not in TS order)");
            }
            sendRecords();
            for (int key : keys) {
              queued.add(RowFactory.create(key, pane, 0L, ts, e.getLong(1), NOTHING, NOTHING, NOTHING, e.getLong(2)));
            }
            lastPane = pane;
          }
          double[] g = new double[groupsN];
          for (int i = 0; i < groupsN; i++) {
            g[i] = ((Number) e.get(3 + i)).doubleValue();
          }
          for (int i = 0; i < valuesN; i++) {
            x[i] = ((Number) e.get(3 + groupsN + i)).doubleValue();
          }
          WindowBucket.Key key = new WindowBucket.Key(g);
          WindowPanes.Acc acc = open.get(key);
          if (acc == null) {
            acc = new WindowPanes.Acc(q.median);
            open.put(key, acc);
            firstOffset.put(key, e.getLong(2));
          }
          acc.add(x);
        }

        private void sendRecords() {
          for (Map.Entry<WindowBucket.Key, WindowPanes.Acc> r : open.entrySet()) {
            WindowPanes.Acc acc = r.getValue();
            int key = keys[Math.floorMod(r.getKey().hashCode(), keys.length)];
            queued.add(RowFactory.create(key, lastPane, acc.n, 0L, 0L, pack(r.getKey().values), pack(acc.stats()),
                pack(acc.keptValues()), firstOffset.get(r.getKey())));
          }
          open.clear();
          firstOffset.clear();
        }
      };
    }
  }

  /** A micro-batch bucket's rows in feed order: by seq, a clock row before a record at the same offset. */
  static final Comparator<Row> FEED_ORDER = Comparator.<Row>comparingLong(r -> r.getLong(8))
      .thenComparingLong(r -> r.getLong(2) == 0 ? 0 : 1);

  /** The buckets over Spark's state store: one bucket per key. */
  static final class Processor extends StatefulProcessor<Integer, Row, Row> {
    private static final long serialVersionUID = 1L;
    private final WindowQuery q;
    private final boolean realtime;
    private transient WindowBucket.Store store;
    private transient Map<Integer, WindowBucket> logic;

    Processor(WindowQuery q, boolean realtime) {
      this.q = q;
      this.realtime = realtime;
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
      // The handles act on the key being handled, so one store serves every bucket.
      ValueState<Long> clock = getHandle().getValueState("clock", Encoders.LONG(), TTLConfig.NONE());
      MapState<String, byte[]> groups = getHandle().getMapState("groups", Encoders.STRING(), Encoders.BINARY(),
          TTLConfig.NONE());
      store = new WindowBucket.Store() {
        @Override
        public Long clock() {
          return clock.exists() ? clock.get() : null;
        }

        @Override
        public void clock(long pane) {
          clock.update(pane);
        }

        @Override
        public Iterator<Map.Entry<String, byte[]>> groups() {
          scala.collection.Iterator<Tuple2<String, byte[]>> it = groups.iterator();
          return new Iterator<Map.Entry<String, byte[]>>() {
            @Override
            public boolean hasNext() {
              return it.hasNext();
            }

            @Override
            public Map.Entry<String, byte[]> next() {
              Tuple2<String, byte[]> t = it.next();
              return new AbstractMap.SimpleImmutableEntry<>(t._1(), t._2());
            }
          };
        }

        @Override
        public void group(String key, byte[] record) {
          groups.updateValue(key, record);
        }

        @Override
        public void remove(String key) {
          groups.removeKey(key);
        }
      };
      // A task's buckets start unattached: init runs once per task, and what a bucket keeps in
      // memory is only valid within the task that read it from the store.
      logic = new HashMap<>();
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Integer key, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
      WindowBucket bucket = logic.computeIfAbsent(key, k -> new WindowBucket(q));
      if (!bucket.attached()) {
        bucket.attach(store);
      }
      ArrayDeque<Row> out = new ArrayDeque<>();
      WindowBucket.Out sink = values -> out.add(RowFactory.create(values));
      if (!realtime) {
        List<Row> batch = new ArrayList<>();
        CollectionConverters.asJava(rows).forEachRemaining(batch::add);
        batch.sort(FEED_ORDER);
        for (Row r : batch) {
          handle(bucket, r, sink, q);
        }
        bucket.flush();
        return CollectionConverters.asScala(out.iterator());
      }
      // Rows are handled as they are pulled, so an output leaves as soon as its row came; what
      // they changed is written once the key's rows are all handled.
      Iterator<Row> lazy = new QueuedRows<Row>(CollectionConverters.asJava(rows), out) {
        @Override
        protected void take(Row r) {
          handle(bucket, r, sink, q);
        }

        @Override
        protected void end() {
          bucket.flush();
        }
      };
      return CollectionConverters.asScala(lazy);
    }

    /** One partial or clock row (PARTIAL's columns) into its bucket. */
    static void handle(WindowBucket bucket, Row r, WindowBucket.Out sink, WindowQuery q) {
      long n = r.getLong(2);
      if (n == 0) {
        bucket.clock(r.getLong(1), r.getLong(3), r.getLong(4), sink);
      } else {
        bucket.partial(r.getLong(1), n, unpack((byte[]) r.get(5)), unpack((byte[]) r.get(6)),
            WindowPanes.unpackValues(unpack((byte[]) r.get(7)), n, q.median));
      }
    }
  }
}
