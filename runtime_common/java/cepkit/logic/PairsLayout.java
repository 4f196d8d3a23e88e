package cepkit.logic;

import cepkit.wire.FrameClient;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The Pairs strategies of a program and their buckets, as runtime_common/pairs_partials.py's
 * {@code Layout} makes them: the granule (the gcd of the period lengths), the monitored symbols,
 * and buckets of whole connected components of the "strategy watches symbol" graph, balanced by
 * size, largest first onto the lightest bucket. A bucket is one state key of the JVM plans
 * (cepkit.spark.PairsRealTime, cepkit.flink.PairsFlink); its symbols are coded by their position in
 * its sorted symbol list.
 */
public final class PairsLayout implements Serializable {
  private static final long serialVersionUID = 1L;

  /** One strategy: (alias, symbol1, symbol2, funds in cents, period in s, N, bands multiplier, stop-loss fraction). */
  public static final class Strategy implements Serializable {
    private static final long serialVersionUID = 1L;
    public final String alias;
    public final String symbol1;
    public final String symbol2;
    public final long fundsCents;
    public final long periodS;
    public final int numPeriods;
    public final double bandsMultiplier;
    public final double stopLoss;

    Strategy(String alias, String symbol1, String symbol2, long fundsCents, long periodS, int numPeriods,
             double bandsMultiplier, double stopLoss) {
      if (symbol1.equals(symbol2)) {
        throw new IllegalArgumentException("strategy " + alias + ": symbol1 and symbol2 are both " + symbol1);
      }
      if (periodS < 1 || numPeriods < 1 || fundsCents < 0) {
        throw new IllegalArgumentException("strategy " + alias + ": periodLength and numPeriods must be >= 1, "
            + "funds >= 0");
      }
      this.alias = alias;
      this.symbol1 = symbol1;
      this.symbol2 = symbol2;
      this.fundsCents = fundsCents;
      this.periodS = periodS;
      this.numPeriods = numPeriods;
      this.bandsMultiplier = bandsMultiplier;
      this.stopLoss = stopLoss;
    }
  }

  /** One state key: its symbols (sorted; a symbol's local code is its position) and strategies. */
  public static final class Bucket implements Serializable {
    private static final long serialVersionUID = 1L;
    public final int index;
    public final String[] symbols;
    public final List<Strategy> strategies;

    Bucket(int index, String[] symbols, List<Strategy> strategies) {
      this.index = index;
      this.symbols = symbols;
      this.strategies = strategies;
    }
  }

  public final List<Strategy> strategies;
  public final long granuleMs;
  public final List<Bucket> buckets = new ArrayList<>();
  public final int[] keys;
  // Every monitored symbol: its bucket and its code in that bucket.
  public final Map<String, int[]> placeOf = new HashMap<>();

  /** @param rows the program's strategy rows as JSON: [[alias, s1, s2, funds, period_s, N, mult, stop], ...] */
  public static PairsLayout fromJson(String rows, int buckets, int[] keys) {
    List<Strategy> out = new ArrayList<>();
    try {
      for (JsonNode r : FrameClient.JSON.readTree(rows)) {
        out.add(new Strategy(r.get(0).asText(), r.get(1).asText(), r.get(2).asText(), r.get(3).asLong(),
            r.get(4).asLong(), r.get(5).asInt(), r.get(6).asDouble(), r.get(7).asDouble()));
      }
    } catch (IOException e) {
      throw new IllegalArgumentException("pairs: the strategies are not JSON: " + e.getMessage());
    }
    return new PairsLayout(out, buckets, keys);
  }

  public PairsLayout(List<Strategy> strategies, int wanted, int[] keys) {
    if (strategies.isEmpty()) {
      throw new IllegalArgumentException("pairs: no strategies");
    }
    if (wanted < 1) {
      throw new IllegalArgumentException("pairs: buckets must be >= 1, got " + wanted);
    }
    this.strategies = strategies;
    long g = 0;
    for (Strategy s : strategies) {
      g = gcd(g, s.periodS * 1000);
    }
    granuleMs = g;
    List<TreeSet<String>> groupSymbols = new ArrayList<>();
    List<List<Strategy>> groupStrategies = new ArrayList<>();
    components(strategies, groupSymbols, groupStrategies);
    int n = Math.min(wanted, groupSymbols.size());
    long[] load = new long[n];
    List<List<Integer>> members = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      members.add(new ArrayList<>());
    }
    Integer[] order = new Integer[groupSymbols.size()];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    Arrays.sort(order, Comparator.comparingLong((Integer i) -> -weight(groupSymbols.get(i), groupStrategies.get(i)))
        .thenComparingInt(i -> i));
    for (int gi : order) {
      int b = 0;
      for (int i = 1; i < n; i++) {
        if (load[i] < load[b]) {
          b = i;
        }
      }
      members.get(b).add(gi);
      load[b] += weight(groupSymbols.get(gi), groupStrategies.get(gi));
    }
    Map<String, Integer> position = new HashMap<>();
    for (int i = 0; i < strategies.size(); i++) {
      position.put(strategies.get(i).alias, i);
    }
    for (int b = 0; b < n; b++) {
      TreeSet<String> syms = new TreeSet<>();
      List<Strategy> strats = new ArrayList<>();
      for (int gi : members.get(b)) {
        syms.addAll(groupSymbols.get(gi));
        strats.addAll(groupStrategies.get(gi));
      }
      strats.sort(Comparator.comparingInt(s -> position.get(s.alias)));
      String[] symbols = syms.toArray(new String[0]);
      buckets.add(new Bucket(b, symbols, strats));
      for (int j = 0; j < symbols.length; j++) {
        placeOf.put(symbols[j], new int[] {b, j});
      }
    }
    if (keys == null) {
      keys = new int[n];
      for (int i = 0; i < n; i++) {
        keys[i] = i;
      }
    }
    if (keys.length < n) {
      throw new IllegalArgumentException("pairs: need " + n + " bucket keys, got " + keys.length);
    }
    this.keys = Arrays.copyOf(keys, n);
    if (Arrays.stream(this.keys).distinct().count() != n) {
      throw new IllegalArgumentException("pairs: bucket keys must be distinct, got " + Arrays.toString(this.keys));
    }
  }

  private static long gcd(long a, long b) {
    while (b != 0) {
      long t = a % b;
      a = b;
      b = t;
    }
    return Math.abs(a);
  }

  private static long weight(TreeSet<String> symbols, List<Strategy> strategies) {
    return symbols.size() + strategies.size();
  }

  /** Connected components of symbols linked by strategies, in first-seen order (as pairs_partials.py). */
  private static void components(List<Strategy> strategies, List<TreeSet<String>> symbols,
                                 List<List<Strategy>> members) {
    Map<String, String> parent = new HashMap<>();
    for (Strategy st : strategies) {
      String a = find(parent, st.symbol1);
      String b = find(parent, st.symbol2);
      if (!a.equals(b)) {
        parent.put(b, a);
      }
    }
    Map<String, Integer> roots = new LinkedHashMap<>();
    for (Strategy st : strategies) {
      String root = find(parent, st.symbol1);
      Integer at = roots.get(root);
      if (at == null) {
        at = symbols.size();
        roots.put(root, at);
        symbols.add(new TreeSet<>());
        members.add(new ArrayList<>());
      }
      symbols.get(at).add(st.symbol1);
      symbols.get(at).add(st.symbol2);
      members.get(at).add(st);
    }
  }

  private static String find(Map<String, String> parent, String s) {
    parent.putIfAbsent(s, s);
    while (!parent.get(s).equals(s)) {
      String up = parent.get(parent.get(s));
      parent.put(s, up);
      s = up;
    }
    return s;
  }
}
