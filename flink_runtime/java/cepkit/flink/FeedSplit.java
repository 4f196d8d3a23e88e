package cepkit.flink;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * One of the feed's K splits (specs/DRIVER.md, "Splits"): the offsets are cut into blocks of
 * {@code block} consecutive offsets, and split {@code index} owns the blocks b with
 * {@code b % count == index}. With one split it owns every offset. A split's events are thus in
 * offset order, hence in TS order (the driver releases events in TS order), so a per-split
 * watermark of "the last TS read, minus 1 ms" is right however the splits interleave.
 *
 * <p>{@code next} is the split's position: the first offset it owns and has not handed out. It
 * is the split's checkpointed state, so a restored job reads again from there.
 */
public final class FeedSplit implements SourceSplit, Serializable {
  private static final long serialVersionUID = 1L;

  public final int index;
  public final int count;
  public final long block;
  public final long next;

  public FeedSplit(int index, int count, long block, long next) {
    if (count < 1 || index < 0 || index >= count || block < 1 || next < 0) {
      throw new IllegalArgumentException("cepkit feed split: index " + index + " of " + count + ", block " + block
          + ", next " + next);
    }
    this.index = index;
    this.count = count;
    this.block = block;
    this.next = owned(next);
  }

  @Override
  public String splitId() {
    return "cepkit-feed-" + index + "-of-" + count;
  }

  /** The first offset at or after {@code offset} that this split owns. */
  public long owned(long offset) {
    if (count == 1) {
      return offset;
    }
    long b = offset / block;
    long shift = Math.floorMod(index - b, (long) count);
    return shift == 0 ? offset : (b + shift) * block;
  }

  /** Where the run of offsets this split owns from {@code offset} (an owned offset) ends. */
  public long runEnd(long offset) {
    return count == 1 ? Long.MAX_VALUE / 4 : (offset / block + 1) * block;
  }

  public FeedSplit at(long position) {
    return new FeedSplit(index, count, block, position);
  }

  @Override
  public String toString() {
    return splitId() + "@" + next;
  }

  /** The split's state in checkpoints: index, count, block, next. */
  public static final class Serializer implements SimpleVersionedSerializer<FeedSplit> {
    @Override
    public int getVersion() {
      return 1;
    }

    @Override
    public byte[] serialize(FeedSplit split) throws IOException {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream(28);
      try (DataOutputStream out = new DataOutputStream(bytes)) {
        write(out, split);
      }
      return bytes.toByteArray();
    }

    @Override
    public FeedSplit deserialize(int version, byte[] serialized) throws IOException {
      check(version);
      try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
        return read(in);
      }
    }

    static void write(DataOutputStream out, FeedSplit split) throws IOException {
      out.writeInt(split.index);
      out.writeInt(split.count);
      out.writeLong(split.block);
      out.writeLong(split.next);
    }

    static FeedSplit read(DataInputStream in) throws IOException {
      return new FeedSplit(in.readInt(), in.readInt(), in.readLong(), in.readLong());
    }

    static void check(int version) throws IOException {
      if (version != 1) {
        throw new IOException("cepkit feed split: unknown state version " + version);
      }
    }
  }

  /** The enumerator's state in checkpoints: the splits not assigned to a reader. */
  public static final class ListSerializer implements SimpleVersionedSerializer<List<FeedSplit>> {
    @Override
    public int getVersion() {
      return 1;
    }

    @Override
    public byte[] serialize(List<FeedSplit> splits) throws IOException {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream(4 + 24 * splits.size());
      try (DataOutputStream out = new DataOutputStream(bytes)) {
        out.writeInt(splits.size());
        for (FeedSplit s : splits) {
          Serializer.write(out, s);
        }
      }
      return bytes.toByteArray();
    }

    @Override
    public List<FeedSplit> deserialize(int version, byte[] serialized) throws IOException {
      Serializer.check(version);
      try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
        int n = in.readInt();
        List<FeedSplit> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          out.add(Serializer.read(in));
        }
        return out;
      }
    }
  }
}
