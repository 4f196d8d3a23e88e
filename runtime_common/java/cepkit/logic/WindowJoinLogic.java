package cepkit.logic;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The count-window join (Q5 / J1, kind window_join; specs/SEMANTICS.md section 6), the Java twin
 * of runtime_common/micro_cores/window_join.py and of the reference validator/micro_joins.py. One
 * group: both input streams ({@link #newLogic}).
 */
public final class WindowJoinLogic extends MicroQuery {
  WindowJoinLogic(JsonNode q) {
    super(q);
  }

  /** Every event of either stream takes a slot in its window (even one failing `where`). */
  @Override
  public boolean relevant(Event e) {
    return e.stream == 0 || e.stream == 1;
  }

  @Override
  public StreamLogic newLogic() {
    throw new UnsupportedOperationException("window join: not yet");
  }

  @Override
  public StreamLogic restore(byte[] state) {
    throw new UnsupportedOperationException("window join: not yet");
  }
}
