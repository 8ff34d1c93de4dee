/**
 * Waiting for the bot: a test waits for something it expects the bot to do (a post, a reply, a
 * session) and fails with a readable message, rather than hanging, when it never comes.
 */

/** One pending wait: the value it is for, and how to hand it over. */
export interface Waiter<T> {
  predicate: (value: T) => boolean;
  resolve: (value: T) => void;
}

/** Waits for a value matching the predicate, to arrive through `settle`. */
export function waitOn<T>(waiters: Set<Waiter<T>>, predicate: (value: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  let waiter: Waiter<T>;
  const promise = new Promise<T>((resolve) => {
    waiter = { predicate, resolve };
    waiters.add(waiter);
  });
  return withTimeout(promise, timeoutMs, what).finally(() => waiters.delete(waiter));
}

/** Hands a new value to every waiter it matches, and forgets them. */
export function settle<T>(waiters: Set<Waiter<T>>, value: T): void {
  for (const waiter of [...waiters]) {
    if (waiter.predicate(value)) {
      waiters.delete(waiter);
      waiter.resolve(value);
    }
  }
}

export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`fake discord: timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
