import type { Migration } from '../storage/database.js';

/** Schema of typed memories and the transcript index. */
export const MEMORY_MIGRATIONS: readonly Migration[] = [];
