package cepkit.flink;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import com.fasterxml.jackson.databind.JsonNode;

import cepkit.wire.FeedClient;
import cepkit.wire.FrameClient;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.types.Row;

/**
 * One parallel reader of the feed: it reads its splits' offsets from the driver and turns each
 * answer's Arrow batches into Rows (FeedSource says which columns).
 *
 * <p>Reads happen in the task's own thread, inside {@code pollNext}, and every row of an answer is
 * emitted before {@code pollNext} returns. So a read the driver answered before a checkpoint was
 * triggered was emitted before that checkpoint's barrier, exactly as with the Python puller: the
 * program's commits by time and its end-of-run test ("has the restored job read everything
 * again?") keep their meaning (specs/DRIVER.md, `commit` by time and `reads`). Each read names its
 * split, so the driver follows each split's position apart and commits the least of them.
 *
 * <p>When none of its splits has a released event, the reader waits without spinning: a thread of
 * its own asks the driver ({@code latest_offset} with a wait) and wakes the task when more is
 * released.
 *
 * <p>Watermarks: each split emits, on its own output, the TS of the last event it handed out minus
 * 1 ms (Flink's monotonous watermark; the driver releases events in TS order, so a split's events
 * come in TS order). A split that has read every released event it owns while others hold the
 * events between raises its watermark to the TS of the last released event minus 1 ms (the read
 * answer's {@code last_ts}): every event it will read is released later, so its TS is no smaller.
 * Without that a split waiting for its next block would hold every window back, and at the end of
 * a run windows the last events close would never fire.
 */
final class FeedReader implements SourceReader<Row, FeedSplit> {
  static final String OFFSET = FeedClient.OFFSET;
  static final String INGEST_TS = FeedClient.INGEST_TS;
  // How long one wait for more events lasts at the driver (the waiter asks again after it).
  private static final long WAIT_MS = 1_000;
  // After the run ended the driver answers at once: the waiter then pauses this long between asks.
  private static final long IDLE_MS = 20;
  // A split's watermark moves at least every this many rows of an answer, not only at its end: a
  // restored job catching up reads its whole backlog in one answer, and one watermark step over
  // all of it makes keyed operators (MATCH_RECOGNIZE) emit the backlog's answers key by key rather
  // than in time order, which the sink's replay filter relies on (harness/replay_filter.py).
  private static final int WATERMARK_ROWS = 256;

  /** A split this reader owns, where it is, and its own output (for its watermark). */
  private static final class Owned {
    FeedSplit split;
    SourceOutput<Row> output;
    long watermark = Long.MIN_VALUE;

    Owned(FeedSplit split) {
      this.split = split;
    }
  }

  private final FeedSource source;
  private final SourceReaderContext context;
  private final List<Owned> owned = new ArrayList<>();
  private final int tsIndex;
  private FeedClient client;
  private BufferAllocator alloc;
  private int turn;

  // The waiter: asks the driver for events beyond `waitAfter` and completes `available` then.
  private final Object lock = new Object();
  private CompletableFuture<Void> available = CompletableFuture.completedFuture(null);
  private long waitAfter = -1;
  private boolean closed;
  private Throwable waiterFailure;
  private Thread waiter;

  FeedReader(FeedSource source, SourceReaderContext context) {
    this.source = source;
    this.context = context;
    this.tsIndex = source.tsIndex();
  }

  @Override
  public void start() {
    client = new FeedClient(source.host, source.port, source.secret);
    alloc = new RootAllocator(Long.MAX_VALUE);
    waiter = new Thread(this::waitLoop, "cepkit-feed-waiter-" + context.getIndexOfSubtask());
    waiter.setDaemon(true);
    waiter.start();
  }

  @Override
  public InputStatus pollNext(ReaderOutput<Row> output) throws Exception {
    synchronized (lock) {
      if (waiterFailure != null) {
        throw new IOException("cepkit feed: " + waiterFailure.getMessage(), waiterFailure);
      }
    }
    if (owned.isEmpty()) {
      output.markIdle();           // a reader without splits must not hold the job's watermark back
      return waitFor(-1);
    }
    long released = -1;
    long lastTs = Long.MIN_VALUE;    // the TS of the last released event, as the last answer said
    long lastTsReleased = -1;        // and how many events were released then
    // One read per call, the splits in turn: each answer is emitted whole before the call returns.
    for (int tries = 0; tries < owned.size(); tries++) {
      Owned o = owned.get(turn);
      turn = (turn + 1) % owned.size();
      if (o.output == null) {
        o.output = output.createOutputForSplit(o.split.splitId());
      }
      long start = o.split.next;
      FrameClient.Frame answer = read(o.split, start);
      JsonNode h = answer.header;
      long rows = h.path("rows").asLong(0);
      released = h.path("released").asLong(0);
      if (h.hasNonNull("last_ts")) {
        lastTs = h.get("last_ts").asLong();
        lastTsReleased = released;
      }
      if (rows > 0) {
        long end = h.path("end").asLong();
        long maxTs = emit(o, answer, start, rows);
        o.split = o.split.at(o.split.owned(end));
        advance(o, maxTs - 1);
        return InputStatus.MORE_AVAILABLE;
      }
    }
    // Nothing released for any split when it asked: each had every released event it owns.
    long lowest = Long.MAX_VALUE;
    for (Owned o : owned) {
      // Only a split that owns nothing below that released offset: events released after an
      // earlier answer of this round may be its own, with a smaller TS.
      if (lastTs != Long.MIN_VALUE && o.split.count > 1 && o.split.next >= lastTsReleased) {
        advance(o, lastTs - 1);
      }
      lowest = Math.min(lowest, o.split.next);
    }
    if (lowest < released) {
      return InputStatus.MORE_AVAILABLE;      // released meanwhile for a split asked earlier this round
    }
    // Woken by any release, not only of its own offsets: a split waiting for its next block still
    // raises its watermark with every release (above), or it would hold every window back until
    // its block comes, and at the end of the run for ever.
    return waitFor(released);
  }

  private FrameClient.Frame read(FeedSplit split, long start) throws IOException {
    Map<String, Object> extra = new LinkedHashMap<>();
    extra.put("max_rows", source.maxRows);
    if (split.count > 1) {
      extra.put("split", split.index);
      extra.put("splits", split.count);
      extra.put("block", split.block);
    }
    return client.read(start, split.runEnd(start), 0, extra);
  }

  private void advance(Owned o, long watermark) {
    if (watermark > o.watermark) {
      o.watermark = watermark;
      o.output.emitWatermark(new Watermark(watermark));
    }
  }

  /** Emit the answer's rows (offsets start, start + 1, ...); returns the largest TS among them. */
  private long emit(Owned o, FrameClient.Frame answer, long start, long rows) throws IOException {
    SourceOutput<Row> out = o.output;
    JsonNode served = answer.header.get("served");
    if (served == null || !served.isArray()) {
      throw new IOException(client.where() + ": read answer has no `served` runs (a driver of another cepkit version?)");
    }
    int run = 0;
    long runLeft = served.size() > 0 ? served.get(0).get(0).asLong() : 0;
    long runMs = served.size() > 0 ? served.get(0).get(1).asLong() : 0;
    long offset = start;
    long maxTs = Long.MIN_VALUE;
    int width = source.names.length;
    int driverColumns = source.driverColumns;
    try (ArrowStreamReader reader = new ArrowStreamReader(new ByteArrayInputStream(answer.body), alloc)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      check(root.getSchema().getFields());
      while (reader.loadNextBatch()) {
        int n = root.getRowCount();
        List<FieldVector> vectors = root.getFieldVectors();
        Object[][] columns = new Object[driverColumns][];
        for (int c = 0; c < driverColumns; c++) {
          columns[c] = values(vectors.get(c), n);
        }
        BigIntVector tsVector = (BigIntVector) vectors.get(tsIndex);
        for (int r = 0; r < n; r++) {
          while (runLeft == 0) {
            run++;
            if (run >= served.size()) {
              throw new IOException(client.where() + ": read answer: served runs cover fewer rows than it holds");
            }
            runLeft = served.get(run).get(0).asLong();
            runMs = served.get(run).get(1).asLong();
          }
          runLeft--;
          Row row = new Row(width);
          for (int c = 0; c < driverColumns; c++) {
            row.setField(c, columns[c][r]);
          }
          row.setField(driverColumns, offset++);
          row.setField(driverColumns + 1, runMs);
          for (int j = 0; j < source.constants.length; j++) {
            row.setField(driverColumns + 2 + j, source.constants[j]);
          }
          long ts = tsVector.get(r);
          maxTs = Math.max(maxTs, ts);
          out.collect(row, ts);
          if ((offset - start) % WATERMARK_ROWS == 0) {
            advance(o, maxTs - 1);
          }
        }
      }
    }
    if (offset - start != rows) {
      throw new IOException(client.where() + ": read answer: " + (offset - start) + " rows, not " + rows);
    }
    return maxTs;
  }

  private static Object[] values(FieldVector v, int n) {
    Object[] out = new Object[n];
    for (int r = 0; r < n; r++) {
      if (v.isNull(r)) {
        continue;
      }
      if (v instanceof IntVector) {
        out[r] = ((IntVector) v).get(r);
      } else if (v instanceof BigIntVector) {
        out[r] = ((BigIntVector) v).get(r);
      } else if (v instanceof Float8Vector) {
        out[r] = ((Float8Vector) v).get(r);
      } else if (v instanceof VarCharVector) {
        out[r] = new String(((VarCharVector) v).get(r), java.nio.charset.StandardCharsets.UTF_8);
      } else if (v instanceof BitVector) {
        out[r] = ((BitVector) v).get(r) != 0;
      } else {
        out[r] = v.getObject(r);
      }
    }
    return out;
  }

  private boolean checked;

  private void check(List<Field> fields) throws IOException {
    if (checked) {
      return;
    }
    boolean same = fields.size() == source.driverColumns;
    for (int i = 0; same && i < fields.size(); i++) {
      same = fields.get(i).getName().equals(source.names[i]);
    }
    if (!same) {
      throw new IOException(client.where() + ": the driver serves columns " + fields + ", not the program's "
          + List.of(source.names).subList(0, source.driverColumns));
    }
    checked = true;
  }

  /** NOTHING_AVAILABLE, with the waiter asked to wake the task once more than `after` is released. */
  private InputStatus waitFor(long after) {
    synchronized (lock) {
      if (available.isDone()) {
        available = new CompletableFuture<>();
      }
      waitAfter = after;
      lock.notifyAll();
    }
    return InputStatus.NOTHING_AVAILABLE;
  }

  private void waitLoop() {
    try (FeedClient asker = new FeedClient(source.host, source.port, source.secret)) {
      while (true) {
        long after;
        CompletableFuture<Void> wake;
        synchronized (lock) {
          while (!closed && (waitAfter < 0 || available.isDone())) {
            lock.wait();
          }
          if (closed) {
            return;
          }
          after = waitAfter;
          wake = available;
        }
        long released = asker.latestOffset(after, WAIT_MS);
        if (released > after) {
          synchronized (lock) {
            if (available == wake) {
              waitAfter = -1;
            }
          }
          wake.complete(null);
        } else {
          Thread.sleep(IDLE_MS);   // the run ended (the driver answers at once) or the wait ran out
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Throwable e) {
      CompletableFuture<Void> wake;
      synchronized (lock) {
        if (closed) {
          return;
        }
        waiterFailure = e;
        wake = available;
      }
      wake.complete(null);        // pollNext raises it
    }
  }

  @Override
  public List<FeedSplit> snapshotState(long checkpointId) {
    List<FeedSplit> out = new ArrayList<>(owned.size());
    for (Owned o : owned) {
      out.add(o.split);
    }
    return out;
  }

  @Override
  public CompletableFuture<Void> isAvailable() {
    synchronized (lock) {
      return available;
    }
  }

  @Override
  public void addSplits(List<FeedSplit> splits) {
    for (FeedSplit s : splits) {
      owned.add(new Owned(s));
    }
    synchronized (lock) {
      available.complete(null);
    }
  }

  @Override
  public void notifyNoMoreSplits() {
  }

  @Override
  public void close() throws Exception {
    Thread w;
    synchronized (lock) {
      closed = true;
      lock.notifyAll();
      w = waiter;
    }
    if (w != null) {
      w.interrupt();
      w.join(5_000);
    }
    if (client != null) {
      client.close();
    }
    if (alloc != null) {
      alloc.close();
    }
  }
}
