/** How a `HashingEmbedder` is built; also what the embedding thread is told, so one thread serves any. */
export interface HashingEmbedderOptions {
  /** Vector length; DEFAULTS.memory.hashDimension. */
  dimension: number;
  /** Weight of a stop word relative to a content word (default 0.1: present, but barely). */
  stopWordWeight?: number;
  /** Weight of one character trigram (default 0.6): lets "paint" meet "painting" without drowning words. */
  trigramWeight?: number;
  /**
   * Large batches are embedded on the process's embedding thread (same code, same vectors), off
   * the event loop; small ones, such as a search query, stay inline. Default false.
   */
  offThread?: boolean;
}
