package cepkit.wire;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The feed's requests (specs/DRIVER.md), as kit/wire/feed_client.py makes them: {@code hello}
 * (the events' Arrow schema, as the body of the answer), {@code latest_offset}, {@code read} and
 * {@code commit}. One client per thread: an engine's planner holds one, every reader its own.
 * Engine-neutral: each engine turns the Arrow bodies into its own rows.
 */
public final class FeedClient implements AutoCloseable {
  public static final String OFFSET = "offset";
  public static final String INGEST_TS = "ingestTS";
  private static final int TIMEOUT_MS = 30_000;
  private static final long RECONNECT_MS = 10_000;

  private final FrameClient conn;

  public FeedClient(String host, int port, String secret) {
    conn = new FrameClient(host, port, secret, "driver", TIMEOUT_MS, RECONNECT_MS);
  }

  public String where() {
    return conn.where();
  }

  /** The {@code hello} answer: its header's {@code info} and, as its body, the events' Arrow schema
   * (an IPC stream with no batches). */
  public FrameClient.Frame hello() throws IOException {
    return conn.request(Map.of("op", "hello"), null, 0);
  }

  /** How many events are released; waits up to {@code waitMs} for more than {@code after}. */
  public long latestOffset(long after, long waitMs) throws IOException {
    Map<String, Object> req = new LinkedHashMap<>();
    req.put("op", "latest_offset");
    req.put("wait_ms", waitMs);
    req.put("after", after);
    return conn.request(req, null, waitMs).header.path("offset").asLong();
  }

  /** Whether the driver has released every event of the run. */
  public boolean finished() throws IOException {
    return conn.request(Map.of("op", "latest_offset", "wait_ms", 0), null, 0).header.path("finished").asBoolean(false);
  }

  /** One read: rows {@code [start, stop)} with stop at most {@code end}, the released offset and the
   * rows' first-served times ({@code served}); waits up to {@code waitMs} for the first event past start. */
  public FrameClient.Frame read(long start, long end, long waitMs) throws IOException {
    return read(start, end, waitMs, Map.of());
  }

  /** A read with more fields: {@code max_rows}, or the reader's split ({@code split}, {@code splits},
   * {@code block}: specs/DRIVER.md, "Splits"), whose position the driver then follows apart. */
  public FrameClient.Frame read(long start, long end, long waitMs, Map<String, Object> extra) throws IOException {
    Map<String, Object> req = new LinkedHashMap<>();
    req.put("op", "read");
    req.put("start", start);
    req.put("end", end);
    req.put("wait_ms", waitMs);
    req.putAll(extra);
    return conn.request(req, null, waitMs);
  }

  /** The engine has checkpointed every event below {@code end}. */
  public void commit(long end) throws IOException {
    conn.request(Map.of("op", "commit", "end", end), null, 0);
  }

  @Override
  public void close() {
    conn.close();
  }
}
