package cepkit.spark;

import cepkit.wire.ArrowRows;
import cepkit.wire.FrameClient;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The harness sink as a JVM {@link ForeachWriter}: each output row goes to the sink as soon as the
 * writer can send it, as Arrow IPC in the sink's {@code emit} frames (kit/wire/sink_client.py,
 * harness/sink.py). Real-time mode allows a foreach sink but no Python in the query, and its
 * batches last seconds, so the micro-batch path (foreachBatch collecting a whole batch in Python)
 * cannot serve it.
 *
 * <p>Rows are sent by one sender thread per task: it wakes when the first row is queued and sends
 * everything queued by then, one frame per output stream; rows that arrive meanwhile go in its next
 * round. So a lone row leaves at once and a burst leaves in a few frames: no row waits for a timer.
 * A refused or failed send fails the task at its next row or at its end: a row is never dropped.
 *
 * <p>Each task's emits carry the epoch {@code <generation>.<task attempt number>.<batch>.<partition>}
 * and count their batch ids from 0, so the sink writes each once. The generation (the tag: the
 * program's attempt x 1000 + the query's starts in it) and Spark's attempt number of the task order
 * a re-run batch's sends after the dead batch's, whose answers the sink's replay filter then drops
 * by content (harness/replay_filter.py; specs/ENGINE_RUN.md, "Spark's real-time mode").
 */
public final class SinkWriter extends ForeachWriter<Row> {
  private static final long serialVersionUID = 1L;
  private static final String STREAM = "stream";
  // Rows queued and not yet sent beyond which process() waits for the sender (memory stays bounded).
  private static final int MAX_QUEUED_ROWS = 1 << 16;
  // Rows and emits the writers of this JVM sent: a local query's whole output (the program reports
  // them when it ends); on a cluster, only this JVM's share.
  private static final AtomicLong SENT_ROWS = new AtomicLong();
  private static final AtomicLong SENT_EMITS = new AtomicLong();

  private final String host;
  private final int port;
  private final String secret;
  private final String tag;
  private final String schemaJson;
  private final String streamsJson;

  private transient StructType schema;
  private transient int streamIndex;
  private transient Map<String, int[]> columns;        // per output stream: its columns' indexes in a row
  private transient Map<String, Schema> arrowSchemas;
  private transient Map<String, List<Object[]>> queued;
  private transient int queuedRows;
  private transient boolean closing;
  private transient Throwable failure;
  private transient Thread sender;
  private transient FrameClient client;
  private transient BufferAllocator alloc;
  private transient String epoch;
  private transient long nextBatchId;

  /**
   * @param schemaJson  the output DataFrame's schema ({@code df.schema.json()})
   * @param streamsJson each output stream's columns, {@code {"stream": ["col", ...]}}
   * @param tag         the generation of this start of the query: a number above every earlier start's
   */
  public SinkWriter(String host, int port, String secret, String schemaJson, String streamsJson, String tag) {
    this.host = host;
    this.port = port;
    this.secret = secret;
    this.schemaJson = schemaJson;
    this.streamsJson = streamsJson;
    this.tag = tag;
    prepare();            // fail where the query is built, not in its first task
  }

  private void prepare() {
    schema = (StructType) DataType.fromJson(schemaJson);
    streamIndex = schema.fieldIndex(STREAM);
    columns = new LinkedHashMap<>();
    arrowSchemas = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> e : ArrowRows.streams(streamsJson)) {
      int[] idx = new int[e.getValue().size()];
      List<Field> fields = new ArrayList<>();
      for (int i = 0; i < idx.length; i++) {
        String name = e.getValue().get(i).asText();
        idx[i] = schema.fieldIndex(name);
        fields.add(Field.nullable(name, arrowType(schema.fields()[idx[i]])));
      }
      columns.put(e.getKey(), idx);
      arrowSchemas.put(e.getKey(), new Schema(fields));
    }
  }

  private static ArrowType arrowType(StructField f) {
    DataType t = f.dataType();
    if (t.equals(DataTypes.StringType)) {
      return ArrowType.Utf8.INSTANCE;
    }
    if (t.equals(DataTypes.IntegerType)) {
      return new ArrowType.Int(32, true);
    }
    if (t.equals(DataTypes.LongType)) {
      return new ArrowType.Int(64, true);
    }
    if (t.equals(DataTypes.DoubleType)) {
      return new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE);
    }
    if (t.equals(DataTypes.BooleanType)) {
      return ArrowType.Bool.INSTANCE;
    }
    throw new IllegalArgumentException("cepkit sink: output column " + f.name() + " has type " + t.simpleString()
        + "; the sink takes string, int, long, double and boolean columns");
  }

  /** The rows the writers of this JVM have sent to the sink. */
  public static long sentRows() {
    return SENT_ROWS.get();
  }

  /** The emits (frames) the writers of this JVM have sent to the sink. */
  public static long sentEmits() {
    return SENT_EMITS.get();
  }

  @Override
  public boolean open(long partitionId, long epochId) {
    if (schema == null) {
      prepare();
    }
    TaskContext task = TaskContext.get();
    epoch = tag + "." + (task == null ? 0 : task.attemptNumber()) + "." + epochId + "." + partitionId;
    nextBatchId = 0;
    queued = new LinkedHashMap<>();
    for (String name : columns.keySet()) {
      queued.put(name, new ArrayList<>());
    }
    queuedRows = 0;
    closing = false;
    failure = null;
    client = new FrameClient(host, port, secret, "sink", 60_000, 10_000);
    alloc = FeedReaders.ROOT.newChildAllocator("cepkit-sink", 0, Long.MAX_VALUE);
    sender = new Thread(this::sendLoop, "cepkit-sink-" + partitionId + "-" + epochId);
    sender.setDaemon(true);
    sender.start();
    return true;
  }

  @Override
  public void process(Row row) {
    String name = row.getString(streamIndex);
    int[] idx = columns.get(name);
    if (idx == null) {
      throw new IllegalStateException("cepkit sink: a row of stream '" + name + "', which is not among "
          + columns.keySet());
    }
    Object[] values = new Object[idx.length];
    for (int i = 0; i < idx.length; i++) {
      values[i] = row.isNullAt(idx[i]) ? null : row.get(idx[i]);
    }
    synchronized (this) {
      while (queuedRows >= MAX_QUEUED_ROWS && failure == null) {
        waitQuietly();
      }
      if (failure != null) {
        throw new IllegalStateException("cepkit sink: " + failure.getMessage(), failure);
      }
      queued.get(name).add(values);
      queuedRows++;
      notifyAll();
    }
  }

  @Override
  public void close(Throwable errorOrNull) {
    synchronized (this) {
      closing = true;
      notifyAll();
    }
    try {
      if (sender != null) {
        sender.join();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      if (failure == null && errorOrNull == null) {
        sendQueued();         // anything queued after the sender's last round
      }
    } catch (Exception e) {
      failure = e;
    } finally {
      if (client != null) {
        client.close();
      }
      if (alloc != null) {
        alloc.close();
      }
    }
    if (failure != null && errorOrNull == null) {
      throw new IllegalStateException("cepkit sink: " + failure.getMessage(), failure);
    }
  }

  private void sendLoop() {
    try {
      while (true) {
        synchronized (this) {
          while (queuedRows == 0 && !closing) {
            waitQuietly();
          }
          if (queuedRows == 0 && closing) {
            return;
          }
        }
        sendQueued();
      }
    } catch (Throwable e) {
      synchronized (this) {
        failure = e;
        notifyAll();
      }
    }
  }

  private void waitQuietly() {
    try {
      wait();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("cepkit sink: interrupted", e);
    }
  }

  /** Send every queued row: one emit per output stream that has some. */
  private void sendQueued() throws IOException {
    Map<String, List<Object[]>> batch;
    synchronized (this) {
      if (queuedRows == 0) {
        return;
      }
      batch = queued;
      queued = new LinkedHashMap<>();
      for (String name : columns.keySet()) {
        queued.put(name, new ArrayList<>());
      }
      queuedRows = 0;
      notifyAll();        // process() may be waiting for room
    }
    for (Map.Entry<String, List<Object[]>> e : batch.entrySet()) {
      if (e.getValue().isEmpty()) {
        continue;
      }
      ArrowRows.emit(client, e.getKey(), nextBatchId++, epoch, arrowSchemas.get(e.getKey()), e.getValue(), alloc);
      SENT_ROWS.addAndGet(e.getValue().size());
      SENT_EMITS.incrementAndGet();
    }
  }

}
