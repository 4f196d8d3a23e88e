package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The count-window aggregation (Q2, kind count_window; specs/SEMANTICS.md section 4), the Java
 * twin of runtime_common/micro_cores/count_window.py and of the reference's {@code count_window}
 * (validator/micro_windows.py). One group: the whole input stream ({@link #newLogic}).
 *
 * <p>State: the number of events so far and the last {@code rows} events (their group values and
 * the values the aggregates read) in a ring; derived from them, per group with events in the
 * window, the numbers of its events in order and per value field what its aggregates need:
 * <ul>
 *   <li>SUM, AVG: an exact running sum ({@link ExactSum}), correctly rounded when read; AVG is that
 *   double divided by the count, as the reference divides its SUM;</li>
 *   <li>MAX, MIN: a monotonic deque (exact);</li>
 *   <li>MEDIAN: the values in two counted trees ({@link MedianSet}), (lower + upper middle) / 2;</li>
 *   <li>STDEV: nothing more: at an evaluation the group's values in the window are read twice in
 *   event order, exactly as the reference does (the mean as a running double sum divided by n,
 *   then the running sum of squared deviations, sqrt of it over n), so it is the reference's
 *   double bit for bit.</li>
 * </ul>
 * An event costs O(1) amortized for COUNT, SUM, AVG, MAX, MIN and O(log rows) for MEDIAN; a STDEV
 * costs the group's events in the window per emitted row (at most {@code rows}). An evaluation sorts
 * the groups that had events since the previous one (at most {@code slide}). {@link StreamLogic#toBytes}
 * writes the count and the ring's live events; reading them back rebuilds the per-group parts
 * (O(rows log rows) per restore).
 */
public final class CountWindowLogic extends MicroQuery {
  private final int rows;
  private final int slide;
  private final int[] groupCodes;
  /** The distinct value fields (codes) the aggregates other than COUNT read. */
  private final int[] valueCodes;
  private final String[] functions;
  /** Per aggregate: its value field's index in valueCodes (-1 for COUNT). */
  private final int[] aggField;
  /** Per value field: which structures it needs. */
  private final boolean[] needSum;
  private final boolean[] needMax;
  private final boolean[] needMin;
  private final boolean[] needMedian;
  /** Per output field but inputTS: a group field's index, or AGG + an aggregate's. */
  private final int[] out;
  private static final int AGG = 1 << 20;

  CountWindowLogic(JsonNode q) {
    super(q);
    long r = integer(q, "rows");
    long s = integer(q, "slide");
    if (r < 1 || s < 1 || s > r || r > Integer.MAX_VALUE / 2) {
      throw new IllegalArgumentException("query " + id + ": count window needs 1 <= slide <= rows, got rows " + r
          + " slide " + s);
    }
    rows = (int) r;
    slide = (int) s;
    if (inputs.length != 1) {
      throw new IllegalArgumentException("query " + id + ": a count window reads one stream, got " + inputs.length);
    }
    String[] groupBy = texts(q, "group_by");
    groupCodes = new int[groupBy.length];
    for (int i = 0; i < groupBy.length; i++) {
      groupCodes[i] = fieldCode(groupBy[i]);
    }
    JsonNode aggs = q.get("aggregates");
    if (aggs == null || !aggs.isArray() || aggs.size() == 0) {
      throw new IllegalArgumentException("query " + id + ": a count window needs aggregates");
    }
    functions = new String[aggs.size()];
    aggField = new int[aggs.size()];
    String[] aliases = new String[aggs.size()];
    Map<Integer, Integer> values = new LinkedHashMap<>();
    List<String> known = List.of("COUNT", "SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN");
    for (int a = 0; a < functions.length; a++) {
      functions[a] = aggs.get(a).get(0).asText();
      aliases[a] = aggs.get(a).get(2).asText();
      if (!known.contains(functions[a])) {
        throw new IllegalArgumentException("query " + id + ": no aggregate function " + functions[a]);
      }
      if (functions[a].equals("COUNT")) {
        aggField[a] = -1;
      } else {
        int code = fieldCode(aggs.get(a).get(1).asText());
        values.putIfAbsent(code, values.size());
        aggField[a] = values.get(code);
      }
    }
    valueCodes = values.keySet().stream().mapToInt(Integer::intValue).toArray();
    int v = valueCodes.length;
    needSum = new boolean[v];
    needMax = new boolean[v];
    needMin = new boolean[v];
    needMedian = new boolean[v];
    for (int a = 0; a < functions.length; a++) {
      int f = aggField[a];
      switch (functions[a]) {
        case "SUM":
        case "AVG":
          needSum[f] = true;
          break;
        case "MAX":
          needMax[f] = true;
          break;
        case "MIN":
          needMin[f] = true;
          break;
        case "MEDIAN":
          needMedian[f] = true;
          break;
        default:
          break;
      }
    }
    out = new int[fields.length - 1];
    for (int i = 0; i < out.length; i++) {
      int g = Arrays.asList(groupBy).indexOf(fields[i]);
      int a = Arrays.asList(aliases).indexOf(fields[i]);
      if (g >= 0) {
        out[i] = g;
      } else if (a >= 0) {
        out[i] = AGG + a;
      } else {
        throw new IllegalArgumentException("query " + id + ": output field " + fields[i]
            + " is neither a group field nor an aggregate");
      }
    }
  }

  /** Every event of the input stream counts in the window. */
  @Override
  public boolean relevant(Event e) {
    return e.stream == 0;
  }

  @Override
  public StreamLogic newLogic() {
    return new Window();
  }

  @Override
  public StreamLogic restore(byte[] state) {
    ByteBuffer b = ByteBuffer.wrap(state).order(ByteOrder.LITTLE_ENDIAN);
    byte v = b.get();
    if (v != Window.VERSION) {
      throw new IllegalArgumentException("query " + id + ": count window state version " + v
          + ", this logic reads " + Window.VERSION);
    }
    int r = b.getInt();
    int g = b.getInt();
    int f = b.getInt();
    if (r != rows || g != groupCodes.length || f != valueCodes.length) {
      throw new IllegalArgumentException("query " + id + ": the count window state is of another query");
    }
    long n = b.getLong();
    int kept = b.getInt();
    Window w = new Window();
    w.n = n - kept;
    double[] keys = new double[g];
    double[] vals = new double[f];
    for (int i = 0; i < kept; i++) {
      for (int j = 0; j < g; j++) {
        keys[j] = b.getDouble();
      }
      for (int j = 0; j < f; j++) {
        vals[j] = b.getDouble();
      }
      w.enter(keys, vals);
    }
    // Only the groups of events since the last evaluation wait for the next one.
    w.entered.clear();
    for (Group grp : w.groups.values()) {
      if (grp.listedFor > n) {
        w.entered.add(grp);
      }
    }
    return w;
  }

  /** A group's events in the window and its aggregates' running parts. */
  private final class Group {
    final double[] key;
    /** Numbers (0-based positions in the stream) of its events in the window, oldest first. */
    final LongRing events = new LongRing();
    final ExactSum[] sums = new ExactSum[valueCodes.length];
    final LongRing[] maxq = new LongRing[valueCodes.length];
    final LongRing[] minq = new LongRing[valueCodes.length];
    final MedianSet[] medians = new MedianSet[valueCodes.length];
    /** The evaluation this group was last listed for (so it is listed once). */
    long listedFor = -1;

    Group(double[] key) {
      this.key = key;
      for (int f = 0; f < valueCodes.length; f++) {
        sums[f] = needSum[f] ? new ExactSum() : null;
        maxq[f] = needMax[f] ? new LongRing() : null;
        minq[f] = needMin[f] ? new LongRing() : null;
        medians[f] = needMedian[f] ? new MedianSet() : null;
      }
    }
  }

  private final class Window implements StreamLogic {
    static final byte VERSION = 1;
    /** Events so far. */
    long n;
    /** Per ring slot (position % rows): the event's group, and its values. */
    final Group[] groupOf = new Group[rows];
    final double[] ring = new double[rows * Math.max(valueCodes.length, 1)];
    final Map<GroupKey, Group> groups = new HashMap<>();
    /** Groups with an event since the previous evaluation (the next one emits them). */
    final List<Group> entered = new ArrayList<>();
    private final double[] keyBuf = new double[groupCodes.length];
    private final double[] valBuf = new double[valueCodes.length];

    @Override
    public void process(Event e, Out sink) {
      if (e.stream != 0) {
        return;
      }
      for (int j = 0; j < groupCodes.length; j++) {
        keyBuf[j] = e.value(groupCodes[j]);
      }
      for (int j = 0; j < valueCodes.length; j++) {
        valBuf[j] = e.value(valueCodes[j]);
      }
      enter(keyBuf, valBuf);
      if (n >= rows && (n - rows) % slide == 0) {
        evaluate(e, sink);
      }
    }

    /** Event number n enters: the one `rows` before it leaves. */
    void enter(double[] key, double[] vals) {
      long pos = n;
      int slot = (int) (pos % rows);
      if (groupOf[slot] != null) {        // (empty in a restored state's first slots)
        leave(pos - rows, slot);
      }
      GroupKey k = new GroupKey(key);
      Group g = groups.get(k);
      if (g == null) {
        g = new Group(k.values);
        groups.put(k, g);
      }
      int width = valueCodes.length;
      System.arraycopy(vals, 0, ring, slot * width, width);
      groupOf[slot] = g;
      g.events.addLast(pos);
      for (int f = 0; f < width; f++) {
        double x = vals[f];
        if (g.sums[f] != null) {
          g.sums[f].add(x);
        }
        if (g.maxq[f] != null) {
          LongRing q = g.maxq[f];
          while (q.size() > 0 && value(q.last(), f) <= x) {
            q.removeLast();
          }
          q.addLast(pos);
        }
        if (g.minq[f] != null) {
          LongRing q = g.minq[f];
          while (q.size() > 0 && value(q.last(), f) >= x) {
            q.removeLast();
          }
          q.addLast(pos);
        }
        if (g.medians[f] != null) {
          g.medians[f].add(x);
        }
      }
      // The next evaluation lists g: events since the previous one (all of the first window).
      long next = pos < rows ? rows : rows + ((pos - rows) / slide + 1) * slide;
      if (g.listedFor != next) {
        g.listedFor = next;
        entered.add(g);
      }
      n = pos + 1;
    }

    private void leave(long pos, int slot) {
      Group g = groupOf[slot];
      groupOf[slot] = null;
      g.events.removeFirst();
      int width = valueCodes.length;
      for (int f = 0; f < width; f++) {
        double x = ring[slot * width + f];
        if (g.sums[f] != null) {
          g.sums[f].remove(x);
        }
        if (g.maxq[f] != null && g.maxq[f].first() == pos) {
          g.maxq[f].removeFirst();
        }
        if (g.minq[f] != null && g.minq[f].first() == pos) {
          g.minq[f].removeFirst();
        }
        if (g.medians[f] != null) {
          g.medians[f].remove(x);
        }
      }
      if (g.events.size() == 0) {
        // slide <= rows: a group listed for the next evaluation still has an event in the window.
        groups.remove(new GroupKey(g.key));
      }
    }

    private double value(long pos, int f) {
      return ring[(int) (pos % rows) * valueCodes.length + f];
    }

    private void evaluate(Event trigger, Out sink) {
      if (groupCodes.length > 0) {
        entered.sort((a, b) -> {
          for (int j = 0; j < a.key.length; j++) {
            int c = Double.compare(a.key[j], b.key[j]);
            if (c != 0) {
              return c;
            }
          }
          return 0;
        });
      }
      for (Group g : entered) {
        Object[] row = new Object[fields.length];
        for (int i = 0; i < out.length; i++) {
          double v = out[i] >= AGG ? aggregate(g, out[i] - AGG) : g.key[out[i]];
          row[i] = typed(v, types[i]);
        }
        row[out.length] = typed((double) trigger.ts, types[out.length]);
        sink.row(row, trigger.ingestTs);
      }
      entered.clear();
    }

    private double aggregate(Group g, int a) {
      int f = aggField[a];
      long count = g.events.size();
      switch (functions[a]) {
        case "COUNT":
          return count;
        case "SUM":
          return g.sums[f].value();
        case "AVG":
          return g.sums[f].value() / count;
        case "MAX":
          return value(g.maxq[f].first(), f);
        case "MIN":
          return value(g.minq[f].first(), f);
        case "MEDIAN":
          return g.medians[f].median();
        default:
          return stdev(g, f);
      }
    }

    /** The reference's two passes (validator/micro_windows.py RangeAggregator.stdev), in event order. */
    private double stdev(Group g, int f) {
      int m = g.events.size();
      double s = 0.0;
      for (int i = 0; i < m; i++) {
        s += value(g.events.get(i), f);
      }
      double mean = s / m;
      double dev = 0.0;
      for (int i = 0; i < m; i++) {
        double d = value(g.events.get(i), f) - mean;
        dev += d * d;
      }
      return Math.sqrt(dev / m);
    }

    /**
     * Little-endian: version, rows, group fields, value fields, the events so far, the number
     * kept, then per kept event (oldest first) its group values and its values.
     */
    @Override
    public byte[] toBytes() {
      int kept = (int) Math.min(n, rows);
      int g = groupCodes.length;
      int width = valueCodes.length;
      ByteBuffer b = ByteBuffer.allocate(1 + 12 + 8 + 4 + 8 * kept * (g + width)).order(ByteOrder.LITTLE_ENDIAN);
      b.put(VERSION).putInt(rows).putInt(g).putInt(width).putLong(n).putInt(kept);
      for (long pos = n - kept; pos < n; pos++) {
        int slot = (int) (pos % rows);
        for (double k : groupOf[slot].key) {
          b.putDouble(k);
        }
        for (int f = 0; f < width; f++) {
          b.putDouble(ring[slot * width + f]);
        }
      }
      return b.array();
    }
  }

  /** A group's values as a hash key (doubles compared by their bits; -0.0 read as 0.0). */
  private static final class GroupKey {
    final double[] values;
    private final int hash;

    GroupKey(double[] v) {
      values = v.clone();
      for (int i = 0; i < values.length; i++) {
        if (values[i] == 0.0) {
          values[i] = 0.0;
        }
      }
      hash = Arrays.hashCode(values);
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof GroupKey && Arrays.equals(values, ((GroupKey) o).values);
    }
  }
}
