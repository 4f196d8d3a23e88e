package cepkit.flink;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;

import cepkit.wire.FrameClient;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.types.Row;

/**
 * The harness's feed as a FLIP-27 source of Rows (flink_runtime/jvm.py builds it in the program's
 * JVM through py4j): the driver's columns, then {@code offset} and {@code ingestTS} (when the
 * driver first served the event, its {@code served} runs), then constant columns the program adds
 * (a single-stream dataset's {@code stream}): the columns of flink_runtime/feed.py
 * {@code event_fields}. Each Row carries its event's TS as its timestamp, and every split emits
 * its own watermark (FeedReader), so the events table takes the source's watermark.
 *
 * <p>Unbounded: the job ends when the program cancels it (flink_runtime/app.py). The splits
 * (FeedSplit) are assigned once, split i to reader {@code i % parallelism}; their positions are
 * the readers' checkpointed state. The run's secret is a constructor argument, serialized with
 * the source into the job (never a configuration option or an argument Flink would log), and
 * left out of {@link #toString()}.
 */
public final class FeedSource implements Source<Row, FeedSplit, List<FeedSplit>>, ResultTypeQueryable<Row> {
  private static final long serialVersionUID = 1L;

  final String host;
  final int port;
  final String secret;
  final String[] names;        // every column of the Rows
  final String[] types;        // int, long, double, string, boolean
  final int driverColumns;     // the first this many come from the driver
  final Object[] constants;    // the values of the columns after offset and ingestTS
  final int splits;
  final long block;
  final int maxRows;

  /**
   * @param columnsJson  the driver's columns, {@code [[name, type], ...]} (types: int, long, double,
   *                     string, boolean), in the order it serves them
   * @param constantsJson columns appended to every Row, {@code [[name, string value], ...]}
   * @param splits       how many splits share the feed (K)
   * @param block        offsets per block (B): split i reads the blocks b with b % K == i
   * @param maxRows      most rows asked for in one read
   */
  public FeedSource(String host, int port, String secret, String columnsJson, String constantsJson, int splits,
                    long block, int maxRows) {
    this.host = host;
    this.port = port;
    this.secret = secret;
    if (splits < 1 || block < 1 || maxRows < 1) {
      throw new IllegalArgumentException("cepkit feed: splits, block and maxRows must be >= 1");
    }
    this.splits = splits;
    this.block = block;
    this.maxRows = maxRows;
    try {
      JsonNode cols = FrameClient.JSON.readTree(columnsJson);
      JsonNode consts = FrameClient.JSON.readTree(constantsJson);
      driverColumns = cols.size();
      int n = driverColumns + 2 + consts.size();
      names = new String[n];
      types = new String[n];
      constants = new Object[consts.size()];
      for (int i = 0; i < driverColumns; i++) {
        names[i] = cols.get(i).get(0).asText();
        types[i] = cols.get(i).get(1).asText();
        typeInfo(types[i], names[i]);
      }
      names[driverColumns] = FeedReader.OFFSET;
      types[driverColumns] = "long";
      names[driverColumns + 1] = FeedReader.INGEST_TS;
      types[driverColumns + 1] = "long";
      for (int j = 0; j < constants.length; j++) {
        names[driverColumns + 2 + j] = consts.get(j).get(0).asText();
        types[driverColumns + 2 + j] = "string";
        constants[j] = consts.get(j).get(1).asText();
      }
    } catch (IOException e) {
      throw new IllegalArgumentException("cepkit feed: bad column list: " + e.getMessage());
    }
    tsIndex();
  }

  static TypeInformation<?> typeInfo(String type, String name) {
    switch (type) {
      case "int":
        return Types.INT;
      case "long":
        return Types.LONG;
      case "double":
        return Types.DOUBLE;
      case "string":
        return Types.STRING;
      case "boolean":
        return Types.BOOLEAN;
      default:
        throw new IllegalArgumentException("cepkit feed: column " + name + " has type " + type
            + "; the feed serves int, long, double, string and boolean columns");
    }
  }

  int tsIndex() {
    for (int i = 0; i < driverColumns; i++) {
      if (names[i].equals("TS")) {
        return i;
      }
    }
    throw new IllegalArgumentException("cepkit feed: the driver serves no TS column");
  }

  @Override
  public TypeInformation<Row> getProducedType() {
    TypeInformation<?>[] infos = new TypeInformation<?>[names.length];
    for (int i = 0; i < names.length; i++) {
      infos[i] = typeInfo(types[i], names[i]);
    }
    return new RowTypeInfo(infos, names.clone());
  }

  @Override
  public Boundedness getBoundedness() {
    return Boundedness.CONTINUOUS_UNBOUNDED;
  }

  @Override
  public SourceReader<Row, FeedSplit> createReader(SourceReaderContext context) {
    return new FeedReader(this, context);
  }

  @Override
  public SplitEnumerator<FeedSplit, List<FeedSplit>> createEnumerator(SplitEnumeratorContext<FeedSplit> context) {
    List<FeedSplit> all = new ArrayList<>();
    for (int i = 0; i < splits; i++) {
      all.add(new FeedSplit(i, splits, block, 0));
    }
    return new Enumerator(context, all);
  }

  @Override
  public SplitEnumerator<FeedSplit, List<FeedSplit>> restoreEnumerator(SplitEnumeratorContext<FeedSplit> context,
                                                                       List<FeedSplit> pending) {
    return new Enumerator(context, new ArrayList<>(pending));
  }

  @Override
  public SimpleVersionedSerializer<FeedSplit> getSplitSerializer() {
    return new FeedSplit.Serializer();
  }

  @Override
  public SimpleVersionedSerializer<List<FeedSplit>> getEnumeratorCheckpointSerializer() {
    return new FeedSplit.ListSerializer();
  }

  @Override
  public String toString() {
    return "cepkit feed at " + host + ":" + port + " (" + splits + " split" + (splits == 1 ? "" : "s") + ")";
  }

  /**
   * Hands each split to reader {@code index % parallelism} once that reader is registered, and
   * takes back the splits of a failed reader (Flink returns them with their checkpointed
   * positions) to hand them out again.
   */
  static final class Enumerator implements SplitEnumerator<FeedSplit, List<FeedSplit>> {
    private final SplitEnumeratorContext<FeedSplit> context;
    private final Map<Integer, FeedSplit> pending = new TreeMap<>();

    Enumerator(SplitEnumeratorContext<FeedSplit> context, List<FeedSplit> splits) {
      this.context = context;
      for (FeedSplit s : splits) {
        pending.put(s.index, s);
      }
    }

    @Override
    public void start() {
    }

    @Override
    public void handleSplitRequest(int subtaskId, String requesterHostname) {
    }

    @Override
    public void addSplitsBack(List<FeedSplit> splits, int subtaskId) {
      for (FeedSplit s : splits) {
        pending.put(s.index, s);
      }
      if (context.registeredReaders().containsKey(subtaskId)) {
        addReader(subtaskId);
      }
    }

    @Override
    public void addReader(int subtaskId) {
      int parallelism = context.currentParallelism();
      Iterator<Map.Entry<Integer, FeedSplit>> it = pending.entrySet().iterator();
      while (it.hasNext()) {
        FeedSplit s = it.next().getValue();
        if (s.index % parallelism == subtaskId) {
          context.assignSplit(s, subtaskId);
          it.remove();
        }
      }
    }

    @Override
    public List<FeedSplit> snapshotState(long checkpointId) {
      return new ArrayList<>(pending.values());
    }

    @Override
    public void close() {
    }
  }
}
