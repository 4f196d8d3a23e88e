package cepkit.logic;

import java.util.Arrays;

/** A FIFO of longs in a growing ring array: O(1) amortized at both ends, indexed from the front. */
final class LongRing {
  private long[] a = new long[4];
  private int head;
  private int size;

  int size() {
    return size;
  }

  long get(int i) {
    return a[(head + i) & (a.length - 1)];
  }

  long first() {
    return a[head];
  }

  long last() {
    return a[(head + size - 1) & (a.length - 1)];
  }

  void addLast(long x) {
    if (size == a.length) {
      long[] b = new long[2 * a.length];
      for (int i = 0; i < size; i++) {
        b[i] = get(i);
      }
      a = b;
      head = 0;
    }
    a[(head + size) & (a.length - 1)] = x;
    size++;
  }

  long removeFirst() {
    long x = a[head];
    head = (head + 1) & (a.length - 1);
    size--;
    return x;
  }

  long removeLast() {
    size--;
    return a[(head + size) & (a.length - 1)];
  }

  void clear() {
    head = 0;
    size = 0;
    Arrays.fill(a, 0L);
  }
}
