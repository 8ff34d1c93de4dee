import type { ChannelState } from '../context/channel-state.js';
import type { SummaryWrites } from '../context/history-store.js';
import type { SummaryEntry } from '../context/types.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';

/**
 * Emergency truncation must succeed even when its database write does not (a full disk, a
 * locked file, a dropped PostgreSQL connection): the marker takes effect in memory at once and
 * its row is written later. Until then, a restart simply finds the truncated entries live again,
 * which loses nothing.
 */

let provisional = 0;

/** A negative id for a marker whose row does not exist yet (real ids are positive). */
export function provisionalMarkerId(): number {
  provisional += 1;
  return -provisional;
}

export interface MarkerWriteContext {
  store: SummaryWrites;
  events: EventStream;
}

/**
 * Writes every marker of the channel still owed to the database, oldest first (each write moves
 * the live start to the end of its marker, so the order matters), in the channel's exclusive
 * section. True when none is left owed. Never rejects: a failure is reported and left for the
 * next call.
 */
export function saveUnsavedMarkers(context: MarkerWriteContext, state: ChannelState): Promise<boolean> {
  if (state.unsavedMarkers.size === 0) return Promise.resolve(true);
  return state.exclusive(() => saveUnsavedMarkersHeld(context, state));
}

/** `saveUnsavedMarkers` for a caller already inside the channel's exclusive section. */
export async function saveUnsavedMarkersHeld(context: MarkerWriteContext, state: ChannelState): Promise<boolean> {
  if (state.unsavedMarkers.size === 0) return true;
  for (const summary of [...state.summaries]) {
    if (!state.unsavedMarkers.has(summary.id)) continue;
    try {
      await writeMarker(context.store, state, summary);
    } catch (error) {
      context.events.emit({
        type: 'truncation_write_failed',
        channel_id: state.channelId,
        unsaved_markers: state.unsavedMarkers.size,
        error: errorMessage(error),
      });
      return false;
    }
    state.unsavedMarkers.delete(summary.id);
    context.events.emit({ type: 'truncation_write_saved', channel_id: state.channelId, to_seq: summary.toSeq });
  }
  // A marker that left the context meanwhile (retired, deleted) has nothing left to write.
  state.unsavedMarkers.clear();
  return true;
}

async function writeMarker(store: SummaryWrites, state: ChannelState, marker: SummaryEntry): Promise<void> {
  if (marker.id > 0) {
    await store.extendMarker(state.channelId, { id: marker.id, toSeq: marker.toSeq, content: marker.content, tokens: marker.tokens });
    return;
  }
  const { id: _provisional, ...row } = marker;
  const id = await store.truncate(state.channelId, { toSeq: marker.toSeq }, row);
  state.renameSummary(marker.id, { ...marker, id });
}
