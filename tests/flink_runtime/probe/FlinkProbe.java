import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import cepkit.flink.FeedSource;
import cepkit.flink.FeedSplit;
import cepkit.flink.HarnessSink;

import org.apache.flink.api.common.TaskInfo;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.types.Row;

/**
 * Drives cepkit's Flink source and sink as Flink's tasks do, without Flink's runtime
 * (tests/flink_runtime/test_jvm_connectors.py): the secret comes on stdin.
 *
 *   read HOST PORT COLUMNS CONSTANTS K B MAXROWS LIMITS TOTAL OUT: one reader per split (split i of K),
 *     each polled until it handed out LIMITS[i] rows (-1: until the readers handed out TOTAL
 *     together and each has had nothing more once, as Flink polls until a reader says so); OUT gets "row SPLIT v1 .. vn TS" per row, "wm SPLIT W" per watermark and
 *     "pos SPLIT NEXT" per reader's checkpointed split at the end.
 *   sink HOST PORT ATTEMPT SUBTASK PARALLELISM ROWS: writes ROWS rows of two streams (a: ID, X, T, name;
 *     b: ID, flag, N), a watermark and a flush half-way, then closes.
 */
public final class FlinkProbe {
  public static void main(String[] args) throws Exception {
    String secret = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
    if (args[0].equals("read")) {
      read(args, secret);
    } else {
      sink(args, secret);
    }
  }

  @SuppressWarnings("unchecked")
  private static void read(String[] a, String secret) throws Exception {
    int k = Integer.parseInt(a[5]);
    long block = Long.parseLong(a[6]);
    String[] limits = a[8].split(",");
    long total = Long.parseLong(a[9]);
    FeedSource source = new FeedSource(a[1], Integer.parseInt(a[2]), secret, a[3], a[4], k, block,
        Integer.parseInt(a[7]));
    List<String> lines = new ArrayList<>();
    List<SourceReader<Row, FeedSplit>> readers = new ArrayList<>();
    long[] counts = new long[k];
    List<org.apache.flink.api.connector.source.ReaderOutput<Row>> outs = new ArrayList<>();
    for (int i = 0; i < k; i++) {
      final int idx = i;
      SourceReaderContext ctx = (SourceReaderContext) Proxy.newProxyInstance(FlinkProbe.class.getClassLoader(),
          new Class<?>[] {SourceReaderContext.class}, (p, m, args) -> m.getName().equals("getIndexOfSubtask") ? idx : null);
      SourceReader<Row, FeedSplit> r = source.createReader(ctx);
      r.start();
      r.addSplits(List.of(new FeedSplit(i, k, block, 0)));
      readers.add(r);
      Object split = Proxy.newProxyInstance(FlinkProbe.class.getClassLoader(),
          new Class<?>[] {org.apache.flink.api.connector.source.SourceOutput.class}, (p, m, args) -> {
            if (m.getName().equals("collect")) {
              Row row = (Row) args[0];
              StringBuilder sb = new StringBuilder("row " + idx);
              for (int f = 0; f < row.getArity(); f++) {
                sb.append(' ').append(row.getField(f));
              }
              lines.add(sb.append(' ').append(args.length > 1 ? args[1] : "none").toString());
              counts[idx]++;
            } else if (m.getName().equals("emitWatermark")) {
              lines.add("wm " + idx + " " + ((Watermark) args[0]).getTimestamp());
            }
            return null;
          });
      outs.add((org.apache.flink.api.connector.source.ReaderOutput<Row>) Proxy.newProxyInstance(
          FlinkProbe.class.getClassLoader(), new Class<?>[] {org.apache.flink.api.connector.source.ReaderOutput.class},
          (p, m, args) -> {
            if (m.getName().equals("createOutputForSplit")) {
              return split;
            }
            if (m.getName().equals("collect") || m.getName().equals("emitWatermark")) {
              throw new IllegalStateException("cepkit's reader must use its splits' outputs");
            }
            return null;
          }));
    }
    boolean[] idle = new boolean[k];       // the reader's last poll had nothing: it has all it owns
    long deadline = System.currentTimeMillis() + 60_000;
    while (System.currentTimeMillis() < deadline) {
      boolean done = true;
      long sum = 0;
      for (int i = 0; i < k; i++) {
        sum += counts[i];
      }
      for (int i = 0; i < k; i++) {
        long limit = Long.parseLong(limits[i]);
        if (limit >= 0 ? counts[i] >= limit : sum >= total && idle[i]) {
          continue;
        }
        done = false;
        idle[i] = readers.get(i).pollNext(outs.get(i)) == InputStatus.NOTHING_AVAILABLE;
        if (idle[i]) {
          try {
            readers.get(i).isAvailable().get(100, TimeUnit.MILLISECONDS);
          } catch (TimeoutException e) {
            // polled again next round
          }
        }
      }
      if (done) {
        break;
      }
    }
    for (int i = 0; i < k; i++) {
      for (FeedSplit s : readers.get(i).snapshotState(1)) {
        lines.add("pos " + s.index + " " + s.next);
      }
      readers.get(i).close();
    }
    try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(Paths.get(a[10])))) {
      for (String line : lines) {
        w.println(line);
      }
    }
  }

  private static void sink(String[] a, String secret) throws Exception {
    int attempt = Integer.parseInt(a[3]);
    int subtask = Integer.parseInt(a[4]);
    int parallelism = Integer.parseInt(a[5]);
    int rows = Integer.parseInt(a[6]);
    String layout = "{\"a\": [[\"ID\", \"int\", 1], [\"X\", \"double\", 2], [\"T\", \"timestamp_ms\", 3], [\"name\", \"string\", 4]],"
        + " \"b\": [[\"ID\", \"int\", 1], [\"flag\", \"boolean\", 5], [\"N\", \"long\", 6]]}";
    HarnessSink sink = new HarnessSink(a[1], Integer.parseInt(a[2]), secret, attempt, 0, layout);
    TaskInfo task = (TaskInfo) Proxy.newProxyInstance(FlinkProbe.class.getClassLoader(), new Class<?>[] {TaskInfo.class},
        (p, m, args) -> {
          switch (m.getName()) {
            case "getIndexOfThisSubtask": return subtask;
            case "getNumberOfParallelSubtasks": return parallelism;
            case "getAttemptNumber": return 2;
            default: return null;
          }
        });
    WriterInitContext ctx = (WriterInitContext) Proxy.newProxyInstance(FlinkProbe.class.getClassLoader(),
        new Class<?>[] {WriterInitContext.class}, (p, m, args) -> m.getName().equals("getTaskInfo") ? task : null);
    SinkWriter<Row> w = sink.createWriter(ctx);
    for (int i = 0; i < rows; i++) {
      Row row = new Row(7);
      row.setField(0, i % 2 == 0 ? "a" : "b");
      row.setField(1, i);
      row.setField(2, i % 10 == 0 ? null : i / 4.0);
      row.setField(3, LocalDateTime.ofEpochSecond(1_700_000_000L + i, 1_000_000 * (i % 1000), ZoneOffset.UTC));
      row.setField(4, "n" + i + "\u00e9");
      row.setField(5, i % 3 == 0);
      row.setField(6, (long) i * 1_000_000_007L);
      w.write(row, null);
      if (i == rows / 2) {
        w.writeWatermark(new Watermark(i));
        w.flush(false);
      }
    }
    w.close();
  }
}
