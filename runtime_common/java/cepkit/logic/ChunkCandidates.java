package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * {@link Candidates} over an engine's keyed state in chunks, for an engine that hands a key its
 * events a batch at a time (Spark's {@code transformWithState}): the candidates a key gets in one
 * call are one record, chunk number i (0, 1, 2, ... per key) holding them oldest first, and four
 * counters say what is live: {head chunk, tail chunk (the next number), skip (the head chunk's
 * candidates already removed), stored (live candidates in chunks)}.
 *
 * <p>A call reads the counters and, when it needs the oldest, the head chunk; it deletes the chunks
 * its removals empty, writes its new candidates as one chunk and the counters back in {@link
 * #flush}. So a key that gets n events in a call costs a few state operations, not a few per event
 * ({@link SeqCandidates}, one record per candidate, suits an engine that calls once per event).
 * The candidates and their order are those of any other {@link Candidates}: only the records differ.
 */
public final class ChunkCandidates implements Candidates {
  /** One key's chunk records and counters in the engine's keyed state. */
  public interface Store {
    /** The key's {head, tail, skip, stored}, or null when it has no state. */
    long[] counters();

    /** Write the counters; null: the key holds nothing (the engine may clear it). */
    void counters(long[] values);

    byte[] get(long chunk);

    void put(long chunk, byte[] record);

    void remove(long chunk);
  }

  static final byte VERSION = 1;
  private final Store store;
  private long head;
  private long tail;
  private int skip;
  private long stored;
  private final long[] read;
  /** The head chunk, decoded (null: not read since it became the head). */
  private Candidate[] headChunk;
  /** This call's new candidates, oldest first; the first {@code freshFrom} are already removed. */
  private final List<Candidate> fresh = new ArrayList<>();
  private int freshFrom;

  public ChunkCandidates(Store store) {
    this.store = store;
    long[] c = store.counters();
    if (c != null && (c.length != 4 || c[0] > c[1] || c[2] < 0 || c[3] < 0 || (c[3] == 0) != (c[0] == c[1]))) {
      throw new IllegalStateException("pattern candidates: bad counters " + java.util.Arrays.toString(c));
    }
    read = c == null ? new long[4] : c.clone();
    head = read[0];
    tail = read[1];
    skip = (int) read[2];
    stored = read[3];
  }

  @Override
  public int size() {
    return (int) (stored + fresh.size() - freshFrom);
  }

  private Candidate[] headChunk() {
    if (headChunk == null) {
      headChunk = decode(store.get(head));
    }
    return headChunk;
  }

  @Override
  public Candidate oldest() {
    if (stored > 0) {
      return headChunk()[skip];
    }
    if (freshFrom >= fresh.size()) {
      throw new NoSuchElementException("no candidates");
    }
    return fresh.get(freshFrom);
  }

  @Override
  public void removeOldest() {
    if (stored > 0) {
      Candidate[] chunk = headChunk();
      stored--;
      if (++skip == chunk.length) {
        store.remove(head++);
        skip = 0;
        headChunk = null;
      }
    } else if (freshFrom < fresh.size()) {
      freshFrom++;
    } else {
      throw new NoSuchElementException("no candidates");
    }
  }

  @Override
  public void append(Candidate c) {
    fresh.add(c);
  }

  @Override
  public void clear() {
    while (head < tail) {
      store.remove(head++);
    }
    skip = 0;
    stored = 0;
    headChunk = null;
    freshFrom = fresh.size();
  }

  @Override
  public Iterable<Candidate> inOrder() {
    return () -> new Iterator<Candidate>() {
      private long chunk = head;
      private int at = skip;
      private Candidate[] current = stored > 0 ? headChunk() : null;
      private int freshAt = freshFrom;

      @Override
      public boolean hasNext() {
        return current != null || freshAt < fresh.size();
      }

      @Override
      public Candidate next() {
        if (current != null) {
          Candidate c = current[at++];
          if (at == current.length) {
            at = 0;
            current = ++chunk < tail ? decode(store.get(chunk)) : null;
          }
          return c;
        }
        if (freshAt >= fresh.size()) {
          throw new NoSuchElementException();
        }
        return fresh.get(freshAt++);
      }
    };
  }

  /** Write this call's new candidates as one chunk and the counters, if they changed. */
  public void flush() {
    int n = fresh.size() - freshFrom;
    if (n > 0) {
      List<Candidate> kept = fresh.subList(freshFrom, fresh.size());
      int bytes = 5;
      for (Candidate c : kept) {
        bytes += c.byteSize();
      }
      ByteBuffer b = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
      b.put(VERSION).putInt(n);
      for (Candidate c : kept) {
        c.write(b);
      }
      store.put(tail++, b.array());    // with nothing stored, head == tail and skip == 0 already
      stored += n;
    }
    fresh.clear();
    freshFrom = 0;
    if (stored == 0) {
      head = tail = 0;             // nothing kept: numbering starts again
      skip = 0;
    }
    long[] now = {head, tail, skip, stored};
    if (!java.util.Arrays.equals(now, read)) {
      store.counters(stored == 0 ? null : now);
      System.arraycopy(now, 0, read, 0, 4);
    }
  }

  private static Candidate[] decode(byte[] record) {
    if (record == null) {
      throw new IllegalStateException("pattern candidates: a live chunk is missing from the state");
    }
    ByteBuffer b = ByteBuffer.wrap(record).order(ByteOrder.LITTLE_ENDIAN);
    byte v = b.get();
    if (v != VERSION) {
      throw new IllegalArgumentException("pattern candidates: chunk version " + v + ", this logic reads " + VERSION);
    }
    Candidate[] out = new Candidate[b.getInt()];
    for (int i = 0; i < out.length; i++) {
      out[i] = Candidate.read(b);
    }
    return out;
  }
}
