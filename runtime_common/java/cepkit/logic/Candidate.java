package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * One pattern candidate (an event that satisfied the first element and is not consumed): its TS
 * and the first element's selected fields, as doubles (exact for ID, the A's and TS below 2^53),
 * in the order {@link PatternLogic#candidateFields} gives. Immutable: a store may share it.
 */
public final class Candidate {
  /** Record format version (the first byte of {@link #toBytes}). */
  static final byte VERSION = 1;
  public final long ts;
  final double[] values;

  Candidate(long ts, double[] values) {
    this.ts = ts;
    this.values = values;
  }

  /** Little-endian bytes: version, TS, the count of values, the values. */
  public byte[] toBytes() {
    ByteBuffer b = ByteBuffer.allocate(1 + 8 + 4 + 8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.put(VERSION).putLong(ts).putInt(values.length);
    for (double v : values) {
      b.putDouble(v);
    }
    return b.array();
  }

  public static Candidate fromBytes(byte[] bytes) {
    ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    return read(b);
  }

  static Candidate read(ByteBuffer b) {
    byte v = b.get();
    if (v != VERSION) {
      throw new IllegalArgumentException("pattern candidate: record version " + v + ", this logic reads " + VERSION);
    }
    long ts = b.getLong();
    double[] values = new double[b.getInt()];
    for (int i = 0; i < values.length; i++) {
      values[i] = b.getDouble();
    }
    return new Candidate(ts, values);
  }

  void write(ByteBuffer b) {
    b.put(VERSION).putLong(ts).putInt(values.length);
    for (double v : values) {
      b.putDouble(v);
    }
  }

  int byteSize() {
    return 13 + 8 * values.length;
  }
}
