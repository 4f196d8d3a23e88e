package cepkit.logic;

/** Takes the logic's output rows as they are determined, in the reference order. */
public interface Out {
  /**
   * One row: {@code values} are the query's {@code fields} in order (the last is {@code inputTS}),
   * each an Integer, Long or Double as the literal's {@code types} say; {@code ingestTs} is the
   * triggering event's. The array is fresh: the receiver may keep it.
   */
  void row(Object[] values, long ingestTs);
}
