package cepkit.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The feed's requests (specs/DRIVER.md), as kit/wire/feed_client.py makes them: {@code hello}
 * (the events' Arrow schema), {@code latest_offset}, {@code read} and {@code commit}. One client
 * per thread: Spark's driver holds one for planning, every reader task its own.
 */
final class FeedClient implements AutoCloseable {
  static final String OFFSET = "offset";
  static final String INGEST_TS = "ingestTS";
  private static final int TIMEOUT_MS = 30_000;
  private static final long RECONNECT_MS = 10_000;

  private final FrameClient conn;

  FeedClient(String host, int port, String secret) {
    conn = new FrameClient(host, port, secret, "driver", TIMEOUT_MS, RECONNECT_MS);
  }

  String where() {
    return conn.where();
  }

  /** The source's Spark schema: the driver's columns, then offset and ingestTS, all nullable as
   * spark_runtime/source.py declares them. */
  StructType schema() throws IOException {
    FrameClient.Frame hello = conn.request(Map.of("op", "hello"), null, 0);
    StructType out = new StructType();
    try (BufferAllocator alloc = FeedReaders.ROOT.newChildAllocator("hello", 0, Long.MAX_VALUE);
         ArrowStreamReader reader = new ArrowStreamReader(new ByteArrayInputStream(hello.body), alloc)) {
      Schema schema = reader.getVectorSchemaRoot().getSchema();
      for (Field f : schema.getFields()) {
        out = out.add(f.getName(), sparkType(f), true);
      }
    }
    return out.add(OFFSET, DataTypes.LongType, true).add(INGEST_TS, DataTypes.LongType, true);
  }

  private DataType sparkType(Field f) throws IOException {
    ArrowType t = f.getType();
    if (t instanceof ArrowType.Utf8) {
      return DataTypes.StringType;
    }
    if (t instanceof ArrowType.Int && ((ArrowType.Int) t).getIsSigned()) {
      int bits = ((ArrowType.Int) t).getBitWidth();
      if (bits == 32) {
        return DataTypes.IntegerType;
      }
      if (bits == 64) {
        return DataTypes.LongType;
      }
    }
    if (t instanceof ArrowType.FloatingPoint
        && ((ArrowType.FloatingPoint) t).getPrecision() == FloatingPointPrecision.DOUBLE) {
      return DataTypes.DoubleType;
    }
    throw new IOException(FeedSource.SHORT_NAME + ": column " + f.getName() + ": unsupported type " + t);
  }

  /** How many events are released; waits up to {@code waitMs} for more than {@code after}. */
  long latestOffset(long after, long waitMs) throws IOException {
    Map<String, Object> req = new LinkedHashMap<>();
    req.put("op", "latest_offset");
    req.put("wait_ms", waitMs);
    req.put("after", after);
    return conn.request(req, null, waitMs).header.path("offset").asLong();
  }

  /** Whether the driver has released every event of the run. */
  boolean finished() throws IOException {
    return conn.request(Map.of("op", "latest_offset", "wait_ms", 0), null, 0).header.path("finished").asBoolean(false);
  }

  /** One read: rows {@code [start, stop)} with stop at most {@code end} and the released offset;
   * waits up to {@code waitMs} for the first event past start. */
  FrameClient.Frame read(long start, long end, long waitMs) throws IOException {
    Map<String, Object> req = new LinkedHashMap<>();
    req.put("op", "read");
    req.put("start", start);
    req.put("end", end);
    req.put("wait_ms", waitMs);
    return conn.request(req, null, waitMs);
  }

  void commit(long end) throws IOException {
    conn.request(Map.of("op", "commit", "end", end), null, 0);
  }

  @Override
  public void close() {
    conn.close();
  }
}
