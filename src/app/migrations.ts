import { ATTACHMENT_MIGRATIONS } from '../attachments/attachment-store.js';
import { CALIBRATION_MIGRATIONS } from '../channel/calibration-store.js';
import { HISTORY_MIGRATIONS } from '../channel/schema.js';
import { REPLY_MIGRATIONS } from '../channel/reply-context.js';
import { COMPACTION_LOG_MIGRATIONS } from '../compaction-log/schema.js';
import { MEMORY_MIGRATIONS } from '../memory/schema.js';
import { PERSONA_MIGRATIONS } from '../persona/persona-store.js';
import { PRIVACY_MIGRATIONS } from '../privacy/schema.js';
import { WORKER_MIGRATIONS } from '../worker/worker-store.js';
import type { Migration } from '../storage/database.js';

/**
 * Every schema step of the one database, in the order they apply. Each capability owns its
 * steps; the app, the one place that knows every capability, gathers them for storage.
 */
export const ALL_MIGRATIONS: readonly Migration[] = [
  ...HISTORY_MIGRATIONS,
  ...CALIBRATION_MIGRATIONS,
  ...MEMORY_MIGRATIONS,
  ...WORKER_MIGRATIONS,
  ...COMPACTION_LOG_MIGRATIONS,
  ...ATTACHMENT_MIGRATIONS,
  ...REPLY_MIGRATIONS,
  ...PERSONA_MIGRATIONS,
  ...PRIVACY_MIGRATIONS,
];
