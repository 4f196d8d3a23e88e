package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;

/** {@link Candidates} in memory (an unkeyed pattern's whole-stream state, a heap-only engine). */
public final class CandidateDeque implements Candidates {
  private static final byte VERSION = 1;
  private final ArrayDeque<Candidate> q = new ArrayDeque<>();

  @Override
  public int size() {
    return q.size();
  }

  @Override
  public Candidate oldest() {
    return q.peekFirst();
  }

  @Override
  public void removeOldest() {
    q.pollFirst();
  }

  @Override
  public void append(Candidate c) {
    q.addLast(c);
  }

  @Override
  public void clear() {
    q.clear();
  }

  @Override
  public Iterable<Candidate> inOrder() {
    return q;
  }

  /** Little-endian bytes: version, count, then each candidate's record. */
  public byte[] toBytes() {
    int size = 5;
    for (Candidate c : q) {
      size += c.byteSize();
    }
    ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    write(b);
    return b.array();
  }

  void write(ByteBuffer b) {
    b.put(VERSION).putInt(q.size());
    for (Candidate c : q) {
      c.write(b);
    }
  }

  int byteSize() {
    int size = 5;
    for (Candidate c : q) {
      size += c.byteSize();
    }
    return size;
  }

  public static CandidateDeque fromBytes(byte[] bytes) {
    return read(ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN));
  }

  static CandidateDeque read(ByteBuffer b) {
    byte v = b.get();
    if (v != VERSION) {
      throw new IllegalArgumentException("pattern candidates: format version " + v + ", this logic reads " + VERSION);
    }
    CandidateDeque out = new CandidateDeque();
    int n = b.getInt();
    for (int i = 0; i < n; i++) {
      out.q.addLast(Candidate.read(b));
    }
    return out;
  }
}
