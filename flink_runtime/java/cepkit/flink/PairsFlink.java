package cepkit.flink;

import cepkit.logic.PairsBook;
import cepkit.logic.PairsBucket;
import cepkit.logic.PairsLayout;
import cepkit.logic.PairsPartials;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The Pairs plan on Flink with its per-tick work in Flink's operators (specs/TRANSLATION.md, "The
 * Flink programs", Pairs), all in the JVM, with the Pairs logic Spark's real-time plan runs
 * (cepkit.logic):
 *
 * <ol>
 *   <li>{@link Partials}, a {@code ProcessFunction} chained to the feed's source (one split, one
 *   task: below): each tick goes through {@link PairsPartials}, which sends every bucket's clock row
 *   at a granule's first tick and, per monitored symbol, one aggregate row of the granule's ticks
 *   once the granule has ended. Its open granule's sums are operator state (checkpointed), so a
 *   restored job sends the same rows as one never stopped;</li>
 *   <li>{@code keyBy(bucket)} (keys picked so that Flink's key groups put bucket i on subtask
 *   i mod parallelism), then {@link Buckets}, a {@code KeyedProcessFunction} with the job's
 *   parallelism: each bucket's strategies ({@link PairsBucket}, {@link PairsBook}) step over its
 *   rows, their state in Flink keyed state (checkpointed with the job), their Indicator and
 *   MarketOrder rows on to the harness sink (HarnessSink, chained).</li>
 * </ol>
 *
 * <p>Order. The logic needs the feed's one order: a granule's first tick over all symbols closes
 * periods, with the last prices before it. The feed is read as one split by one reader and the
 * partials operator runs in that task, so it sees the ticks in offset order; one upstream task
 * sends to each bucket's subtask over one channel, which keeps that order, so every bucket gets its
 * rows in feed order (and PairsBucket fails the job on a row out of order, never answers wrong).
 * More splits would interleave the ticks of different blocks; merging them back needs each split's
 * sums held until every split's watermark has passed the granule, which would delay every output by
 * the slowest split. Reading is not the bound here: the per-tick work is a hash lookup and three
 * additions.
 */
public final class PairsFlink {
  /** The output rows: runtime_common/pairs_bucket.OUTPUT_SCHEMA, both streams' columns. */
  public static final String[] OUTPUT_COLUMNS = {"stream", "strategy", "ratio", "avgRatio", "upperBand",
      "lowerBand", "type", "symbol", "price", "size", "inputTickTS", "inputTS", "ingestTS"};
  private static final TypeInformation<?>[] OUTPUT_TYPES = {Types.STRING, Types.STRING, Types.DOUBLE, Types.DOUBLE,
      Types.DOUBLE, Types.DOUBLE, Types.STRING, Types.STRING, Types.INT, Types.INT, Types.LONG, Types.LONG,
      Types.LONG};
  /** Each stream's columns for HarnessSink: {@code {"stream": [[name, type, position], ...]}}. */
  public static final String STREAMS_JSON = "{\"Indicator\": [[\"strategy\", \"string\", 1], "
      + "[\"ratio\", \"double\", 2], [\"avgRatio\", \"double\", 3], [\"upperBand\", \"double\", 4], "
      + "[\"lowerBand\", \"double\", 5], [\"inputTickTS\", \"long\", 10], [\"inputTS\", \"long\", 11], "
      + "[\"ingestTS\", \"long\", 12]], "
      + "\"MarketOrder\": [[\"strategy\", \"string\", 1], [\"type\", \"string\", 6], [\"symbol\", \"string\", 7], "
      + "[\"price\", \"int\", 8], [\"size\", \"int\", 9], [\"inputTickTS\", \"long\", 10], "
      + "[\"inputTS\", \"long\", 11], [\"ingestTS\", \"long\", 12]]}";
  /** The columns of a tick the plan reads, by name (FeedSource's Rows; the trace's). */
  static final String[] TICK_COLUMNS = {"symbol", "price", "tickTS", "TS", "offset", "ingestTS"};

  private PairsFlink() {
  }

  /** {@link #STREAMS_JSON}, for the program (py4j calls methods). */
  public static String streamsJson() {
    return STREAMS_JSON;
  }

  /** One partial row (pairs_partials.PARTIAL_FIELDS), a Flink POJO: a clock row has {@code cnt == 0}. */
  public static final class Partial {
    public int key;
    public long granule;
    public int code;
    public long cnt;
    public long sum;
    public long price;
    public long offset;
    public long tickTs;
    public long ts;
    public long ingestTs;

    public Partial() {
    }

    Partial(int key, long granule, int code, long cnt, long sum, long price, long offset, long tickTs, long ts,
            long ingestTs) {
      this.key = key;
      this.granule = granule;
      this.code = code;
      this.cnt = cnt;
      this.sum = sum;
      this.price = price;
      this.offset = offset;
      this.tickTs = tickTs;
      this.ts = ts;
      this.ingestTs = ingestTs;
    }
  }

  /**
   * The plan over the feed's ticks (a stream of Rows with the columns {@link #TICK_COLUMNS}, in feed
   * order: one split); its output Rows ({@link #OUTPUT_COLUMNS}), to go to a HarnessSink with
   * {@link #STREAMS_JSON}. {@code strategies}: the program's strategy rows as JSON; {@code buckets}
   * state keys over {@code parallelism} parallel bucket subtasks.
   */
  public static DataStream<Row> plan(DataStream<Row> ticks, String strategies, int buckets, int parallelism) {
    if (parallelism < 1) {
      throw new IllegalArgumentException("pairs: parallelism must be >= 1, got " + parallelism);
    }
    int configured = ticks.getExecutionEnvironment().getMaxParallelism();
    int maxParallelism = configured > 0 ? configured : KeyGroupRangeAssignment.computeDefaultMaxParallelism(parallelism);
    int n = PairsLayout.fromJson(strategies, buckets, null).buckets.size();
    PairsLayout layout = PairsLayout.fromJson(strategies, buckets, spreadKeys(n, maxParallelism, parallelism));
    RowTypeInfo tickType = (RowTypeInfo) ticks.getType();
    int[] at = new int[TICK_COLUMNS.length];
    for (int i = 0; i < at.length; i++) {
      at[i] = tickType.getFieldIndex(TICK_COLUMNS[i]);
      if (at[i] < 0) {
        throw new IllegalArgumentException("pairs: the ticks have no column " + TICK_COLUMNS[i] + " (they have "
            + String.join(", ", tickType.getFieldNames()) + ")");
      }
    }
    SingleOutputStreamOperator<Partial> partials = ticks
        .process(new Partials(layout, at), TypeInformation.of(Partial.class))
        .name("cepkit pairs partials (JVM)").uid("cepkit-pairs-partials")
        .setParallelism(ticks.getParallelism());
    return partials
        .keyBy(new KeyOf(), Types.INT)
        .process(new Buckets(layout), new RowTypeInfo(OUTPUT_TYPES, OUTPUT_COLUMNS))
        .name("cepkit pairs buckets (JVM)").uid("cepkit-pairs-buckets")
        .setParallelism(parallelism).setMaxParallelism(maxParallelism);
  }

  /** n key values that Flink's key groups put on subtasks 0, 1, 2, ... round-robin (keys 0, 1, ...
   * would not spread: two of them may share a subtask, and with it all the work). */
  static int[] spreadKeys(int n, int maxParallelism, int parallelism) {
    int[] keys = new int[n];
    int found = 0;
    for (int k = 0; found < n; k++) {
      if (KeyGroupRangeAssignment.assignKeyToParallelOperator(k, maxParallelism, parallelism)
          == found % parallelism) {
        keys[found++] = k;
      }
    }
    return keys;
  }

  static final class KeyOf implements KeySelector<Partial, Integer> {
    private static final long serialVersionUID = 1L;

    @Override
    public Integer getKey(Partial p) {
      return p.key;
    }
  }

  /** Ticks to partial rows ({@link PairsPartials}), its open granule's sums in operator state. */
  static final class Partials extends ProcessFunction<Row, Partial> implements CheckpointedFunction {
    private static final long serialVersionUID = 1L;
    private final PairsLayout layout;
    private final int[] at;       // where TICK_COLUMNS are in a tick Row
    private transient PairsPartials partials;
    private transient ListState<long[]> saved;
    private transient Collector<Partial> current;
    private transient PairsPartials.Out out;

    Partials(PairsLayout layout, int[] at) {
      this.layout = layout;
      this.at = at;
    }

    @Override
    public void initializeState(FunctionInitializationContext context) throws Exception {
      partials = new PairsPartials(layout);
      out = (key, granule, code, cnt, sum, price, offset, tickTs, ts, ingestTs) ->
          current.collect(new Partial(key, granule, code, cnt, sum, price, offset, tickTs, ts, ingestTs));
      saved = context.getOperatorStateStore().getListState(
          new ListStateDescriptor<>("pairs-partials", PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO));
      if (context.isRestored()) {
        int n = 0;
        for (long[] s : saved.get()) {
          partials.restore(s);
          n++;
        }
        if (n > 1) {
          throw new IllegalStateException("pairs partials: " + n + " states restored, for one task");
        }
      }
    }

    @Override
    public void snapshotState(FunctionSnapshotContext context) throws Exception {
      saved.update(List.of(partials.state()));
    }

    @Override
    public void processElement(Row t, Context ctx, Collector<Partial> collector) {
      current = collector;
      partials.tick((String) t.getField(at[0]), ((Number) t.getField(at[1])).longValue(),
          (Long) t.getField(at[2]), (Long) t.getField(at[3]), (Long) t.getField(at[4]), (Long) t.getField(at[5]),
          out);
    }
  }

  /** Each bucket's strategies over its partial rows, state in Flink keyed state (one bucket per key). */
  static final class Buckets extends KeyedProcessFunction<Integer, Partial, Row> {
    private static final long serialVersionUID = 1L;
    private final PairsLayout layout;
    private transient Map<Integer, PairsBucket> logic;
    private transient PairsBucket.Store store;
    private transient Collector<Row> current;
    private transient PairsBook.Out out;

    Buckets(PairsLayout layout) {
      this.layout = layout;
    }

    @Override
    public void open(OpenContext context) {
      TypeInformation<byte[]> bytes = PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO;
      // The handles act on the key being handled, so one store serves every bucket.
      ValueState<byte[]> clock = getRuntimeContext().getState(new ValueStateDescriptor<>("clock", bytes));
      MapState<Integer, byte[]> symbols = getRuntimeContext().getMapState(
          new MapStateDescriptor<>("symbols", Types.INT, bytes));
      ValueState<byte[]> books = getRuntimeContext().getState(new ValueStateDescriptor<>("books", bytes));
      store = new PairsBucket.Store() {
        @Override
        public byte[] clock() {
          try {
            return clock.value();
          } catch (Exception e) {
            throw new IllegalStateException("pairs: reading a bucket's clock: " + e, e);
          }
        }

        @Override
        public void clock(byte[] record) {
          try {
            clock.update(record);
          } catch (Exception e) {
            throw new IllegalStateException("pairs: writing a bucket's clock: " + e, e);
          }
        }

        @Override
        public byte[] symbol(int code) {
          try {
            return symbols.get(code);
          } catch (Exception e) {
            throw new IllegalStateException("pairs: reading a bucket's symbol: " + e, e);
          }
        }

        @Override
        public void symbol(int code, byte[] record) {
          try {
            symbols.put(code, record);
          } catch (Exception e) {
            throw new IllegalStateException("pairs: writing a bucket's symbol: " + e, e);
          }
        }

        @Override
        public byte[] books() {
          try {
            return books.value();
          } catch (Exception e) {
            throw new IllegalStateException("pairs: reading a bucket's books: " + e, e);
          }
        }

        @Override
        public void books(byte[] record) {
          try {
            books.update(record);
          } catch (Exception e) {
            throw new IllegalStateException("pairs: writing a bucket's books: " + e, e);
          }
        }
      };
      // A task's buckets start unattached: what a bucket keeps decoded is only valid within the
      // task that read it from keyed state (a restored job's tasks read it again).
      logic = new HashMap<>();
      for (int b = 0; b < layout.keys.length; b++) {
        logic.put(layout.keys[b], new PairsBucket(layout.buckets.get(b), layout.granuleMs));
      }
      out = new PairsBook.Out() {
        @Override
        public void indicator(String strategy, double ratio, double avg, double upper, double lower, long tickTs,
                              long ts, long ingestTs) {
          current.collect(Row.of(PairsBook.indicatorRow(strategy, ratio, avg, upper, lower, tickTs, ts, ingestTs)));
        }

        @Override
        public void order(String strategy, String type, String symbol, long price, long size, long tickTs, long ts,
                          long ingestTs) {
          current.collect(Row.of(PairsBook.orderRow(strategy, type, symbol, price, size, tickTs, ts, ingestTs)));
        }
      };
    }

    @Override
    public void processElement(Partial p, Context ctx, Collector<Row> collector) {
      PairsBucket bucket = logic.get(ctx.getCurrentKey());
      if (bucket == null) {
        throw new IllegalStateException("pairs: no bucket has key " + ctx.getCurrentKey());
      }
      if (!bucket.attached()) {
        bucket.attach(store);
      }
      current = collector;
      bucket.process(p.granule, p.code, p.cnt, p.sum, p.price, p.tickTs, p.ts, p.ingestTs, out);
      // Written after every row: a checkpoint may come between any two.
      bucket.flush();
    }
  }
}
