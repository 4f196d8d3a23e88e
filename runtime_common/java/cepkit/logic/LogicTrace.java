package cepkit.logic;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The Java twins without an engine, for the tests (tests/runtime_common/test_logic_*.py): each case
 * of a manifest feeds a query's events through its logic the way an engine's operator would, in
 * the case's micro-batches, and writes the rows.
 *
 * <pre>java -cp CLASSES:JACKSON_JARS cepkit.logic.LogicTrace MANIFEST.json</pre>
 *
 * MANIFEST.json: {@code {"cases": [{"query": {literal}, "events": CSV, "cuts": [[a, b], ...],
 * "seed": s, "mode": "stream" | "keyed", "out": CSV}]}}. The events CSV has a header and one event
 * per line in feed order: stream (index in the query's inputs), ID, A1..An, TS, offset, ingestTS.
 * Events the query finds not {@link MicroQuery#relevant} are dropped first, as an engine drops them
 * before its shuffle.
 * <ul>
 *   <li>stream: one {@link StreamLogic}; its state is written to bytes and read back after every
 *   batch and, at random, after single events;</li>
 *   <li>keyed (a keyed pattern): each key's candidates live in a map of byte records plus
 *   counters, as in an engine's keyed state: one record per candidate ({@link SeqCandidates},
 *   Flink's plan) or per key and batch ({@link ChunkCandidates}, Spark's), chosen at random per
 *   key; a batch's events are grouped by key and the keys handled in random order (each key's
 *   events in feed order), one SeqCandidates per key and batch or per event at random, one
 *   ChunkCandidates per key and batch; after a batch (at random, and always
 *   after the last) every key is pruned with the batch's last TS (an engine's timer), and a key
 *   left with no candidate is removed.</li>
 * </ul>
 * Output: one row per line: the triggering event's offset, the row's values (int and long in
 * decimal, doubles as {@code x} and the hex of their bits: exact), and the row's ingestTS; then a
 * last line {@code #live N} for a keyed run (the candidates held at the end), else {@code #bytes N}
 * (the largest state written after a batch).
 */
public final class LogicTrace {
  private LogicTrace() {
  }

  public static void main(String[] args) throws IOException {
    JsonNode manifest = MicroQuery.JSON.readTree(Files.readAllBytes(Paths.get(args[0])));
    Map<String, List<Event>> read = new HashMap<>();
    for (JsonNode c : manifest.get("cases")) {
      runCase(c, read);
    }
  }

  private static void runCase(JsonNode c, Map<String, List<Event>> read) throws IOException {
    MicroQuery q = MicroQuery.fromJson(MicroQuery.JSON.writeValueAsString(c.get("query")));
    String path = c.get("events").asText();
    List<Event> events = read.get(path);
    if (events == null || !events.isEmpty() && events.get(0).a.length < q.attributes()) {
      events = readEvents(Paths.get(path), Math.max(q.attributes(), 4));
      read.put(path, events);
    }
    Random rng = new Random(c.get("seed").asLong());
    List<String> lines = new ArrayList<>();
    long[] trigger = new long[1];
    String[] types = q.types();
    Out out = (values, ingestTs) -> lines.add(line(trigger[0], values, types, ingestTs));
    boolean keyed = c.get("mode").asText().equals("keyed");
    StreamLogic logic = keyed ? null : q.restore(q.newLogic().toBytes());
    int maxBytes = 0;
    Map<Long, KeyStore> keys = new HashMap<>();
    int cutsLeft = c.get("cuts").size();
    for (JsonNode cut : c.get("cuts")) {
      cutsLeft--;
      List<Event> batch = new ArrayList<>();
      List<Event> raw = events.subList(cut.get(0).asInt(), cut.get(1).asInt());
      for (Event e : raw) {
        if (q.relevant(e)) {
          batch.add(e);
        }
      }
      if (!keyed) {
        for (Event e : batch) {
          trigger[0] = e.offset;
          logic.process(e, out);
          if (rng.nextInt(8) == 0) {
            logic = q.restore(logic.toBytes());
          }
        }
        byte[] state = logic.toBytes();
        maxBytes = Math.max(maxBytes, state.length);
        logic = q.restore(state);
        continue;
      }
      PatternLogic p = (PatternLogic) q;
      Map<Long, List<Event>> byKey = new LinkedHashMap<>();
      for (Event e : batch) {
        byKey.computeIfAbsent(p.stateKey(e), k -> new ArrayList<>()).add(e);
      }
      List<Long> order = new ArrayList<>(byKey.keySet());
      Collections.shuffle(order, rng);
      for (Long k : order) {
        KeyStore store = keys.computeIfAbsent(k, x -> new KeyStore(rng.nextBoolean()));
        if (store.chunked) {
          ChunkCandidates cands = new ChunkCandidates(store);
          for (Event e : byKey.get(k)) {
            trigger[0] = e.offset;
            p.process(e, cands, out);
          }
          cands.flush();
          if (store.counters == null) {
            keys.remove(k);
          }
          continue;
        }
        boolean perEvent = rng.nextBoolean();
        SeqCandidates cands = new SeqCandidates(store);
        for (Event e : byKey.get(k)) {
          if (perEvent) {
            cands = new SeqCandidates(store);
          }
          trigger[0] = e.offset;
          p.process(e, cands, out);
          if (perEvent) {
            cands.flush();
          }
        }
        cands.flush();
        if (store.counters == null) {
          keys.remove(k);
        }
      }
      // The time from every event of the batch, the dropped ones too (an engine's watermark).
      if (!raw.isEmpty() && (rng.nextBoolean() || cutsLeft == 0)) {
        long now = raw.get(raw.size() - 1).ts;
        for (Map.Entry<Long, KeyStore> en : new ArrayList<>(keys.entrySet())) {
          if (en.getValue().chunked) {
            ChunkCandidates cands = new ChunkCandidates(en.getValue());
            p.prune(cands, now);
            cands.flush();
          } else {
            SeqCandidates cands = new SeqCandidates(en.getValue());
            p.prune(cands, now);
            cands.flush();
          }
          if (en.getValue().counters == null) {
            keys.remove(en.getKey());
          }
        }
      }
    }
    if (keyed) {
      long live = 0;
      for (KeyStore s : keys.values()) {
        if (s.chunked) {
          live += s.counters[3];
          if (s.records.size() != s.counters[1] - s.counters[0]) {
            throw new IllegalStateException("keyed pattern: chunks and counters disagree");
          }
          continue;
        }
        live += s.records.size();
        if (s.records.size() != s.counters[1] - s.counters[0]) {
          throw new IllegalStateException("keyed pattern: records and counters disagree");
        }
      }
      lines.add("#live " + live);
    } else {
      lines.add("#bytes " + maxBytes);
    }
    Path target = Paths.get(c.get("out").asText());
    try (BufferedWriter w = Files.newBufferedWriter(target, StandardCharsets.UTF_8)) {
      for (String s : lines) {
        w.write(s);
        w.newLine();
      }
    }
  }

  private static String line(long trigger, Object[] values, String[] types, long ingestTs) {
    StringBuilder b = new StringBuilder().append(trigger);
    for (int i = 0; i < values.length; i++) {
      Object v = values[i];
      Class<?> want = types[i].equals("int") ? Integer.class : types[i].equals("long") ? Long.class : Double.class;
      if (v == null || v.getClass() != want) {
        throw new IllegalStateException("field " + i + ": " + (v == null ? "null" : v.getClass().getSimpleName())
            + " for type " + types[i]);
      }
      b.append(',');
      if (v instanceof Double) {
        b.append('x').append(Long.toHexString(Double.doubleToRawLongBits((Double) v)));
      } else {
        b.append(v);
      }
    }
    return b.append(',').append(ingestTs).toString();
  }

  private static List<Event> readEvents(Path path, int attributes) throws IOException {
    List<Event> out = new ArrayList<>();
    try (BufferedReader in = Files.newBufferedReader(path, StandardCharsets.UTF_8)) {
      List<String> header = List.of(in.readLine().split(","));
      int stream = header.indexOf("stream");
      int id = header.indexOf("ID");
      int ts = header.indexOf("TS");
      int offset = header.indexOf("offset");
      int ingest = header.indexOf("ingestTS");
      int[] a = new int[attributes];
      for (int i = 0; i < attributes; i++) {
        a[i] = header.indexOf("A" + (i + 1));
      }
      for (String l = in.readLine(); l != null; l = in.readLine()) {
        String[] f = l.split(",");
        double[] values = new double[attributes];
        for (int i = 0; i < attributes; i++) {
          values[i] = a[i] < 0 ? Double.NaN : Double.parseDouble(f[a[i]]);
        }
        out.add(new Event(Integer.parseInt(f[stream]), Integer.parseInt(f[id]), values, Long.parseLong(f[ts]),
            Long.parseLong(f[offset]), Long.parseLong(f[ingest])));
      }
    }
    return out;
  }

  /** One key's state as an engine's keyed map state and value state hold it (records as bytes). */
  private static final class KeyStore implements SeqCandidates.Store, ChunkCandidates.Store {
    final boolean chunked;
    long[] counters;
    final Map<Long, byte[]> records = new HashMap<>();

    KeyStore(boolean chunked) {
      this.chunked = chunked;
    }

    @Override
    public void counters(long[] values) {
      counters = values == null ? null : values.clone();
      if (values == null && !records.isEmpty()) {
        throw new IllegalStateException("keyed pattern: no candidates counted but chunks held");
      }
    }

    @Override
    public long[] counters() {
      return counters == null ? null : counters.clone();
    }

    @Override
    public void counters(long head, long tail) {
      counters = head == tail ? null : new long[] {head, tail};
      if (head == tail && !records.isEmpty()) {
        throw new IllegalStateException("keyed pattern: no candidates counted but records held");
      }
    }

    @Override
    public byte[] get(long seq) {
      byte[] r = records.get(seq);
      if (r == null) {
        throw new IllegalStateException("keyed pattern: no record " + seq);
      }
      return r.clone();
    }

    @Override
    public void put(long seq, byte[] record) {
      if (records.put(seq, record.clone()) != null) {
        throw new IllegalStateException("keyed pattern: record " + seq + " written twice");
      }
    }

    @Override
    public void remove(long seq) {
      if (records.remove(seq) == null) {
        throw new IllegalStateException("keyed pattern: removing record " + seq + ", which is not held");
      }
    }
  }
}
