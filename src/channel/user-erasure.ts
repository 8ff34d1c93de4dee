import type { MagpieEvent } from '../common/events.js';
import type { UserErasure } from './runtime-types.js';

/** The counts of a user erasure, in the order every output lists them. */
export const USER_ERASURE_COUNTS = ['channels', 'messages', 'memoriesDeleted', 'memoriesUpdated', 'summariesChanged', 'toolEntriesRedacted'] as const satisfies readonly (keyof UserErasure)[];

/**
 * The `user_erased` audit line: counts only, neither the user nor anything they wrote. One
 * builder, so the bot's log and the line `magpie memory forget --user` prints on stderr (also
 * when the running bot applied it) carry the same fields.
 */
export function userErasedEvent(erasure: UserErasure, requestedFrom: string): MagpieEvent {
  return {
    type: 'user_erased',
    requested_from: requestedFrom,
    channels: erasure.channels,
    messages: erasure.messages,
    memories_deleted: erasure.memoriesDeleted,
    memories_updated: erasure.memoriesUpdated,
    summaries_changed: erasure.summariesChanged,
    tool_entries_redacted: erasure.toolEntriesRedacted,
  };
}
