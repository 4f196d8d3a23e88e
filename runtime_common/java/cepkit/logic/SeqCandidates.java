package cepkit.logic;

import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * {@link Candidates} over an engine's keyed map state: candidate number i (0, 1, 2, ... per key)
 * is the record {@code i -> Candidate.toBytes()}, and two counters (head: the oldest kept number,
 * tail: the next number) say which are live. Appending writes one record and the counters;
 * removing the oldest deletes one; nothing ever rewrites the key's whole window. Clearing deletes
 * every live record (each was written once: amortized O(1)).
 *
 * <p>The engine implements {@link Store} on its current key's state (Flink: a
 * {@code MapState<Long, byte[]>} and a {@code ValueState<long[]>}; Spark's transformWithState:
 * a MapState and a ValueState of the grouping key) and makes one SeqCandidates per key it handles
 * (cheap: it reads the counters once, and writes them back on {@link #flush}).
 */
public final class SeqCandidates implements Candidates {
  /** One key's records and counters in the engine's keyed state. */
  public interface Store {
    /** The key's {head, tail}, or null when it has no state. */
    long[] counters();

    /** Write the counters; {@code head == tail} means the key holds nothing (the engine may clear it). */
    void counters(long head, long tail);

    byte[] get(long seq);

    void put(long seq, byte[] record);

    void remove(long seq);
  }

  private final Store store;
  private long head;
  private long tail;
  private long head0;
  private long tail0;
  private Candidate oldest;

  public SeqCandidates(Store store) {
    this.store = store;
    long[] c = store.counters();
    head = head0 = c == null ? 0 : c[0];
    tail = tail0 = c == null ? 0 : c[1];
  }

  @Override
  public int size() {
    return (int) (tail - head);
  }

  @Override
  public Candidate oldest() {
    if (oldest == null) {
      oldest = Candidate.fromBytes(store.get(head));
    }
    return oldest;
  }

  @Override
  public void removeOldest() {
    store.remove(head++);
    oldest = null;
  }

  @Override
  public void append(Candidate c) {
    store.put(tail++, c.toBytes());
  }

  @Override
  public void clear() {
    while (head < tail) {
      store.remove(head++);
    }
    oldest = null;
  }

  @Override
  public Iterable<Candidate> inOrder() {
    final long from = head;
    final long to = tail;
    return () -> new Iterator<Candidate>() {
      private long at = from;

      @Override
      public boolean hasNext() {
        return at < to;
      }

      @Override
      public Candidate next() {
        if (at >= to) {
          throw new NoSuchElementException();
        }
        return Candidate.fromBytes(store.get(at++));
      }
    };
  }

  /** Write the counters if they changed (once per key per batch, or after every event). */
  public void flush() {
    if (head != head0 || tail != tail0) {
      store.counters(head, tail);
      head0 = head;
      tail0 = tail;
    }
  }
}
