package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * One group's pane records of a time-window query (the paned plan of specs/SEMANTICS.md section
 * 5): per pane {@code [j*slide, (j+1)*slide)} its event count and, per value field, the sum, M2
 * (the sum of squared deviations from the pane's mean), max, min, an anchor (one of its values)
 * and the mean of the values minus the anchor, plus the values themselves for a field a MEDIAN
 * reads. Panes are in increasing order; records merge with Chan et al.'s formula, so no sum of
 * squares is ever formed, and the difference of two records' means is taken as (difference of
 * anchors) + (difference of the means from them): for values close together far from 0 (1e9 +-
 * 1) both parts are exact or small, where sum / n would round at the scale of the values and
 * spoil the between-record term of STDEV. Engine-neutral (package cepkit.logic): Spark's real-time
 * and micro-batch plans (spark_runtime/java/cepkit/spark/WindowRealTime.java) and
 * {@link TimeWindowLogic} use it.
 *
 * <p>{@link Acc} is the source side's running record of one (pane, group): Welford's update per
 * event.
 */
public final class WindowPanes {
  final long[] pane;
  final long[] n;
  /** Per pane, {@link WindowQuery#STATS} doubles per value field. */
  final double[][] stats;
  /** Per pane, per value field, its values (null where no MEDIAN reads the field). */
  final double[][][] values;
  int size;

  WindowPanes(int capacity) {
    pane = new long[capacity];
    n = new long[capacity];
    stats = new double[capacity][];
    values = new double[capacity][][];
  }

  /** Add a pane record (or merge it into the last record when it is the same pane). */
  WindowPanes add(long p, long count, double[] st, double[][] vals) {
    if (size > 0 && pane[size - 1] == p) {
      int i = size - 1;
      stats[i] = merged(n[i], stats[i], count, st);
      n[i] += count;
      for (int f = 0; f < vals.length; f++) {
        if (vals[f] != null) {
          values[i][f] = concat(values[i][f], vals[f]);
        }
      }
      return this;
    }
    if (size > 0 && p < pane[size - 1]) {
      throw new IllegalStateException("time window: pane " + p + " came after pane " + pane[size - 1]
          + " (the events are not in TS order)");
    }
    WindowPanes out = size < pane.length ? this : grown(Math.max(4, 2 * pane.length));
    out.pane[size] = p;
    out.n[size] = count;
    out.stats[size] = st;
    out.values[size] = vals;
    out.size = size + 1;
    return out;
  }

  private WindowPanes grown(int capacity) {
    WindowPanes g = new WindowPanes(capacity);
    System.arraycopy(pane, 0, g.pane, 0, size);
    System.arraycopy(n, 0, g.n, 0, size);
    System.arraycopy(stats, 0, g.stats, 0, size);
    System.arraycopy(values, 0, g.values, 0, size);
    g.size = size;
    return g;
  }

  /** Drop the records of panes before {@code first}; whether any was dropped. */
  boolean dropBefore(long first) {
    int cut = 0;
    while (cut < size && pane[cut] < first) {
      cut++;
    }
    if (cut == 0) {
      return false;
    }
    int rest = size - cut;
    System.arraycopy(pane, cut, pane, 0, rest);
    System.arraycopy(n, cut, n, 0, rest);
    System.arraycopy(stats, cut, stats, 0, rest);
    System.arraycopy(values, cut, values, 0, rest);
    Arrays.fill(stats, rest, size, null);
    Arrays.fill(values, rest, size, null);
    size = rest;
    return true;
  }

  /** The statistics of records a and b merged: sums and extremes add up, M2 by Chan et al. */
  static double[] merged(long na, double[] a, long nb, double[] b) {
    double[] out = new double[a.length];
    for (int f = 0; f < a.length; f += WindowQuery.STATS) {
      double delta = (b[f + WindowQuery.ANCHOR] - a[f + WindowQuery.ANCHOR])
          + (b[f + WindowQuery.MEAN] - a[f + WindowQuery.MEAN]);
      out[f + WindowQuery.SUM] = a[f + WindowQuery.SUM] + b[f + WindowQuery.SUM];
      out[f + WindowQuery.ANCHOR] = a[f + WindowQuery.ANCHOR];
      out[f + WindowQuery.MEAN] = a[f + WindowQuery.MEAN] + delta * ((double) nb / (na + nb));
      out[f + WindowQuery.M2] = a[f + WindowQuery.M2] + b[f + WindowQuery.M2]
          + delta * delta * ((double) na * nb / (na + nb));
      out[f + WindowQuery.MAX] = Math.max(a[f + WindowQuery.MAX], b[f + WindowQuery.MAX]);
      out[f + WindowQuery.MIN] = Math.min(a[f + WindowQuery.MIN], b[f + WindowQuery.MIN]);
    }
    return out;
  }

  static double[] concat(double[] a, double[] b) {
    double[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  /** Little-endian bytes: size, then per record pane, n, its stats and each kept field's values. */
  byte[] toBytes(boolean[] median) {
    int bytes = 4;
    for (int i = 0; i < size; i++) {
      bytes += 16 + 8 * stats[i].length;
      for (int f = 0; f < median.length; f++) {
        bytes += median[f] ? 4 + 8 * values[i][f].length : 0;
      }
    }
    ByteBuffer b = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(size);
    for (int i = 0; i < size; i++) {
      b.putLong(pane[i]).putLong(n[i]);
      for (double x : stats[i]) {
        b.putDouble(x);
      }
      for (int f = 0; f < median.length; f++) {
        if (median[f]) {
          b.putInt(values[i][f].length);
          for (double x : values[i][f]) {
            b.putDouble(x);
          }
        }
      }
    }
    return b.array();
  }

  static WindowPanes fromBytes(byte[] bytes, boolean[] median) {
    ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    int size = b.getInt();
    WindowPanes out = new WindowPanes(Math.max(4, size));
    for (int i = 0; i < size; i++) {
      out.pane[i] = b.getLong();
      out.n[i] = b.getLong();
      double[] st = new double[median.length * WindowQuery.STATS];
      for (int j = 0; j < st.length; j++) {
        st[j] = b.getDouble();
      }
      out.stats[i] = st;
      double[][] vals = new double[median.length][];
      for (int f = 0; f < median.length; f++) {
        if (median[f]) {
          vals[f] = new double[b.getInt()];
          for (int j = 0; j < vals[f].length; j++) {
            vals[f][j] = b.getDouble();
          }
        }
      }
      out.values[i] = vals;
    }
    out.size = size;
    return out;
  }

  /**
   * The source side's record of one (pane, group): per value field Welford's running mean and M2
   * of the values minus the anchor (the record's first value), the sum, max and min.
   */
  public static final class Acc {
    public long n;
    final double[] sum;
    final double[] anchor;
    final double[] mean;
    final double[] m2;
    final double[] max;
    final double[] min;
    final double[][] values;
    final int[] counts;

    public Acc(boolean[] median) {
      int f = median.length;
      sum = new double[f];
      anchor = new double[f];
      mean = new double[f];
      m2 = new double[f];
      max = new double[f];
      min = new double[f];
      values = new double[f][];
      counts = new int[f];
      for (int i = 0; i < f; i++) {
        max[i] = Double.NEGATIVE_INFINITY;
        min[i] = Double.POSITIVE_INFINITY;
        values[i] = median[i] ? new double[8] : null;
      }
    }

    public void add(double[] x) {
      n++;
      for (int f = 0; f < x.length; f++) {
        if (n == 1) {
          anchor[f] = x[f];
        }
        double d = x[f] - anchor[f];
        double delta = d - mean[f];
        mean[f] += delta / n;
        m2[f] += delta * (d - mean[f]);
        sum[f] += x[f];
        max[f] = Math.max(max[f], x[f]);
        min[f] = Math.min(min[f], x[f]);
        if (values[f] != null) {
          if (counts[f] == values[f].length) {
            values[f] = Arrays.copyOf(values[f], 2 * counts[f]);
          }
          values[f][counts[f]++] = x[f];
        }
      }
    }

    public double[] stats() {
      double[] out = new double[sum.length * WindowQuery.STATS];
      for (int f = 0; f < sum.length; f++) {
        out[f * WindowQuery.STATS + WindowQuery.SUM] = sum[f];
        out[f * WindowQuery.STATS + WindowQuery.M2] = m2[f];
        out[f * WindowQuery.STATS + WindowQuery.MAX] = max[f];
        out[f * WindowQuery.STATS + WindowQuery.MIN] = min[f];
        out[f * WindowQuery.STATS + WindowQuery.ANCHOR] = anchor[f];
        out[f * WindowQuery.STATS + WindowQuery.MEAN] = mean[f];
      }
      return out;
    }

    /** Every number of the record (little-endian): n, then per field sum, anchor, mean, M2, max, min, kept values. */
    void write(ByteBuffer b) {
      b.putLong(n);
      for (int f = 0; f < sum.length; f++) {
        b.putDouble(sum[f]).putDouble(anchor[f]).putDouble(mean[f]);
        b.putDouble(m2[f]).putDouble(max[f]).putDouble(min[f]);
        if (values[f] != null) {
          b.putInt(counts[f]);
          for (int i = 0; i < counts[f]; i++) {
            b.putDouble(values[f][i]);
          }
        }
      }
    }

    int byteSize() {
      int size = 8 + 48 * sum.length;
      for (int f = 0; f < sum.length; f++) {
        size += values[f] == null ? 0 : 4 + 8 * counts[f];
      }
      return size;
    }

    static Acc read(ByteBuffer b, boolean[] median) {
      Acc a = new Acc(median);
      a.n = b.getLong();
      for (int f = 0; f < median.length; f++) {
        a.sum[f] = b.getDouble();
        a.anchor[f] = b.getDouble();
        a.mean[f] = b.getDouble();
        a.m2[f] = b.getDouble();
        a.max[f] = b.getDouble();
        a.min[f] = b.getDouble();
        if (median[f]) {
          a.counts[f] = b.getInt();
          a.values[f] = new double[Math.max(8, a.counts[f])];
          for (int i = 0; i < a.counts[f]; i++) {
            a.values[f][i] = b.getDouble();
          }
        }
      }
      return a;
    }

    /** The kept values per field (null where no MEDIAN reads it), as packed doubles: field-major. */
    public double[] keptValues() {
      int total = 0;
      for (int f = 0; f < values.length; f++) {
        total += values[f] == null ? 0 : counts[f];
      }
      double[] out = new double[total];
      int at = 0;
      for (int f = 0; f < values.length; f++) {
        if (values[f] != null) {
          System.arraycopy(values[f], 0, out, at, counts[f]);
          at += counts[f];
        }
      }
      return out;
    }
  }

  /** Packed field-major values (n per kept field) back into one array per field. */
  public static double[][] unpackValues(double[] packed, long n, boolean[] median) {
    double[][] out = new double[median.length][];
    int at = 0;
    for (int f = 0; f < median.length; f++) {
      if (median[f]) {
        out[f] = Arrays.copyOfRange(packed, at, at + (int) n);
        at += (int) n;
      }
    }
    return out;
  }
}
