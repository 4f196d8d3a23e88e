package cepkit.wire;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Rows as the body of the sink's {@code emit} frame (kit/wire/sink_client.py, harness/sink.py): an
 * Arrow IPC stream of one record batch. Both engines' JVM sinks send their answers with it (Spark's
 * {@code SinkWriter}, Flink's {@code HarnessSink}); each row is an {@code Object[]} in the schema's
 * column order, its values null or of the column's type: string (any object, by its text), int,
 * long, double (any {@link Number}) or boolean.
 */
public final class ArrowRows {
  private ArrowRows() {
  }

  /** The entries of a sink's stream map, `{"stream": [column, ...], ...}` in its order (each
   * column as the engine's sink describes it); one line naming the problem when it is not JSON. */
  public static List<Map.Entry<String, JsonNode>> streams(String streamsJson) {
    JsonNode streams;
    try {
      streams = FrameClient.JSON.readTree(streamsJson);
    } catch (IOException e) {
      throw new IllegalArgumentException("cepkit sink: the stream map is not JSON: " + e.getMessage());
    }
    List<Map.Entry<String, JsonNode>> out = new ArrayList<>();
    streams.fields().forEachRemaining(out::add);
    return out;
  }

  /** Send `rows` of `stream` to the sink as one {@code emit} (its batch id, the sender's epoch). */
  public static void emit(FrameClient sink, String stream, long batchId, String epoch, Schema schema,
                          List<Object[]> rows, BufferAllocator alloc) throws IOException {
    Map<String, Object> header = new LinkedHashMap<>();
    header.put("op", "emit");
    header.put("stream", stream);
    header.put("batch_id", batchId);
    header.put("epoch", epoch);
    sink.request(header, encode(schema, rows, alloc), 0);
  }

  /** The IPC stream of `rows` under `schema`, its buffers taken from `alloc` and freed before returning. */
  public static byte[] encode(Schema schema, List<Object[]> rows, BufferAllocator alloc) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(64 + rows.size() * 32);
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, alloc)) {
      root.allocateNew();
      int n = rows.size();
      List<FieldVector> vectors = root.getFieldVectors();
      for (int c = 0; c < vectors.size(); c++) {
        FieldVector v = vectors.get(c);
        for (int r = 0; r < n; r++) {
          Object value = rows.get(r)[c];
          if (value == null) {
            v.setNull(r);
          } else if (v instanceof VarCharVector) {
            ((VarCharVector) v).setSafe(r, value.toString().getBytes(StandardCharsets.UTF_8));
          } else if (v instanceof IntVector) {
            ((IntVector) v).setSafe(r, ((Number) value).intValue());
          } else if (v instanceof BigIntVector) {
            ((BigIntVector) v).setSafe(r, ((Number) value).longValue());
          } else if (v instanceof Float8Vector) {
            ((Float8Vector) v).setSafe(r, ((Number) value).doubleValue());
          } else {
            ((BitVector) v).setSafe(r, ((Boolean) value) ? 1 : 0);
          }
        }
        v.setValueCount(n);
      }
      root.setRowCount(n);
      try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(bytes))) {
        writer.start();
        writer.writeBatch();
        writer.end();
      }
    }
    return bytes.toByteArray();
  }
}
