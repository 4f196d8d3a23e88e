package cepkit.logic;

import java.util.Arrays;

/**
 * An exact running sum of doubles that values can be added to and taken from: Shewchuk's
 * non-overlapping partials (the algorithm of Python's {@code math.fsum}), so the sum of a sliding
 * window never drifts however large a value that came and went. {@link #value} is the exact sum
 * correctly rounded (fsum's final rounding). A handful of partials in practice (at most one per
 * ~53 binary orders of magnitude the values span): O(1) per update. Finite values only.
 */
final class ExactSum {
  private double[] p = new double[4];
  private int n;

  void add(double x) {
    int i = 0;
    for (int j = 0; j < n; j++) {
      double y = p[j];
      if (Math.abs(x) < Math.abs(y)) {
        double t = x;
        x = y;
        y = t;
      }
      double hi = x + y;
      double lo = y - (hi - x);
      if (lo != 0.0) {
        p[i++] = lo;
      }
      x = hi;
    }
    if (i == p.length) {
      p = Arrays.copyOf(p, 2 * p.length);
    }
    p[i] = x;
    n = i + 1;
    if (n == 1 && x == 0.0) {
      n = 0;        // nothing left: keeps the list empty instead of one zero
    }
  }

  void remove(double x) {
    add(-x);
  }

  /** The exact sum rounded to the nearest double (ties to even), as math.fsum rounds it. */
  double value() {
    int k = n;
    if (k == 0) {
      return 0.0;
    }
    double hi = p[--k];
    double lo = 0.0;
    while (k > 0) {
      double x = hi;
      double y = p[--k];
      hi = x + y;
      double yr = hi - x;
      lo = y - yr;
      if (lo != 0.0) {
        break;
      }
    }
    // Half-way cases: the rest of the partials say which way the rounding of hi + lo should go.
    if (k > 0 && ((lo < 0.0 && p[k - 1] < 0.0) || (lo > 0.0 && p[k - 1] > 0.0))) {
      double y = lo * 2.0;
      double x = hi + y;
      double yr = x - hi;
      if (y == yr) {
        hi = x;
      }
    }
    return hi;
  }
}
