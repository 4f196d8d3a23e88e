package cepkit.logic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * A microbenchmark query as the Java twins of the cores read it: the query literal of a generated
 * program (translators/micro_literal.py {@code query_literal}) given as JSON text. The engine-neutral
 * Java library {@code cepkit.logic} is shared by Spark's and Flink's JVM plans; it uses no engine
 * class (only Jackson, relocated for Flink by harness/javac.py).
 *
 * <p>{@link #fromJson} gives the kind's subclass ({@link CountWindowLogic}, {@link WindowJoinLogic},
 * {@link PatternLogic}, {@link TimeWindowLogic}). What an engine needs from any of them:
 * <ul>
 *   <li>{@link #inputs}: the stream names; an {@link Event}'s {@code stream} is an index into it;</li>
 *   <li>{@link #attributes}: how many {@code A} values events must carry;</li>
 *   <li>{@link #relevant}: whether an event can matter at all (the rest may be dropped before the
 *   shuffle);</li>
 *   <li>{@link #keyed} and {@link #stateKey}: whether the state is per key value (a keyed pattern:
 *   the engine keeps it in its keyed state) or one group for the whole stream;</li>
 *   <li>{@link #newLogic} / {@link #restore}: a whole-stream group's logic, fresh or from bytes.</li>
 * </ul>
 */
public abstract class MicroQuery {
  /** Field codes (see {@link #fieldCode}): an A field is its index (A1 = 0). */
  public static final int ID = -1;
  public static final int TS = -2;
  static final ObjectMapper JSON = new ObjectMapper();

  final String id;
  final String kind;
  final String[] inputs;
  final String[] fields;
  final String[] types;
  /** The highest A index any part of the query reads, plus one. */
  int attributes;

  MicroQuery(JsonNode q) {
    id = text(q, "id");
    kind = text(q, "kind");
    inputs = texts(q, "inputs");
    fields = texts(q, "fields");
    types = texts(q, "types");
    if (fields.length != types.length || fields.length == 0 || !fields[fields.length - 1].equals("inputTS")) {
      throw new IllegalArgumentException("query " + id + ": fields and types must match and end with inputTS");
    }
  }

  /** The query of a literal given as JSON text; IllegalArgumentException (naming the query) when it is not one. */
  public static MicroQuery fromJson(String json) {
    JsonNode q;
    try {
      q = JSON.readTree(json);
    } catch (IOException e) {
      throw new IllegalArgumentException("query literal: not JSON: " + e.getMessage());
    }
    if (q == null || !q.isObject()) {
      throw new IllegalArgumentException("query literal: not a JSON object");
    }
    String kind = text(q, "kind");
    switch (kind) {
      case "count_window":
        return new CountWindowLogic(q);
      case "window_join":
        return new WindowJoinLogic(q);
      case "pattern":
        return new PatternLogic(q);
      case "time_window":
        return new TimeWindowLogic(q);
      default:
        throw new IllegalArgumentException("query " + text(q, "id") + ": no Java logic for kind " + kind);
    }
  }

  public String id() {
    return id;
  }

  public String kind() {
    return kind;
  }

  /** The query's input streams; {@link Event#stream} indexes this array. */
  public String[] inputs() {
    return inputs.clone();
  }

  /** The output fields in order (the last is inputTS). */
  public String[] fields() {
    return fields.clone();
  }

  /** Their logical types: int, long or double. */
  public String[] types() {
    return types.clone();
  }

  /** How many A values ({@code A1..A<n>}) events must carry in {@link Event#a}. */
  public int attributes() {
    return attributes;
  }

  /** The index of stream {@code name} in {@link #inputs}, or -1. */
  public int streamIndex(String name) {
    for (int i = 0; i < inputs.length; i++) {
      if (inputs[i].equals(name)) {
        return i;
      }
    }
    return -1;
  }

  /** Whether an event can matter to the query at all; an engine may drop the others early. */
  public abstract boolean relevant(Event e);

  /** Whether the state is per value of a key ({@link #stateKey}); false: one group, the whole stream. */
  public boolean keyed() {
    return false;
  }

  /** The state key of a relevant event (0 when not {@link #keyed}). */
  public long stateKey(Event e) {
    return 0L;
  }

  /** A fresh whole-stream group's logic. */
  public abstract StreamLogic newLogic();

  /** A whole-stream group's logic continuing from {@link StreamLogic#toBytes}'s bytes. */
  public abstract StreamLogic restore(byte[] state);

  // ---- helpers shared by the kinds ----------------------------------------------------------

  /** The code of a plain field name: ID, TS, or A&lt;k&gt; as k - 1; records the A's needed. */
  int fieldCode(String name) {
    if (name.equals("ID")) {
      return ID;
    }
    if (name.equals("TS")) {
      return TS;
    }
    if (name.length() > 1 && name.charAt(0) == 'A') {
      try {
        int k = Integer.parseInt(name.substring(1));
        if (k >= 1) {
          attributes = Math.max(attributes, k);
          return k - 1;
        }
      } catch (NumberFormatException ignored) {
        // falls through to the error
      }
    }
    throw new IllegalArgumentException("query " + id + ": no event field " + name + " (ID, A1..AN, TS)");
  }

  /** A value of logical type {@code type} (int, long, double) as the row's Java object. */
  public static Object typed(double v, String type) {
    switch (type) {
      case "int":
        return (int) v;
      case "long":
        return (long) v;
      default:
        return v;
    }
  }

  static String text(JsonNode q, String key) {
    JsonNode n = q.get(key);
    if (n == null || !n.isTextual()) {
      throw new IllegalArgumentException("query literal: key " + key + " missing or not a string");
    }
    return n.asText();
  }

  static long integer(JsonNode q, String key) {
    JsonNode n = q.get(key);
    if (n == null || !n.canConvertToLong()) {
      throw new IllegalArgumentException("query literal: key " + key + " missing or not an integer");
    }
    return n.asLong();
  }

  static String[] texts(JsonNode q, String key) {
    JsonNode n = q.get(key);
    if (n == null || !n.isArray()) {
      throw new IllegalArgumentException("query literal: key " + key + " missing or not a list");
    }
    List<String> out = new ArrayList<>();
    for (JsonNode x : n) {
      out.add(x.asText());
    }
    return out.toArray(new String[0]);
  }
}
