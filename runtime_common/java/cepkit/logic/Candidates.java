package cepkit.logic;

/**
 * One key's pattern candidates, oldest first: a FIFO the engine keeps in its keyed state. The
 * logic only ever appends at the back, removes at the front, clears, and reads all in order
 * (ALL on the second element: every one of them is a match, so reading costs the output). Engine
 * implementations: {@link SeqCandidates} over a keyed map state (sequence number -> record) plus
 * two counters, for an engine calling once per event (Flink); {@link ChunkCandidates}, a record per
 * key and call, for one calling once per key and batch (Spark); {@link CandidateDeque} in memory.
 */
public interface Candidates {
  int size();

  /** The oldest candidate; only called when size() > 0. */
  Candidate oldest();

  void removeOldest();

  void append(Candidate c);

  void clear();

  /** Every candidate, oldest first (not modified during the iteration). */
  Iterable<Candidate> inOrder();
}
