package cepkit.logic;

/**
 * The AND of comparisons {@code field op value} (op: lt le gt ge eq ne) on one event's fields, as
 * the literal's {@code where} lists give them (specs/SEMANTICS.md section 1). Fields compare as
 * doubles, as the reference (numpy) compares an int column with a float.
 */
final class Predicate {
  private static final String[] OPS = {"lt", "le", "gt", "ge", "eq", "ne"};
  private final int[] codes;
  private final int[] ops;
  private final double[] values;

  Predicate(int[] codes, String[] ops, double[] values) {
    this.codes = codes;
    this.ops = new int[ops.length];
    this.values = values;
    for (int i = 0; i < ops.length; i++) {
      this.ops[i] = java.util.Arrays.asList(OPS).indexOf(ops[i]);
      if (this.ops[i] < 0) {
        throw new IllegalArgumentException("comparison operator " + ops[i] + " is none of lt le gt ge eq ne");
      }
    }
  }

  boolean test(Event e) {
    for (int i = 0; i < codes.length; i++) {
      double x = e.value(codes[i]);
      double v = values[i];
      boolean ok;
      switch (ops[i]) {
        case 0:
          ok = x < v;
          break;
        case 1:
          ok = x <= v;
          break;
        case 2:
          ok = x > v;
          break;
        case 3:
          ok = x >= v;
          break;
        case 4:
          ok = x == v;
          break;
        default:
          ok = x != v;
      }
      if (!ok) {
        return false;
      }
    }
    return true;
  }
}
