package cepkit.logic;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A time-window query (Q3 TimeWindowAggregation, Q4 TwoLevelAggregation; specs/SEMANTICS.md section
 * 5) as the paned plans read it from the program's query literal (translators/micro_literal.py: id,
 * fields, types, range_ms, slide_ms, group_by, aggregates): Spark's (spark_runtime/java/cepkit/spark/
 * WindowRealTime.java, which adds the Spark schema of its rows) and {@link TimeWindowLogic}.
 *
 * <p>Its <em>value fields</em> are the distinct fields an aggregate other than COUNT reads; each
 * pane record keeps six statistics per value field (sum, M2, max, min, anchor, mean from the
 * anchor) and, for a field some MEDIAN reads, the values themselves. Group values travel as
 * doubles: exact for the integer ids the workloads group by (below 2^53).
 */
public final class WindowQuery implements Serializable {
  private static final long serialVersionUID = 1L;
  public static final int SUM = 0;
  public static final int M2 = 1;
  public static final int MAX = 2;
  public static final int MIN = 3;
  /** A value of the record (its first), and the mean of the values minus it (see WindowPanes). */
  public static final int ANCHOR = 4;
  public static final int MEAN = 5;
  public static final int STATS = 6;

  public final String id;
  public final long slideMs;
  /** Panes per window: range / slide. */
  public final int k;
  public final String[] groupBy;
  public final String[] valueFields;
  /** Per value field: whether a MEDIAN reads it (its values are kept). */
  public final boolean[] median;
  public final String[] functions;
  /** Per aggregate: the index of its field among the value fields (-1 for COUNT). */
  public final int[] fieldOf;
  public final String[] outFields;
  public final String[] outTypes;
  /** Per output field: a group field's index, AGGREGATE_BASE + an aggregate's, WINDOW_END or INPUT_TS. */
  private final int[] kinds;
  private static final int WINDOW_END = -1;
  private static final int INPUT_TS = -2;
  private static final int AGGREGATE_BASE = 1 << 20;

  public WindowQuery(String id, long rangeMs, long slideMs, String[] groupBy, String[] functions, String[] aggFields,
              String[] aliases, String[] outFields, String[] outTypes) {
    if (slideMs <= 0 || rangeMs <= 0 || rangeMs % slideMs != 0) {
      throw new IllegalArgumentException("query " + id + ": range_ms must be a positive multiple of slide_ms, got "
          + rangeMs + " and " + slideMs);
    }
    if (rangeMs / slideMs > 100_000) {
      throw new IllegalArgumentException("query " + id + ": " + rangeMs / slideMs + " panes per window is more "
          + "than the real-time plan keeps (100,000)");
    }
    this.id = id;
    this.slideMs = slideMs;
    this.k = (int) (rangeMs / slideMs);
    this.groupBy = groupBy;
    this.functions = functions;
    this.outFields = outFields;
    this.outTypes = outTypes;
    Map<String, Boolean> values = new LinkedHashMap<>();
    for (int a = 0; a < functions.length; a++) {
      if (!functions[a].equals("COUNT")) {
        values.merge(aggFields[a], functions[a].equals("MEDIAN"), Boolean::logicalOr);
      }
    }
    valueFields = values.keySet().toArray(new String[0]);
    median = new boolean[valueFields.length];
    for (int i = 0; i < valueFields.length; i++) {
      median[i] = values.get(valueFields[i]);
    }
    List<String> fields = List.of(valueFields);
    fieldOf = new int[functions.length];
    for (int a = 0; a < functions.length; a++) {
      fieldOf[a] = functions[a].equals("COUNT") ? -1 : fields.indexOf(aggFields[a]);
    }
    // Which output column each field is: a group value, an aggregate, windowEnd or inputTS.
    kinds = new int[outFields.length];
    for (int i = 0; i < outFields.length; i++) {
      int g = List.of(groupBy).indexOf(outFields[i]);
      int a = List.of(aliases).indexOf(outFields[i]);
      if (g >= 0) {
        kinds[i] = g;
      } else if (a >= 0) {
        kinds[i] = AGGREGATE_BASE + a;
      } else if (outFields[i].equals("windowEnd")) {
        kinds[i] = WINDOW_END;
      } else if (outFields[i].equals("inputTS")) {
        kinds[i] = INPUT_TS;
      } else {
        throw new IllegalArgumentException("query " + id + ": output field " + outFields[i]
            + " is neither a group field, an aggregate, windowEnd nor inputTS");
      }
    }
  }

  /** The query literal of a generated program, as JSON. */
  public static WindowQuery fromJson(String json) {
    try {
      return fromNode(MicroQuery.JSON.readTree(json));
    } catch (IOException e) {
      throw new IllegalArgumentException("time window: the query literal is not one: " + e);
    }
  }

  /** The query literal, parsed. */
  static WindowQuery fromNode(JsonNode q) {
    try {
      JsonNode aggs = q.get("aggregates");
      String[] functions = new String[aggs.size()];
      String[] fields = new String[aggs.size()];
      String[] aliases = new String[aggs.size()];
      for (int a = 0; a < aggs.size(); a++) {
        functions[a] = aggs.get(a).get(0).asText();
        fields[a] = aggs.get(a).get(1).isNull() ? null : aggs.get(a).get(1).asText();
        aliases[a] = aggs.get(a).get(2).asText();
      }
      return new WindowQuery(q.get("id").asText(), q.get("range_ms").asLong(), q.get("slide_ms").asLong(),
          texts(q.get("group_by")), functions, fields, aliases, texts(q.get("fields")), texts(q.get("types")));
    } catch (NullPointerException e) {
      throw new IllegalArgumentException("time window: the query literal is not one: " + e);
    }
  }

  private static String[] texts(JsonNode array) {
    List<String> out = new ArrayList<>();
    for (JsonNode n : array) {
      out.add(n.asText());
    }
    return out.toArray(new String[0]);
  }

  /**
   * One output row's values for window m of a group: the query id (the output stream), the
   * query's fields (Integer, Long or Double per their types), ingestTS.
   */
  public Object[] row(double[] group, long m, long n, double[] stats, double[][] medians, long ts, long ingestTs) {
    Object[] out = new Object[outFields.length + 2];
    out[0] = id;
    for (int i = 0; i < outFields.length; i++) {
      int kind = kinds[i];
      Object v;
      if (kind == WINDOW_END) {
        v = m * slideMs;
      } else if (kind == INPUT_TS) {
        v = ts;
      } else if (kind >= AGGREGATE_BASE) {
        v = aggregate(kind - AGGREGATE_BASE, n, stats, medians);
      } else {
        v = group[kind];
      }
      out[i + 1] = typed(v, outTypes[i]);
    }
    out[out.length - 1] = ingestTs;
    return out;
  }

  private Object aggregate(int a, long n, double[] stats, double[][] medians) {
    int f = fieldOf[a];
    switch (functions[a]) {
      case "COUNT":
        return n;
      case "SUM":
        return stats[f * STATS + SUM];
      case "AVG":
        return stats[f * STATS + SUM] / n;
      case "MAX":
        return stats[f * STATS + MAX];
      case "MIN":
        return stats[f * STATS + MIN];
      case "STDEV":         // the population standard deviation (specs/SEMANTICS.md section 2)
        return Math.sqrt(Math.max(stats[f * STATS + M2], 0.0) / n);
      case "MEDIAN":
        return middle(medians[f]);
      default:
        throw new IllegalArgumentException("query " + id + ": no aggregate function " + functions[a]);
    }
  }

  /** The middle of the sorted values; the mean of the two middle ones for an even count. */
  public static double middle(double[] values) {
    double[] v = values.clone();
    java.util.Arrays.sort(v);
    int h = v.length / 2;
    return v.length % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
  }

  private static Object typed(Object v, String logical) {
    Number x = (Number) v;
    switch (logical) {
      case "int":
        return x.intValue();
      case "long":
        return x.longValue();
      default:
        return x.doubleValue();
    }
  }
}
