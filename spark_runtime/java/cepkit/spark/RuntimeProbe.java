package cepkit.spark;

import cepkit.wire.FeedClient;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The feed source and the sink writer driven by hand, as Spark drives them, for the tests
 * (tests/spark_runtime/test_jvm_runtime.py) against a real harness feed and sink:
 *
 * <pre>
 * java -cp JAR:PYSPARK_JARS/* cepkit.spark.RuntimeProbe micro PORT SECRET PARTITIONS MAXROWS OUT.csv
 * java -cp ... cepkit.spark.RuntimeProbe realtime PORT SECRET START COUNT TIMEOUT_MS OUT.csv
 * java -cp ... cepkit.spark.RuntimeProbe sink PORT SECRET SCHEMA_JSON STREAMS_JSON ROWS.csv
 * </pre>
 *
 * {@code micro}: plans micro-batches until the driver has released everything and they are read
 * (the read limit MAXROWS, 0 for none), each split into PARTITIONS readers, writing every row with
 * its batch; {@code realtime}: one real-time reader from START until it has handed out COUNT
 * events or waited TIMEOUT_MS for one, then its offset; {@code sink}: one writer task over the
 * rows of ROWS.csv (the schema's columns, as text). An empty SECRET is none.
 */
public final class RuntimeProbe {
  private RuntimeProbe() {
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> opts = new HashMap<>();
    opts.put("port", args[1]);
    if (!args[2].isEmpty()) {
      opts.put("secret", args[2]);
    }
    switch (args[0]) {
      case "micro":
        opts.put("partitions", args[3]);
        if (!args[4].equals("0")) {
          opts.put("maxRowsPerBatch", args[4]);
        }
        micro(opts, args[5]);
        break;
      case "realtime":
        realtime(opts, Long.parseLong(args[3]), Long.parseLong(args[4]), Long.parseLong(args[5]), args[6]);
        break;
      case "sink":
        sink(Integer.parseInt(args[1]), args[2], args[3], args[4], args[5]);
        break;
      default:
        throw new IllegalArgumentException("unknown probe " + args[0]);
    }
  }

  private static FeedSource.FeedStream stream(Map<String, String> opts, StructType[] schema) {
    FeedSource source = new FeedSource();
    schema[0] = source.inferSchema(new org.apache.spark.sql.util.CaseInsensitiveStringMap(opts));
    FeedSource.FeedTable table = (FeedSource.FeedTable) source.getTable(schema[0], null, opts);
    return (FeedSource.FeedStream) table.newScanBuilder(null).build().toMicroBatchStream("/nowhere");
  }

  private static void micro(Map<String, String> opts, String out) throws IOException {
    StructType[] schema = new StructType[1];
    FeedSource.FeedStream stream = stream(opts, schema);
    PartitionReaderFactory factory = stream.createReaderFactory();
    ReadLimit limit = stream.getDefaultReadLimit();
    Offset start = stream.initialOffset();
    List<String> lines = new ArrayList<>();
    int batch = 0;
    int idle = 0;
    try (FeedClient driver = new FeedClient("127.0.0.1", Integer.parseInt(opts.get("port")), opts.get("secret"))) {
      while (idle < 200) {
        Offset end = stream.latestOffset(start, limit);
        if (end.equals(start)) {
          boolean finished = driver.finished();
          if (finished && ((FeedSource.FeedOffset) start).offset >= driver.latestOffset(0, 0)) {
            break;
          }
          idle++;
          continue;
        }
        for (InputPartition p : stream.planInputPartitions(start, end)) {
          try (PartitionReader<InternalRow> reader = factory.createReader(p)) {
            while (reader.next()) {
              lines.add(batch + "," + line(reader.get(), schema[0]));
            }
          }
        }
        stream.commit(end);
        start = end;
        batch++;
      }
    }
    stream.stop();
    write(out, lines);
  }

  private static void realtime(Map<String, String> opts, long start, long count, long timeoutMs, String out)
      throws IOException {
    StructType[] schema = new StructType[1];
    FeedSource.FeedStream stream = stream(opts, schema);
    InputPartition[] parts = stream.planInputPartitions(new FeedSource.FeedOffset(start));
    List<String> lines = new ArrayList<>();
    try (PartitionReader<InternalRow> reader = stream.createReaderFactory().createReader(parts[0])) {
      SupportsRealTimeRead<InternalRow> rt = (SupportsRealTimeRead<InternalRow>) reader;
      for (long i = 0; i < count; i++) {
        SupportsRealTimeRead.RecordStatus status = rt.nextWithTimeout(timeoutMs);
        if (!status.hasRecord()) {
          break;
        }
        lines.add(status.recArrivalTime().orElse(-1L) + "," + line(rt.get(), schema[0]));
      }
      lines.add("offset," + ((FeedSource.FeedOffset) rt.getOffset()).offset);
    }
    stream.stop();
    write(out, lines);
  }

  private static void sink(int port, String secret, String schemaJson, String streamsJson, String rowsCsv)
      throws IOException {
    StructType schema = (StructType) DataType.fromJson(schemaJson);
    SinkWriter writer = new SinkWriter("127.0.0.1", port, secret.isEmpty() ? null : secret, schemaJson, streamsJson,
        "probe");
    writer.open(0, 0);
    try (BufferedReader in = Files.newBufferedReader(Paths.get(rowsCsv))) {
      for (String text = in.readLine(); text != null; text = in.readLine()) {
        String[] f = text.split(",", -1);
        Object[] values = new Object[f.length];
        StructField[] fields = schema.fields();
        for (int i = 0; i < f.length; i++) {
          DataType t = fields[i].dataType();
          values[i] = f[i].isEmpty() && !t.equals(DataTypes.StringType) ? null
              : t.equals(DataTypes.IntegerType) ? (Object) Integer.parseInt(f[i])
              : t.equals(DataTypes.LongType) ? (Object) Long.parseLong(f[i])
              : t.equals(DataTypes.DoubleType) ? (Object) Double.parseDouble(f[i]) : f[i];
        }
        Row row = RowFactory.create(values);
        writer.process(row);
      }
    }
    writer.close(null);
  }

  private static String line(InternalRow row, StructType schema) {
    StringBuilder b = new StringBuilder();
    StructField[] fields = schema.fields();
    for (int i = 0; i < fields.length; i++) {
      if (i > 0) {
        b.append(',');
      }
      DataType t = fields[i].dataType();
      if (row.isNullAt(i)) {
        continue;
      }
      b.append(t.equals(DataTypes.StringType) ? row.getUTF8String(i).toString()
          : t.equals(DataTypes.IntegerType) ? Integer.toString(row.getInt(i))
          : t.equals(DataTypes.LongType) ? Long.toString(row.getLong(i)) : Double.toString(row.getDouble(i)));
    }
    return b.toString();
  }

  private static void write(String path, List<String> lines) throws IOException {
    try (BufferedWriter w = Files.newBufferedWriter(Paths.get(path))) {
      for (String l : lines) {
        w.write(l);
        w.newLine();
      }
    }
  }
}
