package cepkit.flink;

import cepkit.logic.MicroQuery;
import cepkit.wire.FrameClient;

import java.io.IOException;
import java.sql.Array;
import java.sql.Connection;
import java.sql.Driver;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.AsyncDataStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.functions.async.ResultFuture;
import org.apache.flink.streaming.api.functions.async.RichAsyncFunction;
import org.apache.flink.types.Row;

/**
 * J3, the stream-to-database join (TableJoin with {@code storage = database}; specs/SEMANTICS.md
 * section 7), in the JVM: each event of the query's stream that passes the stream's conditions is
 * looked up in PostgreSQL's table {@code t} by its key, through Flink's async I/O operator
 * ({@code AsyncDataStream.unorderedWait}) at the job's parallelism, and each match that passes the
 * table's conditions is a row (the query's fields, {@code inputTS} the event's TS, then
 * {@code ingestTS}) for the harness sink. The table never enters Flink's memory: as the Python
 * plan's lookup (runtime_common/micro_lookup.py), one query per batch of pending events
 * ({@code SELECT ... FROM t WHERE key = ANY(keys)}), here the events that came while the previous
 * query ran, on one connection per subtask through Debian's PostgreSQL JDBC driver (loaded from the
 * job's jars by name: this class does not link against it). Flink checkpoints the events whose
 * lookup is in flight and asks again after a restore. A failed query fails the job (it restarts).
 *
 * <p>Keys compare as numbers: an event's key equals a table key of the same value (an integral
 * double equals the integer); the table's key column is {@code id} (integer) or a double column.
 * The connection's URL and properties (with the database's password) are constructor arguments,
 * serialized with the job, never in {@link #toString}.
 */
public final class MicroLookup {
  /** Most events looked up by one query. */
  static final int BATCH = 4096;
  /** Events in flight per subtask (Flink's async I/O capacity). */
  static final int CAPACITY = 8192;
  static final long TIMEOUT_S = 120;

  private MicroLookup() {
  }

  /**
   * The query's plan over the feed's event Rows (by name: the query's stream fields, TS, stream,
   * ingestTS): its output Rows, {@code stream} (the query's id), its fields, then {@code ingestTS},
   * for a HarnessSink.
   *
   * @param url            the JDBC URL ({@code jdbc:postgresql://host:port/db})
   * @param propertiesJson the connection's properties ({@code {"user": ..., "password": ...}})
   */
  public static DataStream<Row> plan(DataStream<Row> events, String queryJson, String url, String propertiesJson,
                                     int parallelism) {
    Query q = new Query(queryJson);
    RowTypeInfo type = (RowTypeInfo) events.getType();
    q.bind(type);
    TypeInformation<?>[] types = new TypeInformation<?>[q.fields.length + 2];
    String[] names = new String[q.fields.length + 2];
    names[0] = MicroFlink.STREAM;
    types[0] = Types.STRING;
    for (int i = 0; i < q.fields.length; i++) {
      names[i + 1] = q.fields[i];
      types[i + 1] = q.types[i].equals("int") ? Types.INT : q.types[i].equals("long") ? Types.LONG : Types.DOUBLE;
    }
    names[q.fields.length + 1] = MicroFlink.INGEST_TS;
    types[q.fields.length + 1] = Types.LONG;
    DataStream<Row> mine = events.filter(new Mine(queryJson, type))
        .name("cepkit " + q.id + " events (JVM)").setParallelism(events.getParallelism())
        .rebalance();
    return AsyncDataStream.unorderedWait(mine, new Lookup(queryJson, type, url, propertiesJson), TIMEOUT_S,
            TimeUnit.SECONDS, CAPACITY)
        .returns(new RowTypeInfo(types, names))
        .name("cepkit " + q.id + " table_join (JVM JDBC lookup)").uid("cepkit-micro-" + q.id)
        .setParallelism(parallelism);
  }

  /** The query literal as the plan reads it, bound to the event Rows' columns. */
  static final class Query {
    final String id;
    final String input;
    final String table;
    final String[] fields;
    final String[] types;
    /** The table's columns the query reads (lower case; the key first). */
    final List<String> tableColumns = new ArrayList<>();
    final boolean intKey;
    final String streamKey;
    /** Per selected field: its table column's index, or -1 for a stream field (then {@link #selectAt}). */
    final int[] selectTable;
    final String[] selectStream;
    final int[] whereTable;
    final String[] whereStream;
    final String[] ops;
    final double[] values;
    int[] selectAt;
    int[] whereAt;
    int keyAt;
    int tsAt;
    int streamAt;
    int ingestAt;

    Query(String json) {
      JsonNode q;
      try {
        q = FrameClient.JSON.readTree(json);
      } catch (IOException e) {
        throw new IllegalArgumentException("query literal: not JSON: " + e.getMessage());
      }
      id = q.get("id").asText();
      input = q.get("input").asText();
      table = q.get("table").asText();
      streamKey = q.get("stream_key").asText();
      String tableKey = q.get("table_key").asText().toLowerCase(Locale.ROOT);
      intKey = tableKey.equals("id");
      tableColumns.add(tableKey);
      fields = texts(q.get("fields"));
      types = texts(q.get("types"));
      String[] select = texts(q.get("select"));
      if (select.length != fields.length - 1 || !fields[fields.length - 1].equals("inputTS")) {
        throw new IllegalArgumentException("query " + id + ": fields must be the selected ones and inputTS");
      }
      selectTable = new int[select.length];
      selectStream = new String[select.length];
      for (int i = 0; i < select.length; i++) {
        selectTable[i] = tableColumn(select[i]);
        selectStream[i] = selectTable[i] < 0 ? streamField(select[i]) : null;
      }
      JsonNode where = q.get("where");
      whereTable = new int[where.size()];
      whereStream = new String[where.size()];
      ops = new String[where.size()];
      values = new double[where.size()];
      for (int i = 0; i < where.size(); i++) {
        String name = where.get(i).get(0).asText();
        whereTable[i] = tableColumn(name);
        whereStream[i] = whereTable[i] < 0 ? streamField(name) : null;
        ops[i] = where.get(i).get(1).asText();
        values[i] = where.get(i).get(2).asDouble();
        test(ops[i], 0.0, 0.0);     // an unknown operator fails here, where the job is built
      }
    }

    /** A table field's index in {@link #tableColumns} (added if new), or -1 for a stream field. */
    private int tableColumn(String name) {
      int dot = name.indexOf('.');
      if (dot < 0 || !name.substring(0, dot).equals(table)) {
        return -1;
      }
      String column = name.substring(dot + 1).toLowerCase(Locale.ROOT);
      if (!column.matches("[a-z][a-z0-9_]*")) {
        throw new IllegalArgumentException("query " + id + ": table field " + name + " is not a column name");
      }
      int at = tableColumns.indexOf(column);
      if (at < 0) {
        tableColumns.add(column);
        at = tableColumns.size() - 1;
      }
      return at;
    }

    private String streamField(String name) {
      int dot = name.indexOf('.');
      return dot < 0 ? name : name.substring(dot + 1);
    }

    void bind(RowTypeInfo type) {
      keyAt = at(type, streamKey);
      tsAt = at(type, MicroFlink.TS);
      streamAt = at(type, MicroFlink.STREAM);
      ingestAt = at(type, MicroFlink.INGEST_TS);
      selectAt = new int[selectStream.length];
      for (int i = 0; i < selectAt.length; i++) {
        selectAt[i] = selectStream[i] == null ? -1 : at(type, selectStream[i]);
      }
      whereAt = new int[whereStream.length];
      for (int i = 0; i < whereAt.length; i++) {
        whereAt[i] = whereStream[i] == null ? -1 : at(type, whereStream[i]);
      }
    }

    private int at(RowTypeInfo type, String name) {
      int i = type.getFieldIndex(name);
      if (i < 0) {
        throw new IllegalArgumentException("query " + id + ": the events have no column " + name + " (they have "
            + String.join(", ", type.getFieldNames()) + ")");
      }
      return i;
    }

    /** Whether an event of the query's stream passes the stream's conditions. */
    boolean mine(Row r) {
      if (!input.equals(r.getField(streamAt))) {
        return false;
      }
      for (int i = 0; i < whereAt.length; i++) {
        if (whereAt[i] >= 0 && !test(ops[i], number(r, whereAt[i]), values[i])) {
          return false;
        }
      }
      return true;
    }

    /** The event's rows for the table's rows of its key (each the table columns' values). */
    void rows(Row r, List<double[]> matches, List<Row> out) {
      for (double[] t : matches) {
        boolean pass = true;
        for (int i = 0; i < whereTable.length && pass; i++) {
          pass = whereTable[i] < 0 || test(ops[i], t[whereTable[i]], values[i]);
        }
        if (!pass) {
          continue;
        }
        Row row = new Row(fields.length + 2);
        row.setField(0, id);
        for (int i = 0; i < selectTable.length; i++) {
          double v = selectTable[i] >= 0 ? t[selectTable[i]] : number(r, selectAt[i]);
          row.setField(i + 1, MicroQuery.typed(v, types[i]));
        }
        row.setField(fields.length, MicroQuery.typed(number(r, tsAt), types[fields.length - 1]));
        row.setField(fields.length + 1, ((Number) r.getField(ingestAt)).longValue());
        out.add(row);
      }
    }

    String sql() {
      List<String> cols = new ArrayList<>(tableColumns);
      return "SELECT " + String.join(", ", cols) + " FROM t WHERE " + cols.get(0) + " = ANY(?)";
    }
  }

  static double number(Row r, int at) {
    return ((Number) r.getField(at)).doubleValue();
  }


  static boolean test(String op, double a, double b) {
    switch (op) {
      case "lt":
        return a < b;
      case "le":
        return a <= b;
      case "gt":
        return a > b;
      case "ge":
        return a >= b;
      case "eq":
        return a == b;
      case "ne":
        return a != b;
      default:
        throw new IllegalArgumentException("no comparison " + op);
    }
  }

  static String[] texts(JsonNode n) {
    String[] out = new String[n.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = n.get(i).asText();
    }
    return out;
  }

  /** The query's events that pass its stream's conditions (chained to the feed). */
  static final class Mine implements org.apache.flink.api.common.functions.FilterFunction<Row> {
    private static final long serialVersionUID = 1L;
    private final String queryJson;
    private final RowTypeInfo type;
    private transient Query q;

    Mine(String queryJson, RowTypeInfo type) {
      this.queryJson = queryJson;
      this.type = type;
    }

    @Override
    public boolean filter(Row r) {
      if (q == null) {
        q = new Query(queryJson);
        q.bind(type);
      }
      return q.mine(r);
    }
  }

  /** One event waiting for its lookup. */
  private static final class Pending {
    final Row event;
    final ResultFuture<Row> future;

    Pending(Row event, ResultFuture<Row> future) {
      this.event = event;
      this.future = future;
    }
  }

  /** The lookups of one subtask: a thread of its own asks PostgreSQL for each batch of pending events. */
  static final class Lookup extends RichAsyncFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final String queryJson;
    private final RowTypeInfo type;
    private final String url;
    private final String propertiesJson;
    private transient Query q;
    private transient Connection conn;
    private transient PreparedStatement select;
    private transient LinkedBlockingQueue<Pending> queue;
    private transient Thread worker;
    private transient volatile boolean closed;

    Lookup(String queryJson, RowTypeInfo type, String url, String propertiesJson) {
      this.queryJson = queryJson;
      this.type = type;
      this.url = url;
      this.propertiesJson = propertiesJson;
    }

    @Override
    public String toString() {
      return "cepkit J3 lookup";      // never the URL's or the properties' password
    }

    @Override
    public void open(OpenContext context) throws Exception {
      q = new Query(queryJson);
      q.bind(type);
      Properties props = new Properties();
      Iterator<Map.Entry<String, JsonNode>> given = FrameClient.JSON.readTree(propertiesJson).fields();
      while (given.hasNext()) {
        Map.Entry<String, JsonNode> e = given.next();
        props.setProperty(e.getKey(), e.getValue().asText());
      }
      Driver driver;
      try {
        driver = (Driver) Class.forName("org.postgresql.Driver", true, getClass().getClassLoader())
            .getDeclaredConstructor().newInstance();
      } catch (ClassNotFoundException e) {
        throw new IllegalStateException("query " + q.id + ": the PostgreSQL JDBC driver is not among the job's jars "
            + "(Debian's libpostgresql-jdbc-java: apt-get install libpostgresql-jdbc-java)");
      }
      conn = driver.connect(url, props);
      if (conn == null) {
        throw new IllegalStateException("query " + q.id + ": the PostgreSQL JDBC driver does not take the URL");
      }
      select = conn.prepareStatement(q.sql());
      queue = new LinkedBlockingQueue<>();
      worker = new Thread(this::serve, "cepkit J3 lookup " + q.id);
      worker.setDaemon(true);
      worker.start();
    }

    @Override
    public void asyncInvoke(Row event, ResultFuture<Row> future) {
      queue.add(new Pending(event, future));
    }

    /** Take every pending event (up to BATCH), ask for their keys at once, answer each. */
    private void serve() {
      List<Pending> batch = new ArrayList<>();
      while (!closed) {
        try {
          Pending first = queue.poll(100, TimeUnit.MILLISECONDS);
          if (first == null) {
            continue;
          }
          batch.clear();
          batch.add(first);
          queue.drainTo(batch, BATCH - 1);
          answer(batch);
        } catch (InterruptedException e) {
          return;
        } catch (Exception e) {
          for (Pending p : batch) {
            p.future.completeExceptionally(e);
          }
        }
      }
    }

    private void answer(List<Pending> batch) throws SQLException {
      TreeSet<Double> keys = new TreeSet<>();
      for (Pending p : batch) {
        double k = number(p.event, q.keyAt);
        if (!q.intKey || (k == Math.rint(k) && k >= Integer.MIN_VALUE && k <= Integer.MAX_VALUE)) {
          keys.add(k == 0.0 ? 0.0 : k);     // an integer table key matches only integral values
        }
      }
      Map<Double, List<double[]>> found = new HashMap<>();
      if (!keys.isEmpty()) {
        Object[] array = new Object[keys.size()];
        int i = 0;
        for (double k : keys) {
          array[i++] = q.intKey ? (Object) (int) k : (Object) k;
        }
        Array sqlArray = conn.createArrayOf(q.intKey ? "int4" : "float8", array);
        select.setArray(1, sqlArray);
        try (ResultSet rs = select.executeQuery()) {
          int n = q.tableColumns.size();
          while (rs.next()) {
            double[] t = new double[n];
            for (int c = 0; c < n; c++) {
              t[c] = rs.getDouble(c + 1);
            }
            double k = t[0] == 0.0 ? 0.0 : t[0];
            found.computeIfAbsent(k, x -> new ArrayList<>()).add(t);
          }
        } finally {
          sqlArray.free();
        }
      }
      for (Pending p : batch) {
        double k = number(p.event, q.keyAt);
        List<double[]> matches = found.get(k == 0.0 ? 0.0 : k);
        if (matches == null) {
          p.future.complete(Collections.emptyList());
          continue;
        }
        List<Row> out = new ArrayList<>(matches.size());
        q.rows(p.event, matches, out);
        p.future.complete(out);
      }
    }

    @Override
    public void close() throws Exception {
      closed = true;
      if (worker != null) {
        worker.interrupt();
        worker.join(5_000);
      }
      if (conn != null) {
        conn.close();
      }
    }
  }
}
