package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * One bucket of Pairs strategies over its partial rows one at a time, in the order the feed
 * released their ticks: runtime_common/pairs_bucket.py's logic for a stream instead of a
 * micro-batch. A clock row (count 0) is the first tick of a granule; the first one of a granule
 * later than the open one closes the open period of every period length P that it starts a later
 * period of (PAIRS_SEMANTICS.md section 2), with the last trade prices at that tick; an aggregate
 * row (count > 0) adds a tick of one of the bucket's symbols to the open period of every P. A
 * clock row of a granule already open (sent again when a real-time batch's reader, or a restored
 * Flink job's partials operator, starts) changes nothing; one of an earlier granule, or an aggregate row of a granule that is not open, means
 * ticks out of order, and fails the query.
 *
 * <p>Engine-neutral: Spark's real-time {@code transformWithState} (cepkit.spark.PairsRealTime) and
 * Flink's {@code KeyedProcessFunction} (cepkit.flink.PairsFlink) run it over their keyed state.
 * Its state (specs/TRANSLATION.md, "Pairs in real-time mode") is kept in a {@link Store} as
 * packed little-endian byte records: {@code clock} (the open granule and the open period of each P),
 * one {@code symbol} record per symbol (its open-period price sum and tick count per P, and its last
 * trade price), and {@code books} (every strategy's state). A bucket reads its store once, the first
 * time it is used ({@link #attach}), keeps the decoded state, and {@link #flush} writes back only
 * the records that rows changed: an aggregate row changes one symbol's record, a closing clock row
 * the clock, the closed periods' symbols and the books. Real-time mode hands a bucket its rows
 * one or a few at a time (Flink one at a time), so rewriting a whole record per call was where its
 * time went.
 */
public final class PairsBucket {
  /** Where a bucket's records live between runs of rows (the engine's keyed state, or a test's map). */
  public interface Store {
    byte[] clock();                     // null: unset

    void clock(byte[] record);

    byte[] symbol(int code);            // null: unset

    void symbol(int code, byte[] record);

    byte[] books();                     // null: unset

    void books(byte[] record);
  }

  final PairsLayout.Bucket bucket;
  final long granuleMs;
  final long[] periods;          // the bucket's period lengths in ms, ascending
  final PairsBook[] books;
  final int symbols;

  // The decoded state, read from the store on attach.
  private Store store;
  long granule = -1;             // -1: none yet
  long[] openPeriods;
  long[][] sums;
  long[][] counts;
  long[] last;
  // The books, read from the store when a period first closes.
  PairsBook.State[] states;
  // What rows changed since the last flush.
  private boolean clockChanged;
  private final boolean[] symbolChanged;
  private boolean booksChanged;

  public PairsBucket(PairsLayout.Bucket bucket, long granuleMs) {
    this.bucket = bucket;
    this.granuleMs = granuleMs;
    Map<String, Integer> code = new HashMap<>();
    for (int i = 0; i < bucket.symbols.length; i++) {
      code.put(bucket.symbols[i], i);
    }
    TreeMap<Long, List<PairsLayout.Strategy>> byPeriod = new TreeMap<>();
    for (PairsLayout.Strategy s : bucket.strategies) {
      byPeriod.computeIfAbsent(s.periodS * 1000, p -> new ArrayList<>()).add(s);
    }
    periods = new long[byPeriod.size()];
    books = new PairsBook[byPeriod.size()];
    int i = 0;
    for (Map.Entry<Long, List<PairsLayout.Strategy>> e : byPeriod.entrySet()) {
      periods[i] = e.getKey();
      books[i++] = new PairsBook(e.getValue(), code);
    }
    symbols = bucket.symbols.length;
    symbolChanged = new boolean[symbols];
  }

  /** Whether the state was read from a store already. */
  public boolean attached() {
    return store != null;
  }

  /** Read the clock and symbol records from {@code from} (the books wait for a period to close);
   * later flushes write there. */
  public void attach(Store from) {
    store = from;
    int p = periods.length;
    openPeriods = new long[p];
    sums = new long[p][symbols];
    counts = new long[p][symbols];
    last = new long[symbols];
    granule = -1;
    states = null;
    clockChanged = booksChanged = false;
    java.util.Arrays.fill(symbolChanged, false);
    byte[] clock = from.clock();
    if (clock == null) {
      return;
    }
    ByteBuffer b = ByteBuffer.wrap(clock).order(ByteOrder.LITTLE_ENDIAN);
    granule = b.getLong();
    for (int i = 0; i < p; i++) {
      openPeriods[i] = b.getLong();
    }
    for (int j = 0; j < symbols; j++) {
      byte[] record = from.symbol(j);
      if (record == null) {
        continue;                     // no tick of it yet
      }
      ByteBuffer r = ByteBuffer.wrap(record).order(ByteOrder.LITTLE_ENDIAN);
      for (int i = 0; i < p; i++) {
        sums[i][j] = r.getLong();
        counts[i][j] = r.getLong();
      }
      last[j] = r.getLong();
    }
  }

  /** Write the records rows changed since the last flush. */
  public void flush() {
    int p = periods.length;
    if (clockChanged) {
      ByteBuffer b = ByteBuffer.allocate(8 * (1 + p)).order(ByteOrder.LITTLE_ENDIAN);
      b.putLong(granule);
      for (long v : openPeriods) {
        b.putLong(v);
      }
      store.clock(b.array());
      clockChanged = false;
    }
    for (int j = 0; j < symbols; j++) {
      if (symbolChanged[j]) {
        ByteBuffer b = ByteBuffer.allocate(8 * (2 * p + 1)).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < p; i++) {
          b.putLong(sums[i][j]);
          b.putLong(counts[i][j]);
        }
        b.putLong(last[j]);
        store.symbol(j, b.array());
        symbolChanged[j] = false;
      }
    }
    if (booksChanged) {
      store.books(booksRecord());
      booksChanged = false;
    }
  }

  private PairsBook.State[] books() {
    if (states != null) {
      return states;
    }
    states = new PairsBook.State[books.length];
    byte[] stored = store.books();
    ByteBuffer b = stored == null ? null : ByteBuffer.wrap(stored).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < books.length; i++) {
      PairsBook book = books[i];
      if (b == null) {
        states[i] = book.initialState();
        continue;
      }
      PairsBook.State st = new PairsBook.State(book.k, book.width);
      for (int r = 0; r < book.k; r++) {
        for (int j = 0; j < book.width; j++) {
          st.window[r][j] = b.getDouble();
        }
        st.filled[r] = b.getLong();
        for (int j = 0; j < 3; j++) {
          st.prev[r][j] = b.getDouble();
        }
        st.position[r] = b.get();
        st.ratioPos[r] = b.getDouble();
        st.balance[r] = b.getLong();
        st.shares[r][0] = b.getLong();
        st.shares[r][1] = b.getLong();
      }
      states[i] = st;
    }
    return states;
  }

  private byte[] booksRecord() {
    PairsBook.State[] st = books();
    int size = 0;
    for (PairsBook book : books) {
      size += book.k * (8 * book.width + 8 + 24 + 1 + 8 + 8 + 16);
    }
    ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < books.length; i++) {
      PairsBook book = books[i];
      for (int r = 0; r < book.k; r++) {
        for (int j = 0; j < book.width; j++) {
          b.putDouble(st[i].window[r][j]);
        }
        b.putLong(st[i].filled[r]);
        for (int j = 0; j < 3; j++) {
          b.putDouble(st[i].prev[r][j]);
        }
        b.put(st[i].position[r]);
        b.putDouble(st[i].ratioPos[r]);
        b.putLong(st[i].balance[r]);
        b.putLong(st[i].shares[r][0]);
        b.putLong(st[i].shares[r][1]);
      }
    }
    return b.array();
  }

  /**
   * One partial row (pairs_partials.PARTIAL_FIELDS without the key): a clock row when
   * {@code cnt == 0}, else an aggregate row of symbol {@code code}.
   */
  public void process(long g, int code, long cnt, long sum, long price, long tickTs, long ts, long ingestTs,
               PairsBook.Out out) {
    if (cnt == 0) {
      if (granule >= 0 && g <= granule) {
        if (g < granule) {
          throw new IllegalStateException("pairs bucket " + bucket.index + ": granule " + g + " after granule "
              + granule + " (ticks out of time order)");
        }
        return;             // the open granule's first tick was seen already
      }
      long[] now = new long[periods.length];
      for (int i = 0; i < periods.length; i++) {
        now[i] = Math.floorDiv(g * granuleMs, periods[i]);
      }
      if (granule >= 0) {
        List<Integer> closing = new ArrayList<>();
        for (int i = 0; i < periods.length; i++) {
          if (now[i] > openPeriods[i]) {
            closing.add(i);
          }
        }
        if (!closing.isEmpty()) {
          close(closing, code, price, tickTs, ts, ingestTs, out);
        }
      }
      granule = g;
      openPeriods = now;
      clockChanged = true;
      return;
    }
    if (g != granule) {
      throw new IllegalStateException("pairs bucket " + bucket.index + ": a tick of granule " + g
          + (granule < 0 || g > granule ? " before its clock row" : " after granule " + granule
          + " (ticks out of time order)"));
    }
    for (int i = 0; i < periods.length; i++) {
      sums[i][code] += sum;
      counts[i][code] += cnt;
    }
    last[code] = price;
    symbolChanged[code] = true;
  }

  private void close(List<Integer> closing, int code, long price, long tickTs, long ts, long ingestTs,
                     PairsBook.Out out) {
    PairsBook.State[] st = books();
    long[] lastAt = last.clone();
    if (code >= 0) {                  // the closing tick is the latest trade of its symbol
      lastAt[code] = price;
    }
    for (int i : closing) {
      PairsBook.Closed period = new PairsBook.Closed(sums[i].clone(), counts[i].clone(), lastAt, tickTs, ts,
          ingestTs);
      books[i].close(st[i], period, out);
      for (int j = 0; j < symbols; j++) {
        // A symbol with ticks in the closed period has its sums reset (one without has zeros).
        symbolChanged[j] |= counts[i][j] != 0;
      }
      java.util.Arrays.fill(sums[i], 0);
      java.util.Arrays.fill(counts[i], 0);
    }
    booksChanged = true;
  }
}
