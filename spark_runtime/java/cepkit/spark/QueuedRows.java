package cepkit.spark;

import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.NoSuchElementException;

import org.apache.spark.sql.Row;

/**
 * Rows made from an input one item at a time: {@link #take} may queue any number of rows per
 * item, {@link #end} the last ones once the input has ended (it runs once). A row leaves as soon as
 * it is queued and the input is read only when the queue is empty, so in real-time mode no output
 * waits for later input. The real-time plans' source tasks and state processors are all this shape.
 */
abstract class QueuedRows<I> implements Iterator<Row> {
  protected final ArrayDeque<Row> queued;
  private final Iterator<I> input;
  private boolean ended;

  QueuedRows(Iterator<I> input, ArrayDeque<Row> queued) {
    this.input = input;
    this.queued = queued;
  }

  QueuedRows(Iterator<I> input) {
    this(input, new ArrayDeque<>());
  }

  protected abstract void take(I item);

  protected void end() {
  }

  @Override
  public final boolean hasNext() {
    while (queued.isEmpty() && input.hasNext()) {
      take(input.next());
    }
    if (queued.isEmpty() && !ended) {
      ended = true;
      end();
    }
    return !queued.isEmpty();
  }

  @Override
  public final Row next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    return queued.poll();
  }
}
