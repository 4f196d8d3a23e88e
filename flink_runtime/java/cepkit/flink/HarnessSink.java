package cepkit.flink;

import java.io.IOException;

import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import cepkit.wire.ArrowRows;
import cepkit.wire.FrameClient;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.flink.api.common.TaskInfo;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.types.Row;

/**
 * The harness sink as a Flink Sink V2 (flink_runtime/jvm.py puts it at the end of a query's
 * stream): answers go to the sink in Arrow batches, in the same {@code emit} frames as the Python
 * emitter's (flink_runtime/emitter.py, kit/wire/sink_client.py, harness/sink.py), with no Python on
 * their way.
 *
 * <p>Rows carry a {@code stream} column and the union of the streams' columns; each stream's
 * columns go out in its own Arrow schema (int, long, double, string, boolean; a TIMESTAMP or
 * TIMESTAMP_LTZ column as epoch milliseconds, a long: flink_runtime/tables.py
 * {@code logical_columns}).
 *
 * <p>A sender thread hands the queued rows over every {@link #FLUSH_MS} ms, so no row waits for a
 * next one; {@code flush} (before every checkpoint barrier, and at the end of input) and
 * {@code close} send what is queued in the task's thread. The sender cuts its batches at
 * watermarks: it sends the rows that came before the last watermark the writer saw, and the rows
 * after it only once they have waited {@link #HOLD_MS} ms. An operator that answers on watermarks
 * (MATCH_RECOGNIZE, windows) emits one watermark's answers key by key, not in time order; cut
 * inside such a burst, a batch could hold only answers later than where a dead job stopped while
 * the next still holds replays of its answers, and the sink's replay filter, which stops comparing
 * a sender once a batch of it is past that point (harness/replay_filter.py), would keep those
 * replays. Cut at watermarks, every batch's answers precede the next batch's in event time. Batch ids are
 * {@code flush * parallelism + subtask}, the epoch {@code <program attempt>.<task attempt>.<subtask>}:
 * a restored job sends again, in a new epoch, the answers of the events after its checkpoint, and
 * the sink's replay filter drops them (harness/replay_filter.py). A failed send fails the task at
 * its next row, flush or close: a row is never dropped. The run's secret is a constructor argument
 * (serialized with the sink into the job), never in {@link #toString()}.
 */
public final class HarnessSink implements Sink<Row> {
  private static final long serialVersionUID = 1L;
  public static final long FLUSH_MS = 10;
  // Rows that came after the last watermark are sent once they have waited this long (a stream
  // whose watermark stalls must not hold its answers back).
  public static final long HOLD_MS = 200;

  final String host;
  final int port;
  final String secret;
  final int attempt;
  final int streamIndex;
  final String streamsJson;

  /**
   * @param streamIndex the position of the {@code stream} column in the rows
   * @param streamsJson each stream's columns: {@code {"stream": [[name, logical type, position], ...]}},
   *                    types int, long, double, string, boolean, timestamp_ms
   * @param attempt     the program's attempt (the first number of the epoch)
   */
  public HarnessSink(String host, int port, String secret, int attempt, int streamIndex, String streamsJson) {
    this.host = host;
    this.port = port;
    this.secret = secret;
    this.attempt = attempt;
    this.streamIndex = streamIndex;
    this.streamsJson = streamsJson;
    Layout.of(streamsJson);       // fail where the job is built, not in its first task
  }

  @Override
  public SinkWriter<Row> createWriter(WriterInitContext context) throws IOException {
    TaskInfo task = context.getTaskInfo();
    return new Writer(this, task.getIndexOfThisSubtask(), task.getNumberOfParallelSubtasks(),
        task.getAttemptNumber());
  }

  @Override
  public String toString() {
    return "cepkit sink at " + host + ":" + port;
  }

  /** Each stream's columns: their positions in a row, whether each is a timestamp, the Arrow schema. */
  static final class Layout {
    final Map<String, int[]> positions = new LinkedHashMap<>();
    final Map<String, boolean[]> timestamps = new LinkedHashMap<>();
    final Map<String, Schema> schemas = new LinkedHashMap<>();

    static Layout of(String streamsJson) {
      Layout out = new Layout();
      for (Map.Entry<String, JsonNode> e : ArrowRows.streams(streamsJson)) {
        int n = e.getValue().size();
        int[] pos = new int[n];
        boolean[] ts = new boolean[n];
        List<Field> fields = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          JsonNode col = e.getValue().get(i);
          String type = col.get(1).asText();
          pos[i] = col.get(2).asInt();
          ts[i] = type.equals("timestamp_ms");
          fields.add(Field.nullable(col.get(0).asText(), arrowType(type, col.get(0).asText())));
        }
        out.positions.put(e.getKey(), pos);
        out.timestamps.put(e.getKey(), ts);
        out.schemas.put(e.getKey(), new Schema(fields));
      }
      return out;
    }

    private static ArrowType arrowType(String type, String name) {
      switch (type) {
        case "int":
          return new ArrowType.Int(32, true);
        case "long":
        case "timestamp_ms":
          return new ArrowType.Int(64, true);
        case "double":
          return new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE);
        case "string":
          return ArrowType.Utf8.INSTANCE;
        case "boolean":
          return ArrowType.Bool.INSTANCE;
        default:
          throw new IllegalArgumentException("cepkit sink: output column " + name + " has type " + type
              + "; the sink takes int, long, double, string, boolean and timestamp columns");
      }
    }
  }

  /** A timestamp as epoch milliseconds (the jobs run with table.local-time-zone UTC). */
  static Long epochMs(Object value) {
    if (value == null) {
      return null;
    }
    if (value instanceof LocalDateTime) {
      return ((LocalDateTime) value).toInstant(ZoneOffset.UTC).toEpochMilli();
    }
    if (value instanceof Instant) {
      return ((Instant) value).toEpochMilli();
    }
    if (value instanceof Timestamp) {
      return ((Timestamp) value).toLocalDateTime().toInstant(ZoneOffset.UTC).toEpochMilli();
    }
    return ((Number) value).longValue();
  }

  static final class Writer implements SinkWriter<Row> {
    // Rows queued and not yet sent beyond which write() waits for the sender (memory stays bounded).
    private static final int MAX_QUEUED_ROWS = 1 << 16;

    private final HarnessSink sink;
    private final Layout layout;
    private final int subtask;
    private final int parallelism;
    private final String epoch;
    private final FrameClient client;
    private final BufferAllocator alloc = new RootAllocator(Long.MAX_VALUE);
    private final Object sending = new Object();     // one send round at a time, in batch-id order
    private final Thread sender;
    private Map<String, List<Object[]>> queued;
    private Map<String, Integer> cut;              // per stream: how many queued rows came before the last watermark
    private int queuedRows;
    private long heldSince = -1;                   // when the oldest row after the last watermark was queued (ns)
    private long flushes;
    private boolean closing;
    private Throwable failure;

    Writer(HarnessSink sink, int subtask, int parallelism, int taskAttempt) {
      this.sink = sink;
      this.layout = Layout.of(sink.streamsJson);
      this.subtask = subtask;
      this.parallelism = parallelism;
      this.epoch = sink.attempt + "." + taskAttempt + "." + subtask;
      this.client = new FrameClient(sink.host, sink.port, sink.secret, "sink", 60_000, 10_000);
      this.queued = fresh();
      this.cut = new LinkedHashMap<>();
      this.sender = new Thread(this::sendLoop, "cepkit-sink-" + subtask);
      sender.setDaemon(true);
      sender.start();
    }

    private Map<String, List<Object[]>> fresh() {
      Map<String, List<Object[]>> out = new LinkedHashMap<>();
      for (String name : layout.positions.keySet()) {
        out.put(name, new ArrayList<>());
      }
      return out;
    }

    @Override
    public void write(Row row, Context context) throws IOException, InterruptedException {
      Object name = row.getField(sink.streamIndex);
      int[] pos = layout.positions.get(String.valueOf(name));
      if (pos == null) {
        throw new IllegalStateException("cepkit sink: a row of stream '" + name + "', which is not among "
            + layout.positions.keySet());
      }
      boolean[] ts = layout.timestamps.get(String.valueOf(name));
      Object[] values = new Object[pos.length];
      for (int i = 0; i < pos.length; i++) {
        Object v = row.getField(pos[i]);
        values[i] = ts[i] ? epochMs(v) : v;
      }
      synchronized (this) {
        while (queuedRows >= MAX_QUEUED_ROWS && failure == null) {
          wait();
        }
        raiseFailure();
        queued.get(String.valueOf(name)).add(values);
        queuedRows++;
        if (heldSince < 0) {
          heldSince = System.nanoTime();
        }
      }
    }

    @Override
    public void writeWatermark(org.apache.flink.api.common.eventtime.Watermark watermark) {
      synchronized (this) {
        for (Map.Entry<String, List<Object[]>> e : queued.entrySet()) {
          cut.put(e.getKey(), e.getValue().size());
        }
        heldSince = -1;
      }
    }

    @Override
    public void flush(boolean endOfInput) throws IOException {
      synchronized (this) {
        raiseFailure();
      }
      sendQueued(true);
    }

    private void raiseFailure() throws IOException {
      if (failure != null) {
        throw new IOException("cepkit sink: " + failure.getMessage(), failure);
      }
    }

    private void sendLoop() {
      try {
        while (true) {
          synchronized (this) {
            if (closing) {
              return;
            }
            wait(FLUSH_MS);
            if (closing) {
              return;
            }
          }
          sendQueued(false);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (Throwable e) {
        synchronized (this) {
          failure = e;
          notifyAll();
        }
      }
    }

    /** Send the queued rows before the last watermark (every queued row with `all`, or once the
     * rows after it have waited HOLD_MS): one emit per stream that has some, all with this round's
     * batch id. */
    private void sendQueued(boolean all) throws IOException {
      synchronized (sending) {
        Map<String, List<Object[]>> batch;
        long batchId;
        synchronized (this) {
          if (queuedRows == 0) {
            return;
          }
          if (!all && heldSince >= 0 && System.nanoTime() - heldSince >= HOLD_MS * 1_000_000L) {
            all = true;
          }
          if (all) {
            batch = queued;
            queued = fresh();
            queuedRows = 0;
            heldSince = -1;
          } else {
            batch = new LinkedHashMap<>();
            int taken = 0;
            for (Map.Entry<String, List<Object[]>> e : queued.entrySet()) {
              int n = cut.getOrDefault(e.getKey(), 0);
              List<Object[]> rows = e.getValue();
              batch.put(e.getKey(), new ArrayList<>(rows.subList(0, n)));
              rows.subList(0, n).clear();
              taken += n;
            }
            if (taken == 0) {
              return;
            }
            queuedRows -= taken;
          }
          cut.clear();
          batchId = flushes++ * parallelism + subtask;
          notifyAll();        // write() may be waiting for room
        }
        for (Map.Entry<String, List<Object[]>> e : batch.entrySet()) {
          if (e.getValue().isEmpty()) {
            continue;
          }
          ArrowRows.emit(client, e.getKey(), batchId, epoch, layout.schemas.get(e.getKey()), e.getValue(), alloc);
        }
      }
    }


    @Override
    public void close() throws Exception {
      synchronized (this) {
        closing = true;
        notifyAll();
      }
      sender.join(10_000);
      try {
        synchronized (this) {
          raiseFailure();
        }
        sendQueued(true);     // what was queued after the sender's last round
      } finally {
        client.close();
        alloc.close();
      }
    }
  }
}
