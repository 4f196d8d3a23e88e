package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The count-window join (Q5 / J1, kind window_join; specs/SEMANTICS.md section 6), the Java twin
 * of runtime_common/micro_cores/window_join.py and of the reference validator/micro_joins.py. One
 * group: both input streams ({@link #newLogic}).
 *
 * <p>Each side counts its events ({@code n}); its window is its last {@code rows} events. Every
 * comparison of {@code where} names one stream's field, so it is a filter on that stream: an
 * event failing it takes its slot (it is counted) but can never pair, so it is not stored. A
 * stored event is an entry (its number on its side, its key, the fields the query selects from
 * its side) in two FIFOs: the side's, in number order, and its key's. An arriving event pairs with
 * every entry of its key on the other side (all in that side's window: an entry is removed from
 * both FIFOs when the event {@code rows} after it on its side arrives), in arrival order, and then
 * enters its own side. O(1) amortized per event plus its rows; state at most {@code rows} entries
 * per side. Keys compare as doubles (an int key equals the same number as a double), -0.0 as 0.0.
 */
public final class WindowJoinLogic extends MicroQuery {
  private final int rows;
  /** Per side (0 left, 1 right): its stream's index in inputs, its key's field code, its filter. */
  private final int[] stream = new int[2];
  private final int[] keyCode = new int[2];
  private final Predicate[] where = new Predicate[2];
  /** Per side: the field codes it stores (those the query selects from it). */
  private final int[][] stored = new int[2][];
  /** Per output field but inputTS: its side and its index among that side's stored fields. */
  private final int[] pickSide;
  private final int[] pickSlot;

  WindowJoinLogic(JsonNode q) {
    super(q);
    long r = integer(q, "rows");
    if (r < 1 || r > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("query " + id + ": a window join needs rows >= 1, got " + r);
    }
    rows = (int) r;
    String[] names = {text(q, "left"), text(q, "right")};
    if (names[0].equals(names[1])) {
      throw new IllegalArgumentException("query " + id + ": a window join needs two different streams, both are "
          + names[0]);
    }
    String[] keys = {text(q, "left_key"), text(q, "right_key")};
    for (int s = 0; s < 2; s++) {
      stream[s] = streamIndex(names[s]);
      if (stream[s] < 0) {
        throw new IllegalArgumentException("query " + id + ": stream " + names[s] + " is not among its inputs");
      }
      keyCode[s] = fieldCode(keys[s]);
    }
    List<List<Integer>> codes = List.of(new ArrayList<>(), new ArrayList<>());
    List<List<String>> ops = List.of(new ArrayList<>(), new ArrayList<>());
    List<List<Double>> values = List.of(new ArrayList<>(), new ArrayList<>());
    JsonNode w = q.get("where");
    if (w == null || !w.isArray()) {
      throw new IllegalArgumentException("query " + id + ": a window join needs a where list");
    }
    for (JsonNode c : w) {
      String[] f = qualified(c.get(0).asText(), names);
      int s = f[0].equals(names[0]) ? 0 : 1;
      codes.get(s).add(fieldCode(f[1]));
      ops.get(s).add(c.get(1).asText());
      values.get(s).add(c.get(2).asDouble());
    }
    for (int s = 0; s < 2; s++) {
      where[s] = new Predicate(codes.get(s).stream().mapToInt(Integer::intValue).toArray(),
          ops.get(s).toArray(new String[0]), values.get(s).stream().mapToDouble(Double::doubleValue).toArray());
    }
    String[] select = texts(q, "select");
    if (select.length != fields.length - 1) {
      throw new IllegalArgumentException("query " + id + ": " + select.length + " selected fields for "
          + (fields.length - 1) + " output fields");
    }
    pickSide = new int[select.length];
    pickSlot = new int[select.length];
    List<List<Integer>> kept = List.of(new ArrayList<>(), new ArrayList<>());
    for (int i = 0; i < select.length; i++) {
      String[] f = qualified(select[i], names);
      int s = f[0].equals(names[0]) ? 0 : 1;
      int code = fieldCode(f[1]);
      if (!kept.get(s).contains(code)) {
        kept.get(s).add(code);
      }
      pickSide[i] = s;
      pickSlot[i] = kept.get(s).indexOf(code);
    }
    for (int s = 0; s < 2; s++) {
      stored[s] = kept.get(s).stream().mapToInt(Integer::intValue).toArray();
    }
  }

  private String[] qualified(String name, String[] names) {
    int dot = name.indexOf('.');
    if (dot < 0 || !(name.substring(0, dot).equals(names[0]) || name.substring(0, dot).equals(names[1]))) {
      throw new IllegalArgumentException("query " + id + ": field " + name + " is not qualified by "
          + names[0] + " or " + names[1]);
    }
    return new String[] {name.substring(0, dot), name.substring(dot + 1)};
  }

  /** Every event of either stream takes a slot in its window (even one failing `where`). */
  @Override
  public boolean relevant(Event e) {
    return e.stream == stream[0] || e.stream == stream[1];
  }

  @Override
  public StreamLogic newLogic() {
    return new Join();
  }

  @Override
  public StreamLogic restore(byte[] state) {
    ByteBuffer b = ByteBuffer.wrap(state).order(ByteOrder.LITTLE_ENDIAN);
    byte v = b.get();
    if (v != Join.VERSION) {
      throw new IllegalArgumentException("query " + id + ": window join state version " + v + ", this logic reads "
          + Join.VERSION);
    }
    if (b.getInt() != rows) {
      throw new IllegalArgumentException("query " + id + ": the window join state is of another query");
    }
    Join j = new Join();
    for (int s = 0; s < 2; s++) {
      j.side[s].n = b.getLong();
      int count = b.getInt();
      for (int i = 0; i < count; i++) {
        long number = b.getLong();
        double key = b.getDouble();
        double[] vals = new double[stored[s].length];
        for (int f = 0; f < vals.length; f++) {
          vals[f] = b.getDouble();
        }
        j.store(s, new Entry(number, key, vals));
      }
    }
    return j;
  }

  private static final class Entry {
    final long number;
    final double key;
    final double[] values;

    Entry(long number, double key, double[] values) {
      this.number = number;
      this.key = key;
      this.values = values;
    }
  }

  /** One side's count and entries: in number order, and per key. */
  private static final class Side {
    long n;
    final ArrayDeque<Entry> order = new ArrayDeque<>();
    final Map<Double, ArrayDeque<Entry>> byKey = new HashMap<>();
  }

  private final class Join implements StreamLogic {
    static final byte VERSION = 1;
    final Side[] side = {new Side(), new Side()};

    @Override
    public void process(Event e, Out sink) {
      int s = e.stream == stream[0] ? 0 : e.stream == stream[1] ? 1 : -1;
      if (s < 0) {
        return;
      }
      if (where[s].test(e)) {
        double key = e.value(keyCode[s]);
        key = key == 0.0 ? 0.0 : key;
        ArrayDeque<Entry> matches = side[1 - s].byKey.get(key);
        if (matches != null) {
          for (Entry x : matches) {
            sink.row(row(s, e, x), e.ingestTs);
          }
        }
        double[] vals = new double[stored[s].length];
        for (int f = 0; f < vals.length; f++) {
          vals[f] = e.value(stored[s][f]);
        }
        store(s, new Entry(side[s].n, key, vals));
      }
      Side me = side[s];
      me.n++;
      // The entry `rows` before the new event on its side leaves the window.
      Entry head = me.order.peekFirst();
      if (head != null && head.number < me.n - rows) {
        me.order.pollFirst();
        ArrayDeque<Entry> k = me.byKey.get(head.key);
        k.pollFirst();
        if (k.isEmpty()) {
          me.byKey.remove(head.key);
        }
      }
    }

    void store(int s, Entry x) {
      side[s].order.addLast(x);
      side[s].byKey.computeIfAbsent(x.key, k -> new ArrayDeque<>()).addLast(x);
    }

    private Object[] row(int s, Event e, Entry x) {
      Object[] out = new Object[fields.length];
      for (int i = 0; i < pickSide.length; i++) {
        double v = pickSide[i] == s ? e.value(stored[s][pickSlot[i]]) : x.values[pickSlot[i]];
        out[i] = typed(v, types[i]);
      }
      out[pickSide.length] = typed((double) e.ts, types[pickSide.length]);
      return out;
    }

    /** Little-endian: version, rows, then per side its count and its entries (number, key, values) in order. */
    @Override
    public byte[] toBytes() {
      int size = 1 + 4;
      for (int s = 0; s < 2; s++) {
        size += 12 + side[s].order.size() * (16 + 8 * stored[s].length);
      }
      ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
      b.put(VERSION).putInt(rows);
      for (int s = 0; s < 2; s++) {
        b.putLong(side[s].n).putInt(side[s].order.size());
        for (Entry x : side[s].order) {
          b.putLong(x.number).putDouble(x.key);
          for (double v : x.values) {
            b.putDouble(v);
          }
        }
      }
      return b.array();
    }
  }
}
