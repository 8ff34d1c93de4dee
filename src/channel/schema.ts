import type { Migration } from '../storage/database.js';

/** Schema of channel history and its archive. */
export const HISTORY_MIGRATIONS: readonly Migration[] = [];
