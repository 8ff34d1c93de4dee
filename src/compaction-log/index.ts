/** The compaction log: compaction events and usage samples kept in SQLite for status and reports. */
export { CompactionLog, LOGGED_EVENTS, settingsRecord, type CompactionLogOptions, type CountedTokens, type ObservedChannel } from './compaction-log.js';
export { hasCompactionLog, readCompactionLog, type ChannelLog, type LoggedEvent, type LoggedSettings, type UsagePoint } from './read-log.js';
export { addEvent, emptyTally, sumTallies, tallyLog, type CompactionTally } from './tally.js';
export { COMPACTION_LOG_MIGRATIONS } from './schema.js';
export { readModelUsage, type UsageRecord } from './read-costs.js';
export { MODEL_USAGE_KIND } from './log-row.js';
