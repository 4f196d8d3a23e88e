package cepkit.logic;

import java.util.TreeMap;

/**
 * A multiset of doubles with insertion, removal and its median in O(log n): the lower half and the
 * upper half as counted tree maps, the lower half holding the extra value of an odd count. The
 * median is {@code (lower middle + upper middle) / 2} (the same value twice for an odd count), the
 * reference's arithmetic (validator/range_kth.py {@code range_median}).
 */
final class MedianSet {
  private final TreeMap<Double, int[]> low = new TreeMap<>();
  private final TreeMap<Double, int[]> high = new TreeMap<>();
  private int lowSize;
  private int highSize;

  int size() {
    return lowSize + highSize;
  }

  void add(double x) {
    if (lowSize == 0 || Double.compare(x, low.lastKey()) <= 0) {
      put(low, x);
      lowSize++;
    } else {
      put(high, x);
      highSize++;
    }
    balance();
  }

  void remove(double x) {
    if (lowSize > 0 && Double.compare(x, low.lastKey()) <= 0) {
      take(low, x);
      lowSize--;
    } else {
      take(high, x);
      highSize--;
    }
    balance();
  }

  double median() {
    double lower = low.lastKey();
    double upper = lowSize > highSize ? lower : high.firstKey();
    return (lower + upper) / 2;
  }

  private void balance() {
    if (lowSize > highSize + 1) {
      double x = low.lastKey();
      take(low, x);
      lowSize--;
      put(high, x);
      highSize++;
    } else if (highSize > lowSize) {
      double x = high.firstKey();
      take(high, x);
      highSize--;
      put(low, x);
      lowSize++;
    }
  }

  private static void put(TreeMap<Double, int[]> m, double x) {
    int[] c = m.get(x);
    if (c == null) {
      m.put(x, new int[] {1});
    } else {
      c[0]++;
    }
  }

  private static void take(TreeMap<Double, int[]> m, double x) {
    int[] c = m.get(x);
    if (c == null) {
      throw new IllegalStateException("median: removing " + x + ", which is not held");
    }
    if (--c[0] == 0) {
      m.remove(x);
    }
  }
}
