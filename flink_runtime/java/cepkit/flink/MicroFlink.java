package cepkit.flink;

import cepkit.logic.Event;
import cepkit.logic.MicroQuery;
import cepkit.logic.Out;
import cepkit.logic.PatternLogic;
import cepkit.logic.SeqCandidates;
import cepkit.logic.StreamLogic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSchemaCompatibility;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * A microbenchmark query whose Flink plan is the kit's Java logic ({@code cepkit.logic}: count
 * windows, time windows, window joins, patterns; specs/TRANSLATION.md, "Microbenchmarks on
 * Flink") as Flink user code in a keyed, checkpointed operator, all in the JVM.
 * flink_runtime/micro.py builds it in the program's JVM through py4j ({@link #plan}) over the
 * feed's event Rows and sends its Rows to the harness sink (HarnessSink).
 *
 * <ol>
 *   <li>{@link Select}, chained to the feed: the query's events ({@link MicroQuery#relevant}; the
 *   others are dropped before the shuffle) as {@link Ev}, with their state key;</li>
 *   <li>{@code keyBy(state key)} into {@link Logic}, a {@code KeyedProcessFunction} with the job's
 *   parallelism. A whole-stream query (count window, time window, window join, pattern without a
 *   key) is one key, picked so that the i-th such query lands on subtask i mod parallelism; its state is the
 *   logic object itself in a {@code ValueState} whose serializer ({@link LogicSerializer}) writes
 *   the logic's bytes only when Flink snapshots or copies it (the heap backend keeps the object).
 *   A keyed pattern is keyed by its key value: the key's candidates are records in a
 *   {@code MapState} and two counters in a {@code ValueState} ({@link SeqCandidates}), and an
 *   event-time timer at the oldest candidate's expiry prunes a key that gets no more events, so
 *   idle keys hold nothing after their window.</li>
 * </ol>
 *
 * <p>Order. The logic needs each state group's events in feed order (offset), and answers each
 * event as it comes. The events come from one task in feed order (the JVM feed read as one split,
 * or the Python feed's one task), and one upstream task sends to each keyed subtask over one
 * channel, which keeps that order: every key gets its events in feed order (the logic refuses a TS
 * that goes back: it never answers wrong). More splits would interleave blocks of the feed; sorting
 * them back at the watermark (as Flink's CEP operator does) cannot answer the events at the run's
 * last TS, which no watermark ever passes (the run ends without a final watermark: the semantics
 * keep windows open), so the programs read one split for these plans (flink_runtime/micro.py).
 */
public final class MicroFlink {
  private MicroFlink() {
  }

  /** The columns of a feed Row the plan reads, by name (FeedSource's Rows; the Python feed's). */
  static final String ID = "ID";
  static final String TS = "TS";
  static final String STREAM = "stream";
  static final String OFFSET = "offset";
  static final String INGEST_TS = "ingestTS";

  /**
   * The query's plan over the feed's event Rows: its output Rows, {@code stream} (the query's id),
   * its fields in order, then {@code ingestTS}, for a HarnessSink.
   *
   * @param events      the feed's Rows (the columns ID, A1..An, TS, stream, offset, ingestTS by name)
   *                    in feed order, with their TS as timestamps and watermarks (FeedSource's; the
   *                    Python feed's through {@link #stamped}): a keyed pattern's timers prune on them
   * @param queryJson   the query literal as JSON (translators/micro_literal.py)
   * @param slot        the whole-stream query's index among the job's: its key goes to subtask slot mod parallelism
   * @param parallelism the keyed operator's parallelism
   */
  public static DataStream<Row> plan(DataStream<Row> events, String queryJson, int slot, int parallelism) {
    if (parallelism < 1) {
      throw new IllegalArgumentException("micro: parallelism must be >= 1, got " + parallelism);
    }
    MicroQuery q = MicroQuery.fromJson(queryJson);
    RowTypeInfo type = (RowTypeInfo) events.getType();
    int[] at = columns(type, q);
    int configured = events.getExecutionEnvironment().getMaxParallelism();
    int maxParallelism = configured > 0 ? configured
        : KeyGroupRangeAssignment.computeDefaultMaxParallelism(parallelism);
    long whole = q.keyed() ? 0L : wholeKey(slot % parallelism, maxParallelism, parallelism);
    String[] fields = q.fields();
    String[] names = new String[fields.length + 2];
    TypeInformation<?>[] types = new TypeInformation<?>[fields.length + 2];
    names[0] = STREAM;
    types[0] = Types.STRING;
    String[] logical = q.types();
    for (int i = 0; i < fields.length; i++) {
      names[i + 1] = fields[i];
      types[i + 1] = logical[i].equals("int") ? Types.INT : logical[i].equals("long") ? Types.LONG : Types.DOUBLE;
    }
    names[fields.length + 1] = INGEST_TS;
    types[fields.length + 1] = Types.LONG;
    String how = q.keyed() ? "keyed by its key value" : "one key, the whole stream";
    return events
        .flatMap(new Select(queryJson, at, whole), TypeInformation.of(Ev.class))
        .name("cepkit " + q.id() + " events (JVM)").setParallelism(events.getParallelism())
        .keyBy(new KeyOf(), Types.LONG)
        .process(new Logic(queryJson), new RowTypeInfo(types, names))
        .name("cepkit " + q.id() + " " + q.kind() + " (JVM logic, " + how + ")").uid("cepkit-micro-" + q.id())
        .setParallelism(parallelism).setMaxParallelism(maxParallelism);
  }

  /**
   * The Rows with their TS as timestamps and a watermark of the highest TS so far minus 1 ms (Flink's
   * monotonous watermark; the events come in TS order), at the Rows' parallelism.
   */
  public static DataStream<Row> stamped(DataStream<Row> events) {
    final int ts = ((RowTypeInfo) events.getType()).getFieldIndex(TS);
    if (ts < 0) {
      throw new IllegalArgumentException("micro: the events have no column " + TS);
    }
    return events.assignTimestampsAndWatermarks(WatermarkStrategy.<Row>forMonotonousTimestamps()
        .withTimestampAssigner((row, previous) -> ((Number) row.getField(ts)).longValue()))
        .name("cepkit event time").setParallelism(events.getParallelism());
  }

  /** Positions in the Rows of: ID, TS, stream, offset, ingestTS, then A1..A{attributes}. */
  static int[] columns(RowTypeInfo type, MicroQuery q) {
    List<String> wanted = new ArrayList<>(List.of(ID, TS, STREAM, OFFSET, INGEST_TS));
    for (int k = 1; k <= q.attributes(); k++) {
      wanted.add("A" + k);
    }
    int[] at = new int[wanted.size()];
    for (int i = 0; i < at.length; i++) {
      at[i] = type.getFieldIndex(wanted.get(i));
      if (at[i] < 0) {
        throw new IllegalArgumentException("query " + q.id() + ": the events have no column " + wanted.get(i)
            + " (they have " + String.join(", ", type.getFieldNames()) + ")");
      }
    }
    return at;
  }

  /** A key that Flink's key groups put on {@code subtask} (a whole-stream query's one key). */
  static long wholeKey(int subtask, int maxParallelism, int parallelism) {
    for (long k = 0; ; k++) {
      if (KeyGroupRangeAssignment.assignKeyToParallelOperator(k, maxParallelism, parallelism) == subtask) {
        return k;
      }
    }
  }

  /** One relevant event of a query, as it crosses the shuffle (a Flink POJO). */
  public static final class Ev {
    public long key;
    public int stream;
    public int id;
    public double[] a;
    public long ts;
    public long offset;
    public long ingestTs;

    public Ev() {
    }
  }

  static final class KeyOf implements KeySelector<Ev, Long> {
    private static final long serialVersionUID = 1L;

    @Override
    public Long getKey(Ev e) {
      return e.key;
    }
  }

  /** Feed Rows to the query's relevant events, with their state keys. */
  static final class Select extends RichFlatMapFunction<Row, Ev> {
    private static final long serialVersionUID = 1L;
    private final String queryJson;
    private final int[] at;
    private final long whole;
    private transient MicroQuery q;
    private transient String[] inputs;
    private transient Event event;

    Select(String queryJson, int[] at, long whole) {
      this.queryJson = queryJson;
      this.at = at;
      this.whole = whole;
    }

    @Override
    public void open(OpenContext context) {
      q = MicroQuery.fromJson(queryJson);
      inputs = q.inputs();
      event = new Event();
    }

    @Override
    public void flatMap(Row row, Collector<Ev> out) {
      Object name = row.getField(at[2]);
      int stream = -1;
      for (int i = 0; i < inputs.length; i++) {
        if (inputs[i].equals(name)) {
          stream = i;
          break;
        }
      }
      if (stream < 0) {
        return;
      }
      double[] a = new double[at.length - 5];
      for (int k = 0; k < a.length; k++) {
        a[k] = ((Number) row.getField(at[5 + k])).doubleValue();
      }
      Event e = event.set(stream, ((Number) row.getField(at[0])).intValue(), a,
          ((Number) row.getField(at[1])).longValue(), ((Number) row.getField(at[3])).longValue(),
          ((Number) row.getField(at[4])).longValue());
      if (!q.relevant(e)) {
        return;
      }
      Ev x = new Ev();
      x.key = q.keyed() ? q.stateKey(e) : whole;
      x.stream = e.stream;
      x.id = e.id;
      x.a = a;
      x.ts = e.ts;
      x.offset = e.offset;
      x.ingestTs = e.ingestTs;
      out.collect(x);
    }
  }

  /** The query's logic per key (see the class doc). */
  static final class Logic extends KeyedProcessFunction<Long, Ev, Row> {
    private static final long serialVersionUID = 1L;
    private final String queryJson;
    private transient MicroQuery q;
    private transient PatternLogic keyed;
    private transient ValueState<StreamLogic> whole;
    private transient SeqCandidates.Store store;
    private transient Event event;
    private transient Out out;
    private transient Collector<Row> current;

    Logic(String queryJson) {
      this.queryJson = queryJson;
    }

    @Override
    public void open(OpenContext context) {
      q = MicroQuery.fromJson(queryJson);
      event = new Event();
      final String id = q.id();
      out = (values, ingestTs) -> {
        Row r = new Row(values.length + 2);
        r.setField(0, id);
        for (int i = 0; i < values.length; i++) {
          r.setField(i + 1, values[i]);
        }
        r.setField(values.length + 1, ingestTs);
        current.collect(r);
      };
      if (q.keyed()) {
        keyed = (PatternLogic) q;
        store = new KeyedStore(
            getRuntimeContext().getMapState(new MapStateDescriptor<>("candidates", Types.LONG,
                PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO)),
            getRuntimeContext().getState(new ValueStateDescriptor<>("counters",
                PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO)));
      } else {
        whole = getRuntimeContext().getState(new ValueStateDescriptor<>("logic", new LogicSerializer(queryJson)));
      }
    }

    /** One event of the current key, in feed order. */
    @Override
    public void processElement(Ev x, Context ctx, Collector<Row> collector) throws IOException {
      current = collector;
      Event e = event.set(x.stream, x.id, x.a, x.ts, x.offset, x.ingestTs);
      if (keyed != null) {
        SeqCandidates c = new SeqCandidates(store);
        keyed.process(e, c, out);
        c.flush();
        long expiry = keyed.expiry(c);
        if (expiry != Long.MAX_VALUE) {
          ctx.timerService().registerEventTimeTimer(expiry);    // the same time again is one timer
        }
        return;
      }
      StreamLogic s = whole.value();
      if (s == null) {
        s = q.newLogic();
      }
      s.process(e, out);
      whole.update(s);
    }

    /** A keyed pattern's key whose oldest candidate has expired (the watermark passed it): pruned, so a
     * key that gets no more events holds nothing after its window. */
    @Override
    public void onTimer(long ts, OnTimerContext ctx, Collector<Row> collector) {
      SeqCandidates c = new SeqCandidates(store);
      if (c.size() > 0) {
        keyed.prune(c, ts);
        c.flush();
        long expiry = keyed.expiry(c);
        if (expiry != Long.MAX_VALUE) {
          ctx.timerService().registerEventTimeTimer(expiry);
        }
      }
    }
  }

  /** A keyed pattern's candidates of the current key in Flink keyed state. */
  static final class KeyedStore implements SeqCandidates.Store {
    private final MapState<Long, byte[]> records;
    private final ValueState<long[]> counters;

    KeyedStore(MapState<Long, byte[]> records, ValueState<long[]> counters) {
      this.records = records;
      this.counters = counters;
    }

    @Override
    public long[] counters() {
      try {
        return counters.value();
      } catch (IOException e) {
        throw new IllegalStateException("pattern: reading a key's counters: " + e, e);
      }
    }

    @Override
    public void counters(long head, long tail) {
      try {
        if (head == tail) {
          counters.clear();       // the key holds nothing: no state left behind
        } else {
          counters.update(new long[] {head, tail});
        }
      } catch (IOException e) {
        throw new IllegalStateException("pattern: writing a key's counters: " + e, e);
      }
    }

    @Override
    public byte[] get(long seq) {
      try {
        return records.get(seq);
      } catch (Exception e) {
        throw new IllegalStateException("pattern: reading a candidate: " + e, e);
      }
    }

    @Override
    public void put(long seq, byte[] record) {
      try {
        records.put(seq, record);
      } catch (Exception e) {
        throw new IllegalStateException("pattern: writing a candidate: " + e, e);
      }
    }

    @Override
    public void remove(long seq) {
      try {
        records.remove(seq);
      } catch (Exception e) {
        throw new IllegalStateException("pattern: removing a candidate: " + e, e);
      }
    }
  }

  /**
   * A whole-stream logic object as Flink state: the heap state backend keeps the object itself (no
   * bytes per event); a snapshot, and the copy the heap backend makes of a value a snapshot still
   * holds, go through the logic's own bytes ({@link StreamLogic#toBytes}, {@link MicroQuery#restore}).
   * Both lock the object: a snapshot's thread may write it while the task's thread copies it.
   */
  public static final class LogicSerializer extends TypeSerializer<StreamLogic> {
    private static final long serialVersionUID = 1L;
    private final String queryJson;
    private transient MicroQuery q;

    public LogicSerializer(String queryJson) {
      this.queryJson = queryJson;
    }

    private MicroQuery query() {
      if (q == null) {
        q = MicroQuery.fromJson(queryJson);
      }
      return q;
    }

    private static byte[] bytes(StreamLogic s) {
      synchronized (s) {
        return s.toBytes();
      }
    }

    @Override
    public boolean isImmutableType() {
      return false;
    }

    @Override
    public TypeSerializer<StreamLogic> duplicate() {
      return new LogicSerializer(queryJson);
    }

    @Override
    public StreamLogic createInstance() {
      return query().newLogic();
    }

    @Override
    public StreamLogic copy(StreamLogic from) {
      return query().restore(bytes(from));
    }

    @Override
    public StreamLogic copy(StreamLogic from, StreamLogic reuse) {
      return copy(from);
    }

    @Override
    public int getLength() {
      return -1;
    }

    @Override
    public void serialize(StreamLogic s, DataOutputView target) throws IOException {
      byte[] b = bytes(s);
      target.writeInt(b.length);
      target.write(b);
    }

    @Override
    public StreamLogic deserialize(DataInputView source) throws IOException {
      byte[] b = new byte[source.readInt()];
      source.readFully(b);
      return query().restore(b);
    }

    @Override
    public StreamLogic deserialize(StreamLogic reuse, DataInputView source) throws IOException {
      return deserialize(source);
    }

    @Override
    public void copy(DataInputView source, DataOutputView target) throws IOException {
      int n = source.readInt();
      target.writeInt(n);
      target.write(source, n);
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof LogicSerializer && ((LogicSerializer) o).queryJson.equals(queryJson);
    }

    @Override
    public int hashCode() {
      return queryJson.hashCode();
    }

    @Override
    public TypeSerializerSnapshot<StreamLogic> snapshotConfiguration() {
      return new LogicSnapshot(queryJson);
    }
  }

  /** The serializer's configuration in a checkpoint: the query literal its bytes belong to. */
  public static final class LogicSnapshot implements TypeSerializerSnapshot<StreamLogic> {
    private String queryJson;

    public LogicSnapshot() {
    }

    LogicSnapshot(String queryJson) {
      this.queryJson = queryJson;
    }

    @Override
    public int getCurrentVersion() {
      return 1;
    }

    @Override
    public void writeSnapshot(DataOutputView out) throws IOException {
      byte[] b = queryJson.getBytes(java.nio.charset.StandardCharsets.UTF_8);
      out.writeInt(b.length);
      out.write(b);
    }

    @Override
    public void readSnapshot(int version, DataInputView in, ClassLoader loader) throws IOException {
      byte[] b = new byte[in.readInt()];
      in.readFully(b);
      queryJson = new String(b, java.nio.charset.StandardCharsets.UTF_8);
    }

    @Override
    public TypeSerializer<StreamLogic> restoreSerializer() {
      return new LogicSerializer(queryJson);
    }

    @Override
    public TypeSerializerSchemaCompatibility<StreamLogic> resolveSchemaCompatibility(
        TypeSerializerSnapshot<StreamLogic> old) {
      return old instanceof LogicSnapshot && queryJson.equals(((LogicSnapshot) old).queryJson)
          ? TypeSerializerSchemaCompatibility.compatibleAsIs()
          : TypeSerializerSchemaCompatibility.incompatible();
    }
  }
}
