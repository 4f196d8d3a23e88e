package cepkit.spark;

import cepkit.logic.Event;
import cepkit.logic.MicroQuery;
import cepkit.logic.Out;
import cepkit.logic.PatternLogic;
import cepkit.logic.SeqCandidates;
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
 *   <li>One shuffle by (query, state key), then {@link Processor}: a group's rows are fed to its
 *   logic one at a time in feed order. A shuffle does not keep the order of a micro-batch's rows,
 *   so in micro-batch mode a group's rows of one call are sorted by offset first; in real-time mode
 *   they come in feed order (one source partition, one producer per shuffle partition) and each
 *   row is handled as it is pulled, its outputs leaving at once.</li>
 * </ol>
 *
 * State, in Spark's state store: a pattern's candidates one record per candidate ({@code
 * candidates}, a map from sequence number to {@code Candidate.toBytes()}) and two counters
 * ({@code counters}), through {@link SeqCandidates}: a candidate costs one put and one remove, and
 * nothing rewrites a key's window. A count window or window join is one group whose logic (its
 * last {@code rows} events) is {@code logic}: read once per task, written after each call.
 */
public final class LogicPlan {
  public static final StructType KEY = new StructType()
      .add("q", DataTypes.IntegerType).add("k", DataTypes.LongType);
  public static final StructType ROUTED = new StructType()
      .add("q", DataTypes.IntegerType).add("k", DataTypes.LongType).add("s", DataTypes.IntegerType)
      .add("id", DataTypes.IntegerType).add("a", DataTypes.BinaryType).add("ts", DataTypes.LongType)
      .add("offset", DataTypes.LongType).add("ingestTS", DataTypes.LongType);
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
    Dataset<Row> routed = events.select("ID", rest).mapPartitions(new Routes(queries, attributes, multi),
        Encoders.row(ROUTED));
    // Grouped by key columns (a key function's AppendColumnsWithObject is not admitted in real-time mode).
    return routed.groupBy("q", "k").as(Encoders.row(KEY), Encoders.row(ROUTED))
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

  /**
   * A source task's routed rows: per event (ID, A1..An, TS, offset, ingestTS[, stream]) one row per
   * query it is relevant to, keyed by (query, state key). Stateless, row by row.
   */
  static final class Routes implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final String queries;
    private final int attributes;
    private final boolean multi;

    Routes(String queries, int attributes, boolean multi) {
      this.queries = queries;
      this.attributes = attributes;
      this.multi = multi;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> events) {
      MicroQuery[] qs = parse(queries);
      Map<String, int[]> streams = new HashMap<>();   // stream name -> its index in each query's inputs
      double[] a = new double[attributes];
      Event e = new Event();
      return new QueuedRows<Row>(events) {
        @Override
        protected void take(Row r) {
          route(qs, streams, r, a, e, attributes, multi, queued);
        }
      };
    }

    /** The rows of one event (in the select order of {@link LogicPlan#plan}) into {@code out}. */
    static void route(MicroQuery[] qs, Map<String, int[]> streams, Row r, double[] a, Event e, int attributes,
                      boolean multi, java.util.Collection<Row> out) {
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
          out.add(RowFactory.create(q, qs[q].stateKey(e), index[q], id, pack(a, qs[q].attributes()), ts, offset,
              ingest));
        }
      }
    }
  }

  /** What a group's logic keeps in Spark's state store (or, in the tests, in memory). */
  interface States {
    /** A whole-stream group's logic bytes, or null. */
    byte[] logic();

    void logic(byte[] bytes);

    /** A pattern group's candidates. */
    SeqCandidates.Store candidates();
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
    private final SeqCandidates candidates;
    private final StreamLogic logic;
    private final Event e = new Event();
    private final double[] a;

    Group(MicroQuery q, int qi, States states, Map<Integer, StreamLogic> live) {
      this.q = q;
      this.states = states;
      this.a = new double[q.attributes()];
      if (q instanceof PatternLogic) {
        candidates = new SeqCandidates(states.candidates());
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
      e.set(r.getInt(2), r.getInt(3), a, r.getLong(5), r.getLong(6), r.getLong(7));
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

  /** Sorts a micro-batch group's rows into feed order (a shuffle does not keep it). */
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
      SeqCandidates.Store store = new SeqCandidates.Store() {
        @Override
        public long[] counters() {
          if (!counters.exists()) {
            return null;
          }
          ByteBuffer b = ByteBuffer.wrap(counters.get()).order(ByteOrder.LITTLE_ENDIAN);
          return new long[] {b.getLong(), b.getLong()};
        }

        @Override
        public void counters(long head, long tail) {
          if (head == tail) {
            counters.clear();       // nothing left: the key holds no state
          } else {
            counters.update(ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(head).putLong(tail).array());
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
        public SeqCandidates.Store candidates() {
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
      int qi = key.getInt(0);
      MicroQuery q = qs[qi];
      Group group = new Group(q, qi, states, live);
      ArrayDeque<Row> out = new ArrayDeque<>();
      Out sink = (values, ingestTs) -> out.add(placement.row(q, qi, values, ingestTs));
      if (!realtime) {
        List<Row> batch = new ArrayList<>();
        CollectionConverters.asJava(rows).forEachRemaining(batch::add);
        batch.sort(FEED_ORDER);
        for (Row r : batch) {
          group.take(r, sink);
        }
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
