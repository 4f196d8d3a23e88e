package cepkit.logic;

/**
 * One input event as the logic reads it (specs/SEMANTICS.md section 1): which of the query's
 * {@code inputs} it belongs to, its fields ({@code ID}, {@code A1..AN}, {@code TS}), its feed
 * offset and the time the feed handed it out ({@code ingestTS}, carried to every row it triggers).
 *
 * <p>An engine may reuse one Event for many rows: the logic never keeps a reference to an Event
 * (or to its {@code a} array) after the call it was given to returns; it copies what it keeps.
 */
public final class Event {
  /** The index of the event's stream in the query's {@code inputs} ({@link MicroQuery#inputs}). */
  public int stream;
  public int id;
  /** {@code a[i]} is {@code A(i+1)}; at least {@link MicroQuery#attributes} of them. */
  public double[] a;
  public long ts;
  public long offset;
  public long ingestTs;

  public Event() {
    a = new double[0];
  }

  public Event(int stream, int id, double[] a, long ts, long offset, long ingestTs) {
    set(stream, id, a, ts, offset, ingestTs);
  }

  /** Overwrite every field (for an engine that reuses one Event); returns this. */
  public Event set(int stream, int id, double[] a, long ts, long offset, long ingestTs) {
    this.stream = stream;
    this.id = id;
    this.a = a;
    this.ts = ts;
    this.offset = offset;
    this.ingestTs = ingestTs;
    return this;
  }

  /** A field's value as a double (exact for ID, for A's, and for TS below 2^53) by its code
   * ({@link MicroQuery#fieldCode}). */
  public double value(int code) {
    if (code >= 0) {
      return a[code];
    }
    return code == MicroQuery.ID ? id : (double) ts;
  }
}
