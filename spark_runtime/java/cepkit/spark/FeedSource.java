package cepkit.spark;

import cepkit.wire.FeedClient;
import cepkit.wire.FrameClient;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The harness feed as a Spark data source in the JVM: format {@code cepkit_feed} (or this class's
 * name). It is spark_runtime/source.py's source without Python: the same options, offsets
 * ({@code {"offset": n}}, the driver's global event order), columns (the driver's, then
 * {@code offset} and {@code ingestTS}) and commit, so it reads what that source reads; and it also
 * implements Spark's real-time mode ({@link SupportsRealTimeMode}), which a Python data source cannot.
 *
 * <ul>
 *   <li>Micro-batch: a batch is the offset range {@code [start, end)}, {@code latestOffset}
 *   long-polls the driver for up to {@code waitMs} and honours the read limit and the pause file,
 *   and {@code partitions} contiguous ranges are read in parallel ({@link FeedReaders.RangeReader}).</li>
 *   <li>Real-time mode: a batch is planned from its start offset alone, as one partition whose
 *   long-running task reads the feed as events are released until the batch's time is up
 *   ({@link FeedReaders.RealTimeReader}); its end offset is where that reader got to. One partition,
 *   because the driver's order is one sequence: splitting it would mean every reader pulling every
 *   event.</li>
 * </ul>
 *
 * Options: {@code host} (127.0.0.1), {@code port} (required), {@code secret} (the run's,
 * kit/wire/auth.py), {@code partitions} (1), {@code maxRowsPerBatch} (none), {@code waitMs} (20),
 * {@code pauseFile} (none). A bad option fails the query with one line naming it.
 */
public final class FeedSource implements TableProvider, DataSourceRegister {
  public static final String SHORT_NAME = "cepkit_feed";

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    FeedOptions opts = FeedOptions.parse(options);
    try (FeedClient client = opts.client()) {
      return sparkSchema(client);
    } catch (IOException e) {
      throw new UncheckedIOException(SHORT_NAME + ": " + e.getMessage(), e);
    }
  }

  /** The source's Spark schema: the driver's columns (from its {@code hello}), then offset and
   * ingestTS, all nullable as spark_runtime/source.py declares them. */
  static StructType sparkSchema(FeedClient client) throws IOException {
    FrameClient.Frame hello = client.hello();
    StructType out = new StructType();
    try (BufferAllocator alloc = FeedReaders.ROOT.newChildAllocator("hello", 0, Long.MAX_VALUE);
         ArrowStreamReader reader = new ArrowStreamReader(new ByteArrayInputStream(hello.body), alloc)) {
      Schema schema = reader.getVectorSchemaRoot().getSchema();
      for (Field f : schema.getFields()) {
        out = out.add(f.getName(), sparkType(f), true);
      }
    }
    return out.add(FeedClient.OFFSET, DataTypes.LongType, true).add(FeedClient.INGEST_TS, DataTypes.LongType, true);
  }

  private static DataType sparkType(Field f) throws IOException {
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
    throw new IOException(SHORT_NAME + ": column " + f.getName() + ": unsupported type " + t);
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;   // the program may state the schema (it is the driver's, checked by the readers)
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new FeedTable(schema, FeedOptions.parse(properties));
  }

  /** The source's options, checked once where the query is planned. */
  static final class FeedOptions implements Serializable {
    private static final long serialVersionUID = 1L;
    final String host;
    final int port;
    final String secret;
    final int partitions;
    final long maxRowsPerBatch;     // -1: no cap
    final long waitMs;
    final String pauseFile;          // null: none

    private FeedOptions(String host, int port, String secret, int partitions, long maxRowsPerBatch, long waitMs,
                        String pauseFile) {
      this.host = host;
      this.port = port;
      this.secret = secret;
      this.partitions = partitions;
      this.maxRowsPerBatch = maxRowsPerBatch;
      this.waitMs = waitMs;
      this.pauseFile = pauseFile;
    }

    static FeedOptions parse(Map<String, String> raw) {
      Map<String, String> opts = new HashMap<>();
      for (Map.Entry<String, String> e : raw.entrySet()) {
        opts.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
      }
      long port = number(opts, "port", -1, 1, 65535);
      if (port < 0) {
        throw new IllegalArgumentException(SHORT_NAME + ": option port: required (the driver's port)");
      }
      String host = opts.getOrDefault("host", "");
      String pause = opts.getOrDefault("pausefile", "");
      return new FeedOptions(host.isEmpty() ? "127.0.0.1" : host, (int) port, opts.get("secret"),
          (int) number(opts, "partitions", 1, 1, 4096), number(opts, "maxrowsperbatch", -1, 1, Long.MAX_VALUE),
          number(opts, "waitms", 20, 0, 60_000), pause.isEmpty() ? null : pause);
    }

    private static long number(Map<String, String> opts, String key, long fallback, long low, long high) {
      String value = opts.get(key);
      if (value == null || value.isEmpty()) {
        return fallback;
      }
      long n;
      try {
        n = Long.parseLong(value.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(SHORT_NAME + ": option " + key + ": must be an integer, got '" + value + "'");
      }
      if (n < low || n > high) {
        throw new IllegalArgumentException(SHORT_NAME + ": option " + key + ": must be in [" + low + ", " + high
            + "], got " + n);
      }
      return n;
    }

    FeedClient client() {
      return new FeedClient(host, port, secret);
    }

    boolean paused() {
      return pauseFile != null && Files.exists(Paths.get(pauseFile));
    }
  }

  /** A position in the driver's event order: a batch's start or end, or where a real-time reader got to. */
  static final class FeedOffset extends Offset implements PartitionOffset {
    private static final long serialVersionUID = 1L;
    final long offset;

    FeedOffset(long offset) {
      this.offset = offset;
    }

    @Override
    public String json() {
      return "{\"offset\":" + offset + "}";
    }

    static FeedOffset parse(String json) {
      try {
        JsonNode node = FrameClient.JSON.readTree(json);
        JsonNode n = node == null ? null : node.get("offset");
        if (n == null || !n.canConvertToLong() || n.asLong() < 0) {
          throw new IllegalArgumentException("no offset >= 0");
        }
        return new FeedOffset(n.asLong());
      } catch (IOException | IllegalArgumentException e) {
        throw new IllegalArgumentException(SHORT_NAME + ": not an offset of this source: " + json + " ("
            + e.getMessage() + ")");
      }
    }
  }

  /** Offsets {@code [start, end)} of one micro-batch split, or {@code [start, ...)} in real-time mode (end -1). */
  static final class FeedPartition implements InputPartition {
    private static final long serialVersionUID = 1L;
    final long start;
    final long end;

    FeedPartition(long start, long end) {
      this.start = start;
      this.end = end;
    }
  }

  static final class FeedTable implements SupportsRead {
    private final StructType schema;
    private final FeedOptions opts;

    FeedTable(StructType schema, FeedOptions opts) {
      this.schema = schema;
      this.opts = opts;
    }

    @Override
    public String name() {
      return SHORT_NAME + "(" + opts.host + ":" + opts.port + ")";
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return () -> new Scan() {
        @Override
        public StructType readSchema() {
          return schema;
        }

        @Override
        public String description() {
          return name();
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
          return new FeedStream(opts, schema);
        }
      };
    }
  }

  /** The stream on Spark's driver: plans batches and commits them to the feed. */
  static final class FeedStream implements MicroBatchStream, SupportsAdmissionControl, SupportsRealTimeMode {
    private final FeedOptions opts;
    private final StructType schema;
    private FeedClient client;
    private volatile long released;

    FeedStream(FeedOptions opts, StructType schema) {
      this.opts = opts;
      this.schema = schema;
    }

    private synchronized FeedClient driver() {
      if (client == null) {
        client = opts.client();
      }
      return client;
    }

    @Override
    public Offset initialOffset() {
      return new FeedOffset(0);
    }

    @Override
    public Offset deserializeOffset(String json) {
      return FeedOffset.parse(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      return opts.maxRowsPerBatch > 0 ? ReadLimit.maxRows(opts.maxRowsPerBatch) : ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException(SHORT_NAME + ": latestOffset(start, limit) is the one to call");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
      long begin = ((FeedOffset) startOffset).offset;
      if (opts.paused()) {
        return new FeedOffset(begin);
      }
      long latest;
      try {
        latest = driver().latestOffset(begin, opts.waitMs);
      } catch (IOException e) {
        throw new UncheckedIOException(e.getMessage(), e);
      }
      released = latest;
      long end = Math.max(begin, latest);
      if (limit instanceof ReadMaxRows) {
        end = Math.min(end, begin + ((ReadMaxRows) limit).maxRows());
      }
      return new FeedOffset(end);
    }

    @Override
    public Offset reportLatestOffset() {
      return new FeedOffset(released);
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      long a = ((FeedOffset) start).offset;
      long n = ((FeedOffset) end).offset - a;
      if (n <= 0) {
        return new InputPartition[0];
      }
      int k = (int) Math.min(opts.partitions, n);
      List<InputPartition> parts = new ArrayList<>(k);
      for (int i = 0; i < k; i++) {
        parts.add(new FeedPartition(a + n * i / k, a + n * (i + 1) / k));
      }
      return parts.toArray(new InputPartition[0]);
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start) {
      return new InputPartition[] {new FeedPartition(((FeedOffset) start).offset, -1)};
    }

    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
      if (offsets.length != 1) {
        throw new IllegalStateException(SHORT_NAME + ": real-time mode reads one partition, got "
            + offsets.length + " partition offsets");
      }
      return (FeedOffset) offsets[0];
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new FeedReaders.Factory(opts, schema);
    }

    @Override
    public void commit(Offset end) {
      // Called once the batch ending at `end` is checkpointed: a restarted query reads from there,
      // so the driver may forget what lies before it, and must keep what follows.
      try {
        driver().commit(((FeedOffset) end).offset);
      } catch (IOException e) {
        throw new UncheckedIOException(e.getMessage(), e);
      }
    }

    @Override
    public synchronized void stop() {
      if (client != null) {
        client.close();
        client = null;
      }
    }
  }
}
