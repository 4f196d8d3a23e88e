package cepkit.logic;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The Pairs strategies of one period length, as runtime_common/pairs_strategies.py's {@code Book}:
 * specs/PAIRS_SEMANTICS.md sections 3-8 when one of their periods closes. The doubles are
 * bit-for-bit the spec's recipe, as the Python code computes them: the ratio of the two period
 * averages, the window of the last N ratios summed oldest first and divided by N, the population
 * sd likewise, the bands, then the crossings, the position machine with stop-loss and Procedure 4
 * in integer cents. Java's double arithmetic is IEEE 754 like numpy's and nothing here is fused,
 * so the same operations in the same order give the same bits.
 */
public final class PairsBook {
  static final byte FLAT = 0;
  static final byte LONG_SHORT = 1;
  static final byte SHORT_LONG = 2;
  // Bands this narrow give no signal (PAIRS_SEMANTICS.md section 5; pairs_strategies.COLLAPSE_ULPS).
  private static final double COLLAPSE_ULPS = 4;
  private static final double EPS = Math.ulp(1.0);

  /** The mutable state of the book's strategies, one row each (each window right-aligned). */
  static final class State {
    final double[][] window;    // [k][width]: the last ratios, newest last
    final long[] filled;        // ratios seen so far, capped at the row's N
    final double[][] prev;      // [k][3]: the previous Indicator's ratio, upper, lower (NaN: none)
    final byte[] position;
    final double[] ratioPos;    // the ratio when the position was taken (NaN when flat)
    final long[] balance;       // cents
    final long[][] shares;      // [k][2]: shares of symbol1 and symbol2

    State(int k, int width) {
      window = new double[k][width];
      filled = new long[k];
      prev = new double[k][3];
      position = new byte[k];
      ratioPos = new double[k];
      balance = new long[k];
      shares = new long[k][2];
    }
  }

  /** What the book needs of one closed period (codes index the bucket's symbols). */
  static final class Closed {
    final long[] sums;
    final long[] counts;
    final long[] lastPrice;
    final long tickTs;
    final long ts;
    final long ingestTs;

    Closed(long[] sums, long[] counts, long[] lastPrice, long tickTs, long ts, long ingestTs) {
      this.sums = sums;
      this.counts = counts;
      this.lastPrice = lastPrice;
      this.tickTs = tickTs;
      this.ts = ts;
      this.ingestTs = ingestTs;
    }
  }

  /** Where a closed period's output rows go. */
  public interface Out {
    void indicator(String strategy, double ratio, double avg, double upper, double lower, long tickTs, long ts,
                   long ingestTs);

    void order(String strategy, String type, String symbol, long price, long size, long tickTs, long ts,
               long ingestTs);
  }

  /** An Indicator as the engines' output row (specs/OUTPUT_LOG.md), the columns every sink sends. */
  public static Object[] indicatorRow(String strategy, double ratio, double avg, double upper, double lower,
                                      long tickTs, long ts, long ingestTs) {
    return new Object[] {"Indicator", strategy, ratio, avg, upper, lower, "", "", 0, 0, tickTs, ts, ingestTs};
  }

  /** A MarketOrder as the engines' output row (specs/OUTPUT_LOG.md). */
  public static Object[] orderRow(String strategy, String type, String symbol, long price, long size, long tickTs,
                                  long ts, long ingestTs) {
    return new Object[] {"MarketOrder", strategy, Double.NaN, Double.NaN, Double.NaN, Double.NaN, type, symbol,
        (int) price, (int) size, tickTs, ts, ingestTs};
  }

  final long periodMs;
  final int k;
  final int width;
  final String[] alias;
  final String[][] symbols;
  final int[][] codes;
  final long[] funds;
  final int[] n;
  final double[] mult;
  final double[] stop;

  PairsBook(List<PairsLayout.Strategy> strategies, Map<String, Integer> symbolCode) {
    if (strategies.isEmpty()) {
      throw new IllegalArgumentException("a book needs at least one strategy");
    }
    periodMs = strategies.get(0).periodS * 1000;
    k = strategies.size();
    alias = new String[k];
    symbols = new String[k][2];
    codes = new int[k][2];
    funds = new long[k];
    n = new int[k];
    mult = new double[k];
    stop = new double[k];
    int w = 0;
    for (int i = 0; i < k; i++) {
      PairsLayout.Strategy s = strategies.get(i);
      if (s.periodS * 1000 != periodMs) {
        throw new IllegalArgumentException("a book holds one period length");
      }
      alias[i] = s.alias;
      symbols[i][0] = s.symbol1;
      symbols[i][1] = s.symbol2;
      codes[i][0] = symbolCode.get(s.symbol1);
      codes[i][1] = symbolCode.get(s.symbol2);
      funds[i] = s.fundsCents;
      n[i] = s.numPeriods;
      mult[i] = s.bandsMultiplier;
      stop[i] = s.stopLoss;
      w = Math.max(w, s.numPeriods);
    }
    width = w;
  }

  State initialState() {
    State st = new State(k, width);
    for (int i = 0; i < k; i++) {
      Arrays.fill(st.prev[i], Double.NaN);
      st.ratioPos[i] = Double.NaN;
      st.balance[i] = funds[i];
    }
    return st;
  }

  /** Step every strategy over one closed period (in place) and put out its rows. */
  void close(State st, Closed period, Out out) {
    for (int r = 0; r < k; r++) {
      int c1 = codes[r][0];
      int c2 = codes[r][1];
      long cnt1 = period.counts[c1];
      long cnt2 = period.counts[c2];
      if (cnt1 <= 0 || cnt2 <= 0) {
        continue;           // a symbol without a tick: the period is skipped
      }
      double ratio = ((double) period.sums[c1] / (double) cnt1) / ((double) period.sums[c2] / (double) cnt2);
      double[] win = st.window[r];
      System.arraycopy(win, 1, win, 0, width - 1);
      win[width - 1] = ratio;
      st.filled[r] = Math.min(st.filled[r] + 1, n[r]);
      if (st.filled[r] < n[r]) {
        continue;
      }
      double nn = n[r];
      int from = width - n[r];     // the row's window: its last N columns
      double total = 0.0;
      for (int j = from; j < width; j++) {        // oldest first, as the spec sums
        total = total + win[j];
      }
      double avg = total / nn;
      double sq = 0.0;
      for (int j = from; j < width; j++) {
        double d = win[j] - avg;
        sq = sq + d * d;
      }
      double sd = Math.sqrt(sq / nn);
      double upper = avg + mult[r] * sd;
      double lower = avg - mult[r] * sd;
      out.indicator(alias[r], ratio, avg, upper, lower, period.tickTs, period.ts, period.ingestTs);
      double[] prev = st.prev[r];
      boolean banded = !(sd <= COLLAPSE_ULPS * EPS * nn * Math.abs(avg));
      // NaN (no previous Indicator) compares false, so the first Indicator never signals.
      boolean high = banded && ratio >= upper && prev[0] < prev[1];
      boolean low = banded && ratio <= lower && prev[0] > prev[2];
      prev[0] = ratio;
      prev[1] = upper;
      prev[2] = lower;
      byte pos = st.position[r];
      double rpos = st.ratioPos[r];
      boolean toShortLong = high && pos != SHORT_LONG;
      boolean toLongShort = low && !toShortLong && pos != LONG_SHORT;
      boolean moved = toShortLong || toLongShort;
      boolean stopped = !moved && ((pos == SHORT_LONG && ratio >= (1 + stop[r]) * rpos)
          || (pos == LONG_SHORT && ratio <= (1 - stop[r]) * rpos));
      if (moved || stopped) {
        trade(st, r, ratio, toShortLong, stopped, period, out);
      }
    }
  }

  /** Procedure 4 for one strategy, in exact integer cents (PAIRS_SEMANTICS.md section 8). */
  private void trade(State st, int r, double ratio, boolean toShortLong, boolean stopped, Closed period, Out out) {
    byte position = st.position[r];
    int held = position == LONG_SHORT ? 0 : position == SHORT_LONG ? 1 : -1;     // the leg held, if any
    long available = st.balance[r];
    if (held >= 0) {
      long sellPrice = period.lastPrice[codes[r][held]];
      long size = st.shares[r][held];
      if (size > 0) {
        out.order(alias[r], "SELL", symbols[r][held], sellPrice, size, period.tickTs, period.ts, period.ingestTs);
      }
      available += size * sellPrice;
      st.shares[r][held] = 0;
    }
    if (stopped) {
      st.balance[r] = available;
      st.position[r] = FLAT;
      st.ratioPos[r] = Double.NaN;
      return;
    }
    int buy = toShortLong ? 1 : 0;          // high: buy symbol2; low: buy symbol1
    long buyPrice = period.lastPrice[codes[r][buy]];
    long size = 10 * Math.floorDiv(available, 10 * buyPrice);
    if (size > 0) {
      out.order(alias[r], "BUY", symbols[r][buy], buyPrice, size, period.tickTs, period.ts, period.ingestTs);
    }
    st.balance[r] = available - size * buyPrice;
    st.shares[r][buy] = size;
    st.position[r] = toShortLong ? SHORT_LONG : LONG_SHORT;
    st.ratioPos[r] = ratio;
  }
}
