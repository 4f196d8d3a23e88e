package cepkit.spark;

import cepkit.wire.FeedClient;
import cepkit.wire.FrameClient;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The feed source's readers, in Spark's executors: each opens its own connection to the driver
 * and turns the Arrow record batches of its {@code read} answers into rows, with {@code offset}
 * and {@code ingestTS} (when the driver first served the event) appended. The Arrow columns are
 * read in place (Spark's {@link ArrowColumnVector}) and each row is copied once into an
 * {@link UnsafeRow}, so nothing a downstream operator keeps points into a freed Arrow buffer.
 */
final class FeedReaders {
  static final BufferAllocator ROOT = new RootAllocator(Long.MAX_VALUE);
  // The longest one real-time read waits at the driver for its first event: the batch's deadline
  // is checked at least this often.
  private static final long MAX_WAIT_MS = 1_000;
  // A real-time read asks for everything released (the driver caps one answer at its max_read_rows).
  private static final long OPEN_END = Long.MAX_VALUE / 4;

  private FeedReaders() {
  }

  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final FeedSource.FeedOptions opts;
    private final StructType schema;

    Factory(FeedSource.FeedOptions opts, StructType schema) {
      this.opts = opts;
      this.schema = schema;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      FeedSource.FeedPartition p = (FeedSource.FeedPartition) partition;
      Cursor cursor = new Cursor(opts.client(), schema);
      return p.end < 0 ? new RealTimeReader(cursor, p.start) : new RangeReader(cursor, p.start, p.end);
    }
  }

  /** The rows of one {@code read} answer at a time. */
  static final class Cursor implements AutoCloseable {
    private final FeedClient client;
    private final StructType schema;
    private final UnsafeProjection project;
    private final GenericInternalRow extra = new GenericInternalRow(2);
    private final JoinedRow joined = new JoinedRow();
    private BufferAllocator alloc;
    private ArrowStreamReader reader;
    private ColumnarBatch batch;
    private int rowInBatch;
    private int rowsInBatch;
    private long nextOffset;
    private long[] runLengths = new long[0];
    private long[] runTimes = new long[0];
    private int run = -1;
    private long runLeft;
    private boolean checked;
    long rowOffset = -1;     // the current row's offset
    long rowIngestMs = -1;   // and when the driver first served it
    UnsafeRow row;
    boolean finished;        // the driver had released every event at the last answer
    long released;

    Cursor(FeedClient client, StructType schema) {
      this.client = client;
      this.schema = schema;
      this.project = UnsafeProjection.create(schema);
    }

    String where() {
      return client.where();
    }

    /** Ask for rows {@code [start, end)} (waiting up to waitMs for the first); how many came. */
    int fetch(long start, long end, long waitMs) throws IOException {
      closeAnswer();
      FrameClient.Frame answer = client.read(start, end, waitMs);
      JsonNode h = answer.header;
      long rows = h.path("rows").asLong(0);
      released = h.path("released").asLong(0);
      finished = h.path("finished").asBoolean(false);
      if (rows <= 0) {
        return 0;
      }
      JsonNode served = h.get("served");
      if (served == null || !served.isArray()) {
        throw new IOException(where() + ": read answer has no `served` runs (a driver of another cepkit version?)");
      }
      runLengths = new long[served.size()];
      runTimes = new long[served.size()];
      long covered = 0;
      for (int i = 0; i < served.size(); i++) {
        runLengths[i] = served.get(i).get(0).asLong();
        runTimes[i] = served.get(i).get(1).asLong();
        covered += runLengths[i];
      }
      if (covered != rows) {
        throw new IOException(where() + ": read answer: served runs cover " + covered + " rows, not " + rows);
      }
      run = -1;
      runLeft = 0;
      nextOffset = start;
      alloc = ROOT.newChildAllocator("cepkit-feed-read", 0, Long.MAX_VALUE);
      reader = new ArrowStreamReader(new ByteArrayInputStream(answer.body), alloc);
      if (!checked) {
        checkColumns(reader.getVectorSchemaRoot().getSchema().getFields());
        checked = true;
      }
      return (int) rows;
    }

    private void checkColumns(List<Field> fields) throws IOException {
      int expected = schema.fields().length - 2;      // offset and ingestTS are ours
      boolean same = fields.size() == expected;
      for (int i = 0; same && i < expected; i++) {
        same = fields.get(i).getName().equals(schema.fields()[i].name());
      }
      if (!same) {
        throw new IOException(where() + ": the driver serves columns " + fields + ", not the query's "
            + schema.simpleString());
      }
    }

    /** Move to the next row of the current answer; false when it has none left. */
    boolean advance() throws IOException {
      while (rowInBatch >= rowsInBatch) {
        if (reader == null) {
          return false;
        }
        if (!reader.loadNextBatch()) {
          closeAnswer();
          return false;
        }
        VectorSchemaRoot root = reader.getVectorSchemaRoot();
        ColumnVector[] cols = new ColumnVector[root.getFieldVectors().size()];
        for (int i = 0; i < cols.length; i++) {
          cols[i] = new ArrowColumnVector(root.getVector(i));
        }
        rowsInBatch = root.getRowCount();
        rowInBatch = 0;
        batch = new ColumnarBatch(cols, rowsInBatch);
      }
      while (runLeft == 0) {
        run++;
        runLeft = runLengths[run];
      }
      runLeft--;
      rowIngestMs = runTimes[run];
      rowOffset = nextOffset++;
      extra.setLong(0, rowOffset);
      extra.setLong(1, rowIngestMs);
      row = project.apply(joined.apply(batch.getRow(rowInBatch++), extra));
      return true;
    }

    private void closeAnswer() throws IOException {
      batch = null;       // its vectors belong to the reader's root, closed with it
      rowInBatch = rowsInBatch = 0;
      if (reader != null) {
        reader.close();
        reader = null;
      }
      if (alloc != null) {
        alloc.close();
        alloc = null;
      }
    }

    @Override
    public void close() throws IOException {
      try {
        closeAnswer();
      } finally {
        client.close();
      }
    }
  }

  /** A micro-batch split: exactly the offsets {@code [start, end)}, planned from the released offset. */
  static final class RangeReader implements PartitionReader<InternalRow> {
    private final Cursor cursor;
    private final long end;
    private long pos;

    RangeReader(Cursor cursor, long start, long end) {
      this.cursor = cursor;
      this.pos = start;
      this.end = end;
    }

    @Override
    public boolean next() throws IOException {
      while (true) {
        if (cursor.advance()) {
          return true;
        }
        if (pos >= end) {
          return false;
        }
        int got = cursor.fetch(pos, end, 0);
        if (got == 0) {
          // The range was planned from the driver's released offset: every row must come.
          throw new IOException(cursor.where() + ": offsets [" + pos + ", " + end + ") were planned but the "
              + "driver returned none (released " + cursor.released + ")");
        }
        pos += got;
      }
    }

    @Override
    public InternalRow get() {
      return cursor.row;
    }

    @Override
    public void close() throws IOException {
      cursor.close();
    }
  }

  /**
   * A real-time batch's one long-running read: events as the driver releases them, until the
   * batch's deadline. {@link #getOffset()} is the offset of the next event it would hand out: the
   * batch's end, and the next batch's start.
   */
  static final class RealTimeReader implements SupportsRealTimeRead<InternalRow> {
    private final Cursor cursor;
    private long pos;        // the next offset to ask the driver for
    private long next;       // the offset of the next event to hand out

    RealTimeReader(Cursor cursor, long start) {
      this.cursor = cursor;
      this.pos = start;
      this.next = start;
    }

    @Override
    public boolean next() throws IOException {
      throw new IllegalStateException(FeedSource.SHORT_NAME + ": a real-time read is driven by nextWithTimeout");
    }

    @Override
    public RecordStatus nextWithTimeout(Long timeoutMs) throws IOException {
      return nextBefore(System.currentTimeMillis() + timeoutMs);
    }

    @Override
    public RecordStatus nextWithTimeout(Long startTimeMs, Long timeoutMs) throws IOException {
      return nextBefore(startTimeMs + timeoutMs);
    }

    private RecordStatus nextBefore(long deadlineMs) throws IOException {
      while (true) {
        if (cursor.advance()) {
          next = cursor.rowOffset + 1;
          return RecordStatus.newStatusWithArrivalTimeMs(cursor.rowIngestMs);
        }
        long left = deadlineMs - System.currentTimeMillis();
        if (left <= 0) {
          return RecordStatus.newStatusWithoutArrivalTime(false);
        }
        int got = cursor.fetch(pos, OPEN_END, Math.min(left, MAX_WAIT_MS));
        pos += got;
        if (got == 0 && cursor.finished) {
          // Every event was released and read: nothing will come; do not spin on the driver.
          try {
            Thread.sleep(Math.min(left, 50));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(FeedSource.SHORT_NAME + ": interrupted", e);
          }
        }
      }
    }

    @Override
    public InternalRow get() {
      return cursor.row;
    }

    @Override
    public PartitionOffset getOffset() {
      return new FeedSource.FeedOffset(next);
    }

    @Override
    public void close() throws IOException {
      cursor.close();
    }
  }
}
