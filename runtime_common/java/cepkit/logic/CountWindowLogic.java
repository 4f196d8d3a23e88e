package cepkit.logic;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The count-window aggregation (Q2, kind count_window; specs/SEMANTICS.md section 4), the Java
 * twin of runtime_common/micro_cores/count_window.py and of the reference's {@code count_window}
 * (validator/micro_windows.py). One group: the whole input stream ({@link #newLogic}).
 */
public final class CountWindowLogic extends MicroQuery {
  CountWindowLogic(JsonNode q) {
    super(q);
  }

  /** Every event of the input stream counts in the window. */
  @Override
  public boolean relevant(Event e) {
    return e.stream == 0;
  }

  @Override
  public StreamLogic newLogic() {
    throw new UnsupportedOperationException("count window: not yet");
  }

  @Override
  public StreamLogic restore(byte[] state) {
    throw new UnsupportedOperationException("count window: not yet");
  }
}
