package cepkit.logic;

import java.util.Arrays;

/**
 * Pairs' per-tick work, engine-neutral: ticks in feed order to the partial rows that
 * runtime_common/pairs_partials.py makes of a batch, one tick at a time. At the first tick of a
 * granule, a clock row for every bucket (the tick's offset, tickTS, TS, ingestTS, price and its
 * symbol's code in that bucket, or -1); and per monitored symbol one aggregate row of the granule's
 * ticks (count, price sum, last price and its offset), sent when the granule has ended: at the next
 * granule's first tick, just before its clock rows, or at {@link #flush}. An aggregate row changes
 * only its symbol's open-period sums and a bucket answers only at a clock row, so summing here
 * changes no output and no output's time, and the buckets get one row per symbol and granule
 * instead of one per tick (at quick SF 32, whose granule is 5 s: about 10,000 rows instead of
 * 3,015,137, 0.3 %).
 *
 * <p>Spark's real-time source tasks (cepkit.spark.PairsRealTime) start one afresh per task and
 * flush at the task's end; Flink's partials operator (cepkit.flink.PairsFlink) keeps one for the
 * job and checkpoints its {@link #state}. A fresh one sends its first tick's clock rows too, which a
 * bucket already in that granule ignores (PairsBucket).
 */
public final class PairsPartials {
  /** Takes the partial rows (pairs_partials.PARTIAL_FIELDS): a clock row has {@code cnt == 0}. */
  public interface Out {
    void partial(int key, long granule, int code, long cnt, long sum, long price, long offset, long tickTs, long ts,
                 long ingestTs);
  }

  private final PairsLayout layout;
  // A (bucket, symbol) slot per monitored symbol: bucket b's symbols from base[b] on.
  private final int[] base;
  private final int[] bucketOf;
  private final int[] localOf;
  // The open granule (Long.MIN_VALUE: none yet), its sums per slot, and the slots it touched in order.
  private long lastGranule = Long.MIN_VALUE;
  private final long[] count;
  private final long[] sum;
  private final long[] price;
  private final long[] offset;
  private final int[] touched;
  private int touchedN;

  public PairsPartials(PairsLayout layout) {
    this.layout = layout;
    base = new int[layout.keys.length];
    int slots = 0;
    for (int b = 0; b < base.length; b++) {
      base[b] = slots;
      slots += layout.buckets.get(b).symbols.length;
    }
    bucketOf = new int[slots];
    localOf = new int[slots];
    for (int b = 0; b < base.length; b++) {
      for (int j = 0; j < layout.buckets.get(b).symbols.length; j++) {
        bucketOf[base[b] + j] = b;
        localOf[base[b] + j] = j;
      }
    }
    count = new long[slots];
    sum = new long[slots];
    price = new long[slots];
    offset = new long[slots];
    touched = new int[slots];
  }

  /** One tick, in feed order. */
  public void tick(String symbol, long p, long tickTs, long ts, long off, long ingestTs, Out out) {
    long g = Math.floorDiv(tickTs, layout.granuleMs);
    int[] place = layout.placeOf.get(symbol);
    if (g != lastGranule) {
      flush(out);
      // The first tick of a granule (or of a fresh instance, which a bucket that saw it ignores):
      // every bucket's clock.
      for (int b = 0; b < layout.keys.length; b++) {
        int local = place != null && place[0] == b ? place[1] : -1;
        out.partial(layout.keys[b], g, local, 0L, 0L, p, off, tickTs, ts, ingestTs);
      }
      lastGranule = g;
    }
    if (place != null) {
      int slot = base[place[0]] + place[1];
      if (count[slot] == 0) {
        touched[touchedN++] = slot;
      }
      count[slot]++;
      sum[slot] += p;
      price[slot] = p;
      offset[slot] = off;
    }
  }

  /** Send the open granule's sums now (a task's input ended); the granule stays open. */
  public void flush(Out out) {
    for (int i = 0; i < touchedN; i++) {
      int slot = touched[i];
      out.partial(layout.keys[bucketOf[slot]], lastGranule, localOf[slot], count[slot], sum[slot], price[slot],
          offset[slot], 0L, 0L, 0L);
      count[slot] = 0;
      sum[slot] = 0;
    }
    touchedN = 0;
  }

  /** What a checkpoint keeps: the open granule and its unsent sums, {@code [granule, (slot, count,
   * sum, price, offset)...]} in the order the slots were touched. */
  public long[] state() {
    long[] s = new long[1 + 5 * touchedN];
    s[0] = lastGranule;
    for (int i = 0; i < touchedN; i++) {
      int slot = touched[i];
      s[1 + 5 * i] = slot;
      s[2 + 5 * i] = count[slot];
      s[3 + 5 * i] = sum[slot];
      s[4 + 5 * i] = price[slot];
      s[5 + 5 * i] = offset[slot];
    }
    return s;
  }

  /** Continue from a {@link #state} (of the same layout). */
  public void restore(long[] s) {
    if (s.length < 1 || (s.length - 1) % 5 != 0) {
      throw new IllegalArgumentException("pairs partials: a state of " + s.length + " longs");
    }
    Arrays.fill(count, 0);
    Arrays.fill(sum, 0);
    lastGranule = s[0];
    touchedN = 0;
    for (int i = 0; 1 + 5 * i < s.length; i++) {
      int slot = (int) s[1 + 5 * i];
      if (slot < 0 || slot >= count.length) {
        throw new IllegalArgumentException("pairs partials: slot " + slot + " of " + count.length
            + " (a state of other strategies?)");
      }
      touched[touchedN++] = slot;
      count[slot] = s[2 + 5 * i];
      sum[slot] = s[3 + 5 * i];
      price[slot] = s[4 + 5 * i];
      offset[slot] = s[5 + 5 * i];
    }
  }
}
