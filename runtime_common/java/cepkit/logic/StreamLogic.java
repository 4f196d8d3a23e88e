package cepkit.logic;

/**
 * The state and logic of one whole-stream group (a count window, a window join, an unkeyed
 * pattern; for tests and single-group plans also a keyed pattern with all its keys): fed the
 * query's relevant events one at a time in feed order (offset), it emits each row when the row is
 * determined. Its state is this object; {@link #toBytes} writes it (little-endian, versioned) and
 * {@link MicroQuery#restore} reads it back into a logic that continues exactly where this one was.
 */
public interface StreamLogic {
  /** Feed one event (in feed order; TS must not decrease); rows go to {@code out} at once. */
  void process(Event e, Out out);

  /** The state as bytes (little-endian, starting with a format version). */
  byte[] toBytes();
}
