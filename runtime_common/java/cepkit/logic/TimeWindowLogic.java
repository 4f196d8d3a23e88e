package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The time-window aggregation (Q3 TimeWindowAggregation, Q4 TwoLevelAggregation, kind
 * time_window; specs/SEMANTICS.md section 5) as one whole-stream logic, fed events one at a time:
 * the paned plan of Spark's JVM time windows ({@link WindowQuery}, {@link WindowBucket},
 * {@link WindowPanes}) without a shuffle. Each group's events of the open pane
 * {@code [j*slide, (j+1)*slide)} accumulate in one record (Welford's mean and M2, sum, max, min,
 * and the values a MEDIAN reads); the first event of a later pane hands the open records to the
 * bucket and then, as its clock, closes every window ending at or before its TS: one row per group
 * with records in the window's panes, stamped with that event's TS.
 *
 * <p>Rows leave in the reference order (a closing event's rows sorted by windowEnd, then group).
 * Cost: O(1) per event (one hash lookup, a few additions); per pane change, O(groups) plus
 * O(k + log rows) per emitted row (a row merges up to k pane records with Chan's formula; MEDIAN sorts the
 * window's values). State: the records of the last k panes per group and the open records.
 * Arithmetic: COUNT, MAX, MIN and MEDIAN are the reference's values exactly; SUM, AVG and STDEV
 * come from pane partials (SUM as running double sums, STDEV by Chan's merge), within the
 * validator's tolerance of the reference's, not bit for bit (specs/SEMANTICS.md section 2).
 */
public final class TimeWindowLogic extends MicroQuery {
  private final WindowQuery window;
  private final int[] groupCodes;
  private final int[] valueCodes;
  /** Rows of one closing event in the reference order: by windowEnd, then by group values. */
  private final Comparator<Object[]> referenceOrder;

  TimeWindowLogic(JsonNode q) {
    super(q);
    if (inputs.length != 1) {
      throw new IllegalArgumentException("query " + id + ": a time window reads one stream, got " + inputs.length);
    }
    window = WindowQuery.fromNode(q);
    groupCodes = new int[window.groupBy.length];
    for (int i = 0; i < groupCodes.length; i++) {
      groupCodes[i] = fieldCode(window.groupBy[i]);
    }
    valueCodes = new int[window.valueFields.length];
    for (int i = 0; i < valueCodes.length; i++) {
      valueCodes[i] = fieldCode(window.valueFields[i]);
    }
    List<String> out = List.of(fields);
    int end = out.indexOf("windowEnd");
    int[] group = new int[window.groupBy.length];
    for (int i = 0; i < group.length; i++) {
      group[i] = out.indexOf(window.groupBy[i]);
    }
    if (end < 0 || Arrays.stream(group).anyMatch(i -> i < 0)) {
      throw new IllegalArgumentException("query " + id
          + ": a time window's fields need windowEnd and its group fields");
    }
    Comparator<Object[]> order = Comparator.comparingLong(r -> ((Number) r[end]).longValue());
    for (int g : group) {
      order = order.thenComparingDouble(r -> ((Number) r[g]).doubleValue());
    }
    referenceOrder = order;
  }

  /** The query as the paned logic reads it. */
  public WindowQuery window() {
    return window;
  }

  @Override
  public boolean relevant(Event e) {
    return e.stream == 0;
  }

  @Override
  public StreamLogic newLogic() {
    return new Panes(new MemoryStore());
  }

  @Override
  public StreamLogic restore(byte[] state) {
    ByteBuffer b = ByteBuffer.wrap(state).order(ByteOrder.LITTLE_ENDIAN);
    byte v = b.get();
    if (v != Panes.VERSION) {
      throw new IllegalArgumentException("query " + id + ": time window state version " + v + ", this logic reads "
          + Panes.VERSION);
    }
    MemoryStore store = new MemoryStore();
    store.clock = b.get() == 1 ? b.getLong() : null;
    int groups = b.getInt();
    for (int i = 0; i < groups; i++) {
      byte[] name = new byte[b.getInt()];
      b.get(name);
      byte[] record = new byte[b.getInt()];
      b.get(record);
      store.groups.put(new String(name, StandardCharsets.UTF_8), record);
    }
    Panes p = new Panes(store);
    p.openPane = b.getLong();
    int open = b.getInt();
    for (int i = 0; i < open; i++) {
      double[] key = new double[groupCodes.length];
      for (int j = 0; j < key.length; j++) {
        key[j] = b.getDouble();
      }
      p.open.put(new WindowBucket.Key(key), WindowPanes.Acc.read(b, window.median));
    }
    return p;
  }

  private final class Panes implements StreamLogic {
    static final byte VERSION = 1;
    private static final long NONE = Long.MIN_VALUE;
    private final MemoryStore store;
    private final WindowBucket bucket = new WindowBucket(window);
    /** The open pane's records, per group. */
    final Map<WindowBucket.Key, WindowPanes.Acc> open = new LinkedHashMap<>();
    long openPane = NONE;
    private final double[] x = new double[valueCodes.length];

    Panes(MemoryStore store) {
      this.store = store;
      bucket.attach(store);
    }

    @Override
    public void process(Event e, Out out) {
      if (e.stream != 0) {
        return;
      }
      long pane = Math.floorDiv(e.ts, window.slideMs);
      if (pane != openPane) {
        if (openPane != NONE && pane < openPane) {
          throw new IllegalArgumentException("query " + id + ": events must come in TS order (specs/SEMANTICS.md "
              + "section 1): TS " + e.ts + " after an event of pane " + openPane);
        }
        handOver();
        // The event closes every window ending at or before its TS (the bucket ignores a pane it
        // has seen). The bucket gives them group by group; they leave in the reference order.
        List<Object[]> rows = new ArrayList<>();
        bucket.clock(pane, e.ts, e.ingestTs, values -> {
          Object[] row = new Object[values.length - 2];
          System.arraycopy(values, 1, row, 0, row.length);
          rows.add(row);
        });
        rows.sort(referenceOrder);
        for (Object[] row : rows) {
          out.row(row, e.ingestTs);
        }
        openPane = pane;
      }
      double[] g = new double[groupCodes.length];
      for (int i = 0; i < g.length; i++) {
        g[i] = e.value(groupCodes[i]);
      }
      for (int i = 0; i < x.length; i++) {
        x[i] = e.value(valueCodes[i]);
      }
      open.computeIfAbsent(new WindowBucket.Key(g), k -> new WindowPanes.Acc(window.median)).add(x);
    }

    /** The open pane's records into the bucket. */
    private void handOver() {
      for (Map.Entry<WindowBucket.Key, WindowPanes.Acc> r : open.entrySet()) {
        WindowPanes.Acc acc = r.getValue();
        bucket.partial(openPane, acc.n, r.getKey().values, acc.stats(),
            WindowPanes.unpackValues(acc.keptValues(), acc.n, window.median));
      }
      open.clear();
    }

    /**
     * Little-endian: version, the bucket's clock (a flag, then the pane), its group records (name
     * and bytes, as {@link WindowBucket} stores them), the open pane and its records (group values,
     * then every number of the record).
     */
    @Override
    public byte[] toBytes() {
      bucket.flush();
      TreeMap<String, byte[]> groups = new TreeMap<>(store.groups);
      int size = 1 + 1 + 8 + 4 + 8 + 4;
      for (Map.Entry<String, byte[]> g : groups.entrySet()) {
        size += 8 + g.getKey().getBytes(StandardCharsets.UTF_8).length + g.getValue().length;
      }
      for (WindowPanes.Acc acc : open.values()) {
        size += 8 * groupCodes.length + acc.byteSize();
      }
      ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
      b.put(VERSION);
      if (store.clock == null) {
        b.put((byte) 0);
      } else {
        b.put((byte) 1).putLong(store.clock);
      }
      b.putInt(groups.size());
      for (Map.Entry<String, byte[]> g : groups.entrySet()) {
        byte[] name = g.getKey().getBytes(StandardCharsets.UTF_8);
        b.putInt(name.length).put(name).putInt(g.getValue().length).put(g.getValue());
      }
      b.putLong(openPane).putInt(open.size());
      for (Map.Entry<WindowBucket.Key, WindowPanes.Acc> r : open.entrySet()) {
        for (double v : r.getKey().values) {
          b.putDouble(v);
        }
        r.getValue().write(b);
      }
      return Arrays.copyOf(b.array(), b.position());
    }
  }

  /** The bucket's records in memory, as an engine's state would hold them. */
  private static final class MemoryStore implements WindowBucket.Store {
    Long clock;
    final Map<String, byte[]> groups = new LinkedHashMap<>();

    @Override
    public Long clock() {
      return clock;
    }

    @Override
    public void clock(long pane) {
      clock = pane;
    }

    @Override
    public Iterator<Map.Entry<String, byte[]>> groups() {
      return new LinkedHashMap<>(groups).entrySet().iterator();
    }

    @Override
    public void group(String key, byte[] record) {
      groups.put(key, record);
    }

    @Override
    public void remove(String key) {
      groups.remove(key);
    }
  }
}
