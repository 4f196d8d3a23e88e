package cepkit.logic;

import java.util.HashMap;
import java.util.Map;

/**
 * A bucket's records in memory ({@link PairsBucket.Store}): what the engines' trace drivers use in
 * place of a state store, with {@link #copy()} as a checkpoint (records are copied, so a later
 * write cannot reach a checkpoint taken before it).
 */
public final class PairsMemoryStore implements PairsBucket.Store {
  private byte[] clock;
  private final Map<Integer, byte[]> symbols = new HashMap<>();
  private byte[] books;

  public PairsMemoryStore copy() {
    PairsMemoryStore c = new PairsMemoryStore();
    c.clock = clock == null ? null : clock.clone();
    symbols.forEach((k, v) -> c.symbols.put(k, v.clone()));
    c.books = books == null ? null : books.clone();
    return c;
  }

  @Override
  public byte[] clock() {
    return clock;
  }

  @Override
  public void clock(byte[] record) {
    clock = record;
  }

  @Override
  public byte[] symbol(int code) {
    return symbols.get(code);
  }

  @Override
  public void symbol(int code, byte[] record) {
    symbols.put(code, record);
  }

  @Override
  public byte[] books() {
    return books;
  }

  @Override
  public void books(byte[] record) {
    books = record;
  }
}
