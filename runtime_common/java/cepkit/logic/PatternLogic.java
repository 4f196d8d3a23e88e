package cepkit.logic;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The pattern SEQ(first, second) WITHIN withinMs (Q7, kind pattern; specs/SEMANTICS.md section 8)
 * under the four consumption policies, the Java twin of runtime_common/micro_cores/pattern.py and
 * of the reference validator/micro_patterns.py, which it follows step by step.
 *
 * <p>State: per key value (or one for the whole stream without a key), the candidates, oldest
 * first ({@link Candidates}). An event of the key is handled by {@link #process}: first the
 * candidates out of its window (TS + withinMs &lt;= its TS; a prefix, since TS does not decrease)
 * are removed; if it satisfies the second element it pairs with every candidate left (ALL on the
 * second element) or the oldest (ONE), which ONE on the first element then consumes (removes);
 * then, if it satisfies the first element, it is appended as a candidate. So an event costs O(1)
 * amortized (each candidate is appended and removed once) plus its output rows.
 *
 * <p>A keyed pattern's state is per key ({@link #keyed}, {@link #stateKey}): the engine keeps each
 * key's candidates in its keyed state and calls {@link #process} with that key's events in feed
 * order. {@link #prune} drops a key's expired candidates from a time (any TS that no later event
 * undercuts, e.g. the latest TS seen); {@link #expiry} says when its oldest expires, for a timer.
 */
public final class PatternLogic extends MicroQuery {
  private final long withinMs;
  private final boolean takeAll;
  private final boolean consume;
  private final int firstStream;
  private final int secondStream;
  private final Predicate firstWhere;
  private final Predicate secondWhere;
  /** The key's field code, or null without a key. */
  private final Integer keyCode;
  /** Per output field but inputTS: whether it is the first element's, and its field code. */
  private final boolean[] ofFirst;
  private final int[] codes;
  /** Per output field of the first element: its index in a candidate's values. */
  private final int[] slot;
  /** The first element's selected field codes, in a candidate's value order. */
  private final int[] candidateCodes;

  PatternLogic(JsonNode q) {
    super(q);
    withinMs = integer(q, "within_ms");
    String consumption = text(q, "consumption");
    String[] policy = consumption.split("-");
    List<String> both = List.of("all", "one");
    if (policy.length != 2 || !both.contains(policy[0]) || !both.contains(policy[1])) {
      throw new IllegalArgumentException("query " + id + ": consumption " + consumption
          + " is not <all|one>-<all|one>");
    }
    consume = policy[0].equals("one");
    takeAll = policy[1].equals("all");
    JsonNode first = q.get("first");
    JsonNode second = q.get("second");
    if (first == null || second == null) {
      throw new IllegalArgumentException("query " + id + ": a pattern needs first and second");
    }
    firstStream = stream(text(first, "stream"));
    secondStream = stream(text(second, "stream"));
    firstWhere = where(first.get("where"));
    secondWhere = where(second.get("where"));
    JsonNode key = q.get("key");
    keyCode = key == null || key.isNull() ? null : fieldCode(key.asText());
    String[] select = texts(q, "select");
    if (select.length != fields.length - 1) {
      throw new IllegalArgumentException("query " + id + ": " + select.length + " selected fields for "
          + (fields.length - 1) + " output fields");
    }
    String firstAlias = text(first, "alias");
    String secondAlias = text(second, "alias");
    ofFirst = new boolean[select.length];
    codes = new int[select.length];
    slot = new int[select.length];
    List<Integer> kept = new ArrayList<>();
    for (int i = 0; i < select.length; i++) {
      int dot = select[i].indexOf('.');
      String alias = dot < 0 ? "" : select[i].substring(0, dot);
      if (!alias.equals(firstAlias) && !alias.equals(secondAlias)) {
        throw new IllegalArgumentException("query " + id + ": selected field " + select[i] + " names neither "
            + firstAlias + " nor " + secondAlias);
      }
      ofFirst[i] = alias.equals(firstAlias);
      codes[i] = fieldCode(select[i].substring(dot + 1));
      if (ofFirst[i]) {
        if (!kept.contains(codes[i])) {
          kept.add(codes[i]);
        }
        slot[i] = kept.indexOf(codes[i]);
      }
    }
    candidateCodes = kept.stream().mapToInt(Integer::intValue).toArray();
  }

  private int stream(String name) {
    int s = streamIndex(name);
    if (s < 0) {
      throw new IllegalArgumentException("query " + id + ": stream " + name + " is not among its inputs");
    }
    return s;
  }

  private Predicate where(JsonNode list) {
    if (list == null || !list.isArray()) {
      throw new IllegalArgumentException("query " + id + ": a pattern element needs a where list");
    }
    int[] c = new int[list.size()];
    String[] ops = new String[list.size()];
    double[] v = new double[list.size()];
    for (int i = 0; i < c.length; i++) {
      c[i] = fieldCode(list.get(i).get(0).asText());
      ops[i] = list.get(i).get(1).asText();
      v[i] = list.get(i).get(2).asDouble();
    }
    return new Predicate(c, ops, v);
  }

  /** Whether the event can be the first element (a candidate). */
  public boolean isFirst(Event e) {
    return e.stream == firstStream && firstWhere.test(e);
  }

  /** Whether the event can be the second element (a trigger). */
  public boolean isSecond(Event e) {
    return e.stream == secondStream && secondWhere.test(e);
  }

  /** An event that can be neither element never matters: it may be dropped before the shuffle. */
  @Override
  public boolean relevant(Event e) {
    return isFirst(e) || isSecond(e);
  }

  @Override
  public boolean keyed() {
    return keyCode != null;
  }

  /**
   * The key's value as a long: the value itself for ID (an int), the bits of the double otherwise
   * (-0.0 as 0.0, so that keys equal as numbers share a state). 0 without a key.
   */
  @Override
  public long stateKey(Event e) {
    if (keyCode == null) {
      return 0L;
    }
    if (keyCode == ID) {
      return e.id;
    }
    if (keyCode == TS) {
      return e.ts;
    }
    double v = e.a[keyCode];
    return Double.doubleToLongBits(v == 0.0 ? 0.0 : v);
  }

  public long withinMs() {
    return withinMs;
  }

  /** How many values a candidate holds (the first element's distinct selected fields). */
  public int candidateFields() {
    return candidateCodes.length;
  }

  /**
   * Handle one event of a key (of the whole stream without a key), given that key's candidates, in
   * feed order: rows go to {@code out}, the candidates are updated in place. Events that are not
   * {@link #relevant} change nothing.
   */
  public void process(Event e, Candidates c, Out out) {
    boolean second = isSecond(e);
    boolean first = isFirst(e);
    if (second) {
      prune(c, e.ts);
      int n = c.size();
      if (n > 0) {
        if (!takeAll) {
          out.row(row(c.oldest(), e), e.ingestTs);
          if (consume) {
            c.removeOldest();
          }
        } else {
          for (Candidate x : c.inOrder()) {
            out.row(row(x, e), e.ingestTs);
          }
          if (consume) {
            c.clear();
          }
        }
      }
    } else if (first && c.size() > 0) {
      prune(c, e.ts);          // keeps a key that only gets candidates bounded by its window
    }
    if (first) {
      double[] v = new double[candidateCodes.length];
      for (int i = 0; i < v.length; i++) {
        v[i] = e.value(candidateCodes[i]);
      }
      c.append(new Candidate(e.ts, v));
    }
  }

  /** Drop the candidates that no event at or after {@code ts} can match (TS + withinMs &lt;= ts). */
  public void prune(Candidates c, long ts) {
    while (c.size() > 0 && c.oldest().ts + withinMs <= ts) {
      c.removeOldest();
    }
  }

  /** The TS from which the oldest candidate is out of every window (Long.MAX_VALUE when none). */
  public long expiry(Candidates c) {
    return c.size() == 0 ? Long.MAX_VALUE : c.oldest().ts + withinMs;
  }

  private Object[] row(Candidate x, Event y) {
    Object[] out = new Object[fields.length];
    for (int i = 0; i < codes.length; i++) {
      double v = ofFirst[i] ? x.values[slot[i]] : y.value(codes[i]);
      out[i] = typed(v, types[i]);
    }
    out[codes.length] = typed((double) y.ts, types[codes.length]);
    return out;
  }

  @Override
  public StreamLogic newLogic() {
    return new Whole(this, new TreeMap<>());
  }

  @Override
  public StreamLogic restore(byte[] state) {
    ByteBuffer b = ByteBuffer.wrap(state).order(ByteOrder.LITTLE_ENDIAN);
    byte v = b.get();
    if (v != Whole.VERSION) {
      throw new IllegalArgumentException("query " + id + ": pattern state version " + v + ", this logic reads "
          + Whole.VERSION);
    }
    TreeMap<Long, CandidateDeque> keys = new TreeMap<>();
    int n = b.getInt();
    for (int i = 0; i < n; i++) {
      long key = b.getLong();
      keys.put(key, CandidateDeque.read(b));
    }
    return new Whole(this, keys);
  }

  /**
   * The whole stream as one state: every key's candidates in memory (one for an unkeyed
   * pattern). Bytes: version, the number of keys, then per key its state key and candidates.
   */
  private static final class Whole implements StreamLogic {
    static final byte VERSION = 1;
    private final PatternLogic q;
    private final Map<Long, CandidateDeque> keys;
    private long latest = Long.MIN_VALUE;

    Whole(PatternLogic q, TreeMap<Long, CandidateDeque> keys) {
      this.q = q;
      this.keys = new HashMap<>(keys);
    }

    @Override
    public void process(Event e, Out out) {
      if (!q.relevant(e)) {
        return;
      }
      if (e.ts < latest) {
        // Expiry relies on TS growing with the order: a broken input must not pass as a wrong answer.
        throw new IllegalArgumentException("query " + q.id + ": events must come in TS order (specs/SEMANTICS.md "
            + "section 1): TS " + e.ts + " after " + latest);
      }
      latest = e.ts;
      long k = q.stateKey(e);
      CandidateDeque c = keys.get(k);
      if (c == null) {
        if (!q.isFirst(e)) {
          return;              // a trigger of a key without candidates: nothing to pair or keep
        }
        c = new CandidateDeque();
        keys.put(k, c);
      }
      q.process(e, c, out);
      if (c.size() == 0) {
        keys.remove(k);
      }
    }

    @Override
    public byte[] toBytes() {
      // Keys whose candidates all expired are not written (their TS is older than the latest event's window).
      TreeMap<Long, CandidateDeque> live = new TreeMap<>();
      int size = 5;
      for (Map.Entry<Long, CandidateDeque> en : keys.entrySet()) {
        q.prune(en.getValue(), latest);
        if (en.getValue().size() > 0) {
          live.put(en.getKey(), en.getValue());
          size += 8 + en.getValue().byteSize();
        }
      }
      keys.keySet().retainAll(live.keySet());
      ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
      b.put(VERSION).putInt(live.size());
      for (Map.Entry<Long, CandidateDeque> en : live.entrySet()) {
        b.putLong(en.getKey());
        en.getValue().write(b);
      }
      return b.array();
    }
  }
}
