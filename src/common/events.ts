/**
 * Core code emits typed events through this seam; only the application wires them to pino
 * (or to stdout for `magpie replay --json`). Every event names its type and, where it has
 * one, the channel it concerns.
 */
export interface MagpieEvent {
  type: string;
  channel_id?: string;
  [field: string]: unknown;
}

export type EventListener = (event: MagpieEvent) => void;

export class EventStream {
  private readonly listeners = new Set<EventListener>();

  emit(event: MagpieEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A broken listener must never break the code that emitted the event.
      }
    }
  }

  /** Returns a function that removes the listener. */
  subscribe(listener: EventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
