/** Long-term memory: the store, its tools and its embedders. */
export { openMemoryStore, createEmbedder, type OpenMemoryStoreOptions } from './open-memory-store.js';
export { createMemoryTools } from './tools.js';
export { SqlMemoryStore } from './sql-memory-store.js';
export { transcriptText } from './item-writes.js';
export { MEMORY_REWRITE_MARKER } from './memory-deletion.js';
export { HashingEmbedder, type HashingEmbedderOptions } from './hashing-embedder.js';
export { HttpEmbedder, EmbeddingError, type HttpEmbedderOptions } from './http-embedder.js';
export { embedderIdentity, type Embedder } from './embedder.js';
export { DEFAULT_SEARCH_TUNING, type SearchTuning } from './hybrid-search.js';
export { DEFAULT_HNSW_PARAMS, type HnswParams } from './vector-index.js';
export { DEFAULT_IMPORTANCE, MAX_SEARCH_LIMIT, MAX_MEMORY_LENGTH } from './validation.js';
export * from './types.js';
