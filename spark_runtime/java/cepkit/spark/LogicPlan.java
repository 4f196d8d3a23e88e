package cepkit.spark;

import cepkit.logic.Event;
import cepkit.logic.MicroQuery;
import cepkit.logic.Out;
import cepkit.logic.PatternLogic;
import cepkit.logic.ChunkCandidates;
import cepkit.logic.StreamLogic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

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
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Count windows (Q2), window joins (Q5/J1) and patterns (Q7) as engine user code in Spark: the
 * shared Java logic ({@code cepkit.logic}, the twins of runtime_common/micro_cores) inside one JVM
 * {@code transformWithState} for all such queries of a workload (specs/TRANSLATION.md).
 *
 * <ol>
 *   <li>In the source's tasks ({@link Routes}, a {@code mapPartitions}), each event becomes one
 *   routed row per query it is {@link MicroQuery#relevant} to (a pattern's element predicates are
 *   checked here, so an event neither element can use never crosses the shuffle), carrying only
 *   the A values the query reads, grouped by (query, state key): a keyed pattern's key value, 0
 *   for a whole-stream query (one group, one task).</li>
 *   <li>In micro-batch mode a source task sends each group one {@link #BUNDLE} row per batch
 *   ({@link Bundler}: the group's events of the task, in feed order, packed), so the shuffle and
 *   the sort Spark puts before {@code transformWithState} move one row per group and task instead
 *   of one per event; in real-time mode each routed event is its own {@link #ROUTED} row, sent as
 *   it comes.</li>
 *   <li>One shuffle by (state key, query), then {@link Processor}: a group's events are fed to its
 *   logic one at a time in feed order. A shuffle does not keep the order of a micro-batch's rows,
 *   so in micro-batch mode a group's bundles of one call (one per source task, each in feed order)
 *   are merged by offset; in real-time mode rows come in feed order (one source partition, one
 *   producer per shuffle partition) and each is handled as it is pulled, its outputs leaving at
 *   once.</li>
 * </ol>
 *
 * State, in Spark's state store: a pattern's candidates one record per call that added any ({@code
 * candidates}, a map from chunk number to the chunk) and four counters ({@code counters}), through
 * {@link ChunkCandidates}: a key's call costs a few state operations however many events it has,
 * and nothing rewrites a key's window. A count window or window join is one group whose logic (its
 * last {@code rows} events) is {@code logic}: read once per task, written after each call.
 */
public final class LogicPlan {
  // The state key first: Spark sorts a batch by the grouping columns with the first one's value as
  // the sort prefix, and q (one value for a workload's only query) would tie every row.
  public static final StructType KEY = new StructType()
      .add("k", DataTypes.LongType).add("q", DataTypes.IntegerType);
  public static final StructType ROUTED = new StructType()
      .add("q", DataTypes.IntegerType).add("k", DataTypes.LongType).add("s", DataTypes.IntegerType)
      .add("id", DataTypes.IntegerType).add("a", DataTypes.BinaryType).add("ts", DataTypes.LongType)
      .add("offset", DataTypes.LongType).add("ingestTS", DataTypes.LongType);
  /** A group's events of one source task in a micro-batch, in feed order ({@link Bundler}). */
  public static final StructType BUNDLE = new StructType()
      .add("k", DataTypes.LongType).add("q", DataTypes.IntegerType).add("events", DataTypes.BinaryType);
  private static final ObjectMapper JSON = new ObjectMapper();

  private LogicPlan() {
  }

  /**
   * The plan over the feed's events (ID, A1..An, TS, offset, ingestTS, and {@code stream} when the
   * dataset has several streams) for {@code queries} (a JSON list of query literals), with output
   * rows of {@code outputDdl} ("stream string, name type, ..., ingestTS long": each query's rows put
   * its fields in the columns of their names, the others null). {@code realtime}: Spark's
   * real-time mode (update output mode, rows handled as they come) instead of micro-batches.
   */
  public static Dataset<Row> plan(Dataset<Row> events, String queries, String outputDdl, boolean realtime) {
    MicroQuery[] qs = parse(queries);
    int attributes = 0;
    for (MicroQuery q : qs) {
      attributes = Math.max(attributes, q.attributes());
    }
    boolean multi = Arrays.asList(events.columns()).contains("stream");
    String[] rest = new String[attributes + 3 + (multi ? 1 : 0)];
    for (int i = 0; i < attributes; i++) {
      rest[i] = "A" + (i + 1);
    }
    rest[attributes] = "TS";
    rest[attributes + 1] = "offset";
    rest[attributes + 2] = "ingestTS";
    if (multi) {
      rest[attributes + 3] = "stream";
    }
    StructType output = StructType.fromDDL(outputDdl);
    Dataset<Row> routed = events.select("ID", rest).mapPartitions(new Routes(queries, attributes, multi, realtime),
        Encoders.row(realtime ? ROUTED : BUNDLE));
    // Grouped by key columns (a key function's AppendColumnsWithObject is not admitted in real-time mode).
    return routed.groupBy("k", "q").as(Encoders.row(KEY), Encoders.row(realtime ? ROUTED : BUNDLE))
        .transformWithState(new Processor(queries, output, realtime), TimeMode.None(),
            realtime ? OutputMode.Update() : OutputMode.Append(), Encoders.row(output));
  }

  /** The query literals of a JSON list, each as its Java logic. */
  static MicroQuery[] parse(String queries) {
    JsonNode list;
    try {
      list = JSON.readTree(queries);
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("queries: not JSON: " + e.getMessage());
    }
    if (list == null || !list.isArray() || list.size() == 0) {
      throw new IllegalArgumentException("queries: a non-empty JSON list of query literals expected");
    }
    MicroQuery[] out = new MicroQuery[list.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = MicroQuery.fromJson(list.get(i).toString());
    }
    return out;
  }

  static byte[] pack(double[] a, int n) {
    ByteBuffer b = ByteBuffer.allocate(8 * n).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < n; i++) {
      b.putDouble(a[i]);
    }
    return b.array();
  }

  static void unpack(byte[] bytes, double[] into) {
    ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < bytes.length / 8; i++) {
      into[i] = b.getDouble();
    }
  }

  /** Where {@link Routes#route} puts a routed event: one ROUTED row, or a group's bundle. */
  interface Routed {
    void add(int q, long k, int s, int id, double[] a, int n, long ts, long offset, long ingest);
  }

  /**
   * A source task's routed events: per event (ID, A1..An, TS, offset, ingestTS[, stream]) one per
   * query it is relevant to, keyed by (query, state key). Real-time mode: one ROUTED row each, row
   * by row; micro-batch mode: the task's events bundled per group ({@link Bundler}), sent at its end.
   */
  static final class Routes implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final String queries;
    private final int attributes;
    private final boolean multi;
    private final boolean realtime;

    Routes(String queries, int attributes, boolean multi, boolean realtime) {
      this.queries = queries;
      this.attributes = attributes;
      this.multi = multi;
      this.realtime = realtime;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> events) {
      MicroQuery[] qs = parse(queries);
      Map<String, int[]> streams = new HashMap<>();   // stream name -> its index in each query's inputs
      double[] a = new double[attributes];
      Event e = new Event();
      if (!realtime) {
        Bundler bundles = new Bundler(qs);
        events.forEachRemaining(r -> route(qs, streams, r, a, e, attributes, multi, bundles));
        return bundles.rows().iterator();
      }
      return new QueuedRows<Row>(events) {
        private final Routed one = (q, k, s, id, v, n, ts, offset, ingest) ->
            queued.add(RowFactory.create(q, k, s, id, pack(v, n), ts, offset, ingest));

        @Override
        protected void take(Row r) {
          route(qs, streams, r, a, e, attributes, multi, one);
        }
      };
    }

    /** The routed events of one event (in the select order of {@link LogicPlan#plan}) into {@code out}. */
    static void route(MicroQuery[] qs, Map<String, int[]> streams, Row r, double[] a, Event e, int attributes,
                      boolean multi, Routed out) {
      String name = multi ? r.getString(attributes + 4) : "S1";
      int[] index = streams.computeIfAbsent(name, n -> {
        int[] at = new int[qs.length];
        for (int i = 0; i < qs.length; i++) {
          at[i] = qs[i].streamIndex(n);
        }
        return at;
      });
      int id = ((Number) r.get(0)).intValue();
      for (int i = 0; i < attributes; i++) {
        a[i] = ((Number) r.get(1 + i)).doubleValue();
      }
      long ts = r.getLong(attributes + 1);
      long offset = r.getLong(attributes + 2);
      long ingest = r.getLong(attributes + 3);
      for (int q = 0; q < qs.length; q++) {
        if (index[q] < 0) {
          continue;
        }
        e.set(index[q], id, a, ts, offset, ingest);
        if (qs[q].relevant(e)) {
          out.add(q, qs[q].stateKey(e), index[q], id, a, qs[q].attributes(), ts, offset, ingest);
        }
      }
    }
  }

  /**
   * A source task's events of a micro-batch packed per group, each group's in feed order: per
   * event its stream index and ID (ints), TS, offset and ingestTS (longs), then the A values the
   * query reads (doubles), little-endian ({@link Bundles} reads them back).
   */
  static final class Bundler implements Routed {
    private final MicroQuery[] qs;
    private final List<Map<Long, ByteBuffer>> groups = new ArrayList<>();

    Bundler(MicroQuery[] qs) {
      this.qs = qs;
      for (int q = 0; q < qs.length; q++) {
        groups.add(new java.util.LinkedHashMap<>());
      }
    }

    @Override
    public void add(int q, long k, int s, int id, double[] a, int n, long ts, long offset, long ingest) {
      Map<Long, ByteBuffer> of = groups.get(q);
      ByteBuffer b = of.get(k);
      int size = Bundles.size(n);
      if (b == null || b.remaining() < size) {
        ByteBuffer grown = ByteBuffer.allocate(b == null ? 4 * size : 2 * b.capacity()).order(ByteOrder.LITTLE_ENDIAN);
        if (b != null) {
          b.flip();
          grown.put(b);
        }
        of.put(k, grown);
        b = grown;
      }
      b.putInt(s).putInt(id).putLong(ts).putLong(offset).putLong(ingest);
      for (int i = 0; i < n; i++) {
        b.putDouble(a[i]);
      }
    }

    /** One BUNDLE row per group. */
    List<Row> rows() {
      List<Row> out = new ArrayList<>();
      for (int q = 0; q < qs.length; q++) {
        for (Map.Entry<Long, ByteBuffer> g : groups.get(q).entrySet()) {
          ByteBuffer b = g.getValue();
          out.add(RowFactory.create(g.getKey(), q, Arrays.copyOf(b.array(), b.position())));
        }
      }
      return out;
    }
  }

  /** A group's bundles of one micro-batch call, read back and merged into feed order by offset. */
  static final class Bundles {
    private final int n;
    private final ByteBuffer[] parts;

    /** Bytes per event of a query reading {@code n} A values. */
    static int size(int n) {
      return 32 + 8 * n;
    }

    Bundles(List<byte[]> bundles, int n) {
      this.n = n;
      parts = new ByteBuffer[bundles.size()];
      for (int i = 0; i < parts.length; i++) {
        byte[] b = bundles.get(i);
        if (b.length % size(n) != 0) {
          throw new IllegalStateException("a bundle of " + b.length + " bytes is not whole events of " + size(n));
        }
        parts[i] = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
      }
    }

    /**
     * Every event to {@code group}, in feed order: each bundle is in feed order (one source task's
     * contiguous offsets), so the next event is the bundle head with the least offset.
     */
    void feed(Group group, Out out) {
      long last = Long.MIN_VALUE;
      while (true) {
        int next = -1;
        long least = Long.MAX_VALUE;
        for (int i = 0; i < parts.length; i++) {
          ByteBuffer b = parts[i];
          if (b.hasRemaining()) {
            long offset = b.getLong(b.position() + 16);
            if (offset < least) {
              least = offset;
              next = i;
            }
          }
        }
        if (next < 0) {
          return;
        }
        if (least <= last) {
          throw new IllegalStateException("bundled events out of feed order: offset " + least + " after " + last);
        }
        last = least;
        ByteBuffer b = parts[next];
        int s = b.getInt();
        int id = b.getInt();
        long ts = b.getLong();
        long offset = b.getLong();
        long ingest = b.getLong();
        double[] a = group.a;
        for (int i = 0; i < n; i++) {
          a[i] = b.getDouble();
        }
        group.take(s, id, ts, offset, ingest, out);
      }
    }
  }

  /** What a group's logic keeps in Spark's state store (or, in the tests, in memory). */
  interface States {
    /** A whole-stream group's logic bytes, or null. */
    byte[] logic();

    void logic(byte[] bytes);

    /** A pattern group's candidates. */
    ChunkCandidates.Store candidates();
  }

  /**
   * One call's work for one group: open it, feed it its events in feed order, end it (which
   * writes what changed). A pattern (keyed or not) keeps its candidates in the group's records; a
   * whole-stream logic is read once per task ({@code live}, which a task starts empty) and
   * written at the end of each call.
   */
  static final class Group {
    private final MicroQuery q;
    private final States states;
    private final ChunkCandidates candidates;
    private final StreamLogic logic;
    private final Event e = new Event();
    final double[] a;

    Group(MicroQuery q, int qi, States states, Map<Integer, StreamLogic> live) {
      this.q = q;
      this.states = states;
      this.a = new double[q.attributes()];
      if (q instanceof PatternLogic) {
        candidates = new ChunkCandidates(states.candidates());
        logic = null;
      } else {
        candidates = null;
        StreamLogic s = live.get(qi);
        if (s == null) {
          byte[] bytes = states.logic();
          s = bytes == null ? q.newLogic() : q.restore(bytes);
          live.put(qi, s);
        }
        logic = s;
      }
    }

    /** One routed row (ROUTED's columns). */
    void take(Row r, Out out) {
      unpack((byte[]) r.get(4), a);
      take(r.getInt(2), r.getInt(3), r.getLong(5), r.getLong(6), r.getLong(7), out);
    }

    /** One event, its A values in {@link #a}. */
    void take(int s, int id, long ts, long offset, long ingest, Out out) {
      e.set(s, id, a, ts, offset, ingest);
      if (candidates != null) {
        ((PatternLogic) q).process(e, candidates, out);
      } else {
        logic.process(e, out);
      }
    }

    void end() {
      if (candidates != null) {
        candidates.flush();
      } else {
        states.logic(logic.toBytes());
      }
    }
  }

  /** Real-time rows in feed order (the trace's interleaving of groups). */
  static final Comparator<Row> FEED_ORDER = Comparator.comparingLong(r -> r.getLong(6));

  /** Each query's output columns: where its fields, its stream name and ingestTS go in the output row. */
  static final class Placement implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final int width;
    final int stream;
    final int ingest;
    final int[][] at;

    Placement(MicroQuery[] qs, StructType output) {
      width = output.fields().length;
      List<String> names = new ArrayList<>();
      for (StructField f : output.fields()) {
        names.add(f.name());
      }
      stream = names.indexOf("stream");
      ingest = names.indexOf("ingestTS");
      if (stream < 0 || ingest < 0) {
        throw new IllegalArgumentException("output: needs columns stream and ingestTS, has " + names);
      }
      at = new int[qs.length][];
      for (int q = 0; q < qs.length; q++) {
        String[] fields = qs[q].fields();
        at[q] = new int[fields.length];
        for (int i = 0; i < fields.length; i++) {
          at[q][i] = names.indexOf(fields[i]);
          if (at[q][i] < 0) {
            throw new IllegalArgumentException("query " + qs[q].id() + ": output has no column " + fields[i]);
          }
        }
      }
    }

    Row row(MicroQuery q, int qi, Object[] values, long ingestTs) {
      Object[] row = new Object[width];
      row[stream] = q.id();
      for (int i = 0; i < values.length; i++) {
        row[at[qi][i]] = values[i];
      }
      row[ingest] = ingestTs;
      return RowFactory.create(row);
    }
  }

  /** The groups over Spark's state store. */
  static final class Processor extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private final String queries;
    private final StructType output;
    private final boolean realtime;
    private transient MicroQuery[] qs;
    private transient Placement placement;
    private transient States states;
    private transient Map<Integer, StreamLogic> live;

    Processor(String queries, StructType output, boolean realtime) {
      this.queries = queries;
      this.output = output;
      this.realtime = realtime;
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
      qs = parse(queries);
      placement = new Placement(qs, output);
      // The handles act on the group being handled, so one set serves every group.
      ValueState<byte[]> logic = getHandle().getValueState("logic", Encoders.BINARY(), TTLConfig.NONE());
      ValueState<byte[]> counters = getHandle().getValueState("counters", Encoders.BINARY(), TTLConfig.NONE());
      MapState<Long, byte[]> candidates = getHandle().getMapState("candidates", Encoders.LONG(), Encoders.BINARY(),
          TTLConfig.NONE());
      ChunkCandidates.Store store = new ChunkCandidates.Store() {
        @Override
        public long[] counters() {
          if (!counters.exists()) {
            return null;
          }
          ByteBuffer b = ByteBuffer.wrap(counters.get()).order(ByteOrder.LITTLE_ENDIAN);
          long[] c = new long[b.remaining() / 8];
          for (int i = 0; i < c.length; i++) {
            c[i] = b.getLong();
          }
          return c;
        }

        @Override
        public void counters(long[] values) {
          if (values == null) {
            counters.clear();       // nothing left: the key holds no state
          } else {
            ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
            for (long v : values) {
              b.putLong(v);
            }
            counters.update(b.array());
          }
        }

        @Override
        public byte[] get(long seq) {
          return candidates.getValue(seq);
        }

        @Override
        public void put(long seq, byte[] record) {
          candidates.updateValue(seq, record);
        }

        @Override
        public void remove(long seq) {
          candidates.removeKey(seq);
        }
      };
      states = new States() {
        @Override
        public byte[] logic() {
          return logic.exists() ? logic.get() : null;
        }

        @Override
        public void logic(byte[] bytes) {
          logic.update(bytes);
        }

        @Override
        public ChunkCandidates.Store candidates() {
          return store;
        }
      };
      // A task's whole-stream logics start unread: init runs once per task, and what a logic keeps
      // in memory is valid only within the task that read it from the store.
      live = new HashMap<>();
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(Row key, scala.collection.Iterator<Row> rows,
                                                          TimerValues timerValues) {
      int qi = key.getInt(1);
      MicroQuery q = qs[qi];
      Group group = new Group(q, qi, states, live);
      ArrayDeque<Row> out = new ArrayDeque<>();
      Out sink = (values, ingestTs) -> out.add(placement.row(q, qi, values, ingestTs));
      if (!realtime) {
        List<byte[]> bundles = new ArrayList<>();
        CollectionConverters.asJava(rows).forEachRemaining(r -> bundles.add((byte[]) r.get(2)));
        new Bundles(bundles, q.attributes()).feed(group, sink);
        group.end();
        return CollectionConverters.asScala(out.iterator());
      }
      // Rows are handled as they are pulled, so an output leaves as soon as its row came.
      Iterator<Row> lazy = new QueuedRows<Row>(CollectionConverters.asJava(rows), out) {
        @Override
        protected void take(Row r) {
          group.take(r, sink);
        }

        @Override
        protected void end() {
          group.end();
        }
      };
      return CollectionConverters.asScala(lazy);
    }
  }
}
