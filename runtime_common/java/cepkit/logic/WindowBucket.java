package cepkit.logic;

import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

/**
 * One state key's share of a time-window query (specs/TRANSLATION.md): the pane records of its
 * groups, fed partial records and clocks (Spark: the rows its source's task makes,
 * spark_runtime/java/cepkit/spark/WindowRealTime.java; {@link TimeWindowLogic}: its own).
 *
 * <ul>
 *   <li>a <em>partial</em> row adds one (pane, group) record of the source's to the group's panes;</li>
 *   <li>a <em>clock</em> row says an event of pane P arrived (the first of its pane in the source's
 *   task). Its TS is the first at or past every window end {@code m*slide} with m in
 *   (the last clock's pane, P], so it closes those windows: one row per group with records in
 *   panes {@code [m - k, m)}, with {@code windowEnd = m*slide} and the clock row's TS as inputTS
 *   (specs/SEMANTICS.md section 5). A clock of a pane already seen (a new task's first event) does
 *   nothing.</li>
 * </ul>
 *
 * The source sends a pane's partial rows when the pane has ended (before the next pane's clock
 * rows) or when its task's input ends, so every record a window needs is in before the clock that
 * closes it. State, in the {@link Store}: the last clock's pane, and per group its records
 * ({@link WindowPanes}) of the panes an open window still reads. A bucket reads the store once
 * per task and keeps it decoded; {@link #flush} writes what changed.
 */
public final class WindowBucket {
  /** Where a bucket's records live between tasks (Spark's state store, or the tests' map). */
  public interface Store {
    /** The last clock's pane; null before any. */
    Long clock();

    void clock(long pane);

    Iterator<Map.Entry<String, byte[]>> groups();

    void group(String key, byte[] record);

    void remove(String key);
  }

  /** Takes each output row's values ({@link WindowQuery#row}'s order: query id, fields, ingestTS). */
  public interface Out {
    void row(Object[] values);
  }

  private static final long NONE = Long.MIN_VALUE;
  private final WindowQuery q;
  private Store store;
  private long lastPane = NONE;
  private boolean clockChanged;
  private final Map<Key, WindowPanes> groups = new HashMap<>();
  private final Set<Key> changed = new HashSet<>();

  public WindowBucket(WindowQuery q) {
    this.q = q;
  }

  public boolean attached() {
    return store != null;
  }

  /** Read the bucket's records from `s` (once per task: what is decoded is valid within it). */
  public void attach(Store s) {
    store = s;
    Long clock = s.clock();
    lastPane = clock == null ? NONE : clock;
    for (Iterator<Map.Entry<String, byte[]>> it = s.groups(); it.hasNext(); ) {
      Map.Entry<String, byte[]> e = it.next();
      Key key = Key.parse(e.getKey());
      WindowPanes panes = WindowPanes.fromBytes(e.getValue(), q.median);
      // Records no open window reads are dropped where the store still holds them.
      if (lastPane != NONE && panes.dropBefore(lastPane + 1 - q.k) && panes.size == 0) {
        changed.add(key);
      } else {
        groups.put(key, panes);
      }
    }
  }

  public void partial(long pane, long n, double[] group, double[] stats, double[][] values) {
    if (lastPane != NONE && pane < lastPane) {
      throw new IllegalStateException("time window " + q.id + ": records of pane " + pane + " after the clock of pane "
          + lastPane);
    }
    Key key = new Key(group);
    WindowPanes panes = groups.get(key);
    WindowPanes grown = (panes == null ? new WindowPanes(4) : panes).add(pane, n, stats, values);
    if (grown != panes) {
      groups.put(key, grown);
    }
    changed.add(key);
  }

  public void clock(long pane, long ts, long ingestTs, Out out) {
    if (lastPane == NONE) {
      // The first event: the windows it would close end at or before its TS and hold no event.
      lastPane = pane;
      clockChanged = true;
      return;
    }
    if (pane <= lastPane) {
      return;
    }
    long first = lastPane + 1;
    for (Iterator<Map.Entry<Key, WindowPanes>> it = groups.entrySet().iterator(); it.hasNext(); ) {
      Map.Entry<Key, WindowPanes> e = it.next();
      WindowPanes p = e.getValue();
      if (p.size > 0) {
        close(e.getKey().values, p, Math.max(first, p.pane[0] + 1), Math.min(pane, p.pane[p.size - 1] + q.k), ts,
            ingestTs, out);
      }
      // Windows after m = pane read panes from pane + 1 - k on.
      if (p.dropBefore(pane + 1 - q.k) && p.size == 0) {
        it.remove();
        changed.add(e.getKey());
      }
    }
    lastPane = pane;
    clockChanged = true;
  }

  /** The rows of windows m in [lo, hi] of one group: each combines its records of panes [m - k, m). */
  private void close(double[] group, WindowPanes p, long lo, long hi, long ts, long ingestTs, Out out) {
    int from = 0;
    for (long m = lo; m <= hi; m++) {
      while (from < p.size && p.pane[from] < m - q.k) {
        from++;
      }
      long n = 0;
      double[] stats = null;
      double[][] medians = null;
      for (int i = from; i < p.size && p.pane[i] < m; i++) {
        stats = stats == null ? p.stats[i] : WindowPanes.merged(n, stats, p.n[i], p.stats[i]);
        n += p.n[i];
        if (medians == null) {
          medians = new double[q.median.length][];
          for (int f = 0; f < medians.length; f++) {
            medians[f] = q.median[f] ? p.values[i][f] : null;
          }
        } else {
          for (int f = 0; f < medians.length; f++) {
            if (q.median[f]) {
              medians[f] = WindowPanes.concat(medians[f], p.values[i][f]);
            }
          }
        }
      }
      if (n > 0) {
        out.row(q.row(group, m, n, stats, medians, ts, ingestTs));
      }
    }
  }

  /** Write what the rows handled since the last flush changed. */
  public void flush() {
    if (clockChanged) {
      store.clock(lastPane);
      clockChanged = false;
    }
    for (Key key : changed) {
      WindowPanes p = groups.get(key);
      if (p == null) {
        store.remove(key.name());
      } else {
        store.group(key.name(), p.toBytes(q.median));
      }
    }
    changed.clear();
  }

  /** A group: its values as doubles (exact for the ids groups are keyed by), hashed once. */
  public static final class Key {
    public final double[] values;
    private final int hash;

    public Key(double[] values) {
      this.values = values;
      this.hash = Arrays.hashCode(values);
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Key && Arrays.equals(values, ((Key) o).values);
    }

    /** The state store's key: each value's bits in hex (exact, and the same on every JVM). */
    public String name() {
      StringBuilder b = new StringBuilder();
      for (double v : values) {
        b.append(b.length() == 0 ? "" : ",").append(Long.toHexString(Double.doubleToLongBits(v)));
      }
      return b.toString();
    }

    public static Key parse(String name) {
      if (name.isEmpty()) {
        return new Key(new double[0]);
      }
      String[] parts = name.split(",");
      double[] v = new double[parts.length];
      for (int i = 0; i < v.length; i++) {
        v[i] = Double.longBitsToDouble(Long.parseUnsignedLong(parts[i], 16));
      }
      return new Key(v);
    }
  }
}
