import type { Histogram } from 'prom-client';
import type { MemoryStore, SearchQuery, SearchResult } from '../memory/types.js';

/**
 * The same store, with every `search` timed into `histogram` (failed searches too). Every other
 * method is the store's own, bound to it, so classes with private state keep working.
 */
export function timeMemorySearch<Store extends MemoryStore>(store: Store, histogram: Histogram): Store {
  const search = async (query: SearchQuery): Promise<SearchResult[]> => {
    const stop = histogram.startTimer();
    try {
      return await store.search(query);
    } finally {
      stop();
    }
  };
  return new Proxy(store, {
    get(target, property) {
      if (property === 'search') return search;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
