import type { Clock } from '../common/clock.js';
import type { EventStream } from '../common/events.js';
import type { SqlClient } from '../storage/sql-client.js';
import { CALIBRATION, observe, observeMessages, observeOverflow, type Calibration } from '../context/calibration.js';
import { CalibrationStore } from './calibration-store.js';
import type { ChannelState } from '../context/channel-state.js';

/**
 * Applies model counts to a channel's calibration: learns, saves with the channel, and reports
 * a `calibration_updated` event when the factor moves (not once per call that confirms it).
 */
export class CalibrationKeeper {
  private readonly store: CalibrationStore;

  constructor(private readonly options: { db: SqlClient; events: EventStream; clock: Clock }) {
    this.store = new CalibrationStore(options.db);
  }

  load(channelId: string): Promise<Calibration> {
    return this.store.load(channelId);
  }

  /** A response counted `inputTokens` for a request estimated at `estimatedTokens`. */
  async record(
    state: ChannelState,
    estimatedTokens: number,
    inputTokens: number,
    fixed?: { estimated: number; real: number },
    imageTokens = 0,
  ): Promise<void> {
    // A request that is nearly all fixed part (a first question in a new channel) says nothing
    // about the channel's messages, and a factor learnt from it would be the prompt's.
    if (fixed && estimatedTokens - fixed.estimated < CALIBRATION.minEstimate) return;
    if (fixed && imagesChargedOtherwise(state.calibration, estimatedTokens - fixed.estimated, inputTokens - fixed.real, imageTokens)) return;
    const next = observe(state.calibration, estimatedTokens, inputTokens);
    if (!next) return;
    const messageFactor = fixed ? observeMessages(state.calibration, estimatedTokens, inputTokens, fixed) : undefined;
    if (messageFactor !== undefined) next.messageFactor = messageFactor;
    await this.set(state, next, { estimated_tokens: estimatedTokens, input_tokens: inputTokens });
  }

  /** The server refused a request of that estimate as `tokens` long (when it said). */
  async overflow(state: ChannelState, estimatedTokens: number, tokens: number | undefined): Promise<Calibration> {
    const next = observeOverflow(state.calibration, estimatedTokens, tokens);
    await this.set(state, next, {
      estimated_tokens: estimatedTokens,
      ...(tokens !== undefined ? { input_tokens: tokens } : {}),
      reason: 'context_overflow',
    });
    return next;
  }

  private async set(state: ChannelState, next: Calibration, fields: Record<string, unknown>): Promise<void> {
    const previous = state.calibration.factor;
    // Learnt at once, saved or not: the saved copy only spares relearning after a restart.
    state.calibration = next;
    try {
      await this.store.save(state.channelId, next, this.options.clock.now());
    } catch {
      // Only the saving is lost: the factor is learnt again from the next responses after a restart.
    }
    const moved = Math.abs(next.factor - previous) >= 0.005 * previous;
    if (!moved && next.observations !== 1 && fields['reason'] === undefined) return;
    this.options.events.emit({
      type: 'calibration_updated',
      channel_id: state.channelId,
      factor_before: previous,
      factor: next.factor,
      observations: next.observations,
      ...fields,
    });
  }
}

/**
 * Whether a request's images cost the server something else than their estimate (the API's
 * pixel rule) says: its text, with the images taken at their estimate, would be a whole bounded
 * step away from the messages' learnt factor. Such a request teaches neither factor: otherwise
 * how one model charges pictures would move the correction of every text message after it. A
 * refusal still teaches (`overflow`), so an image channel stays safe.
 */
function imagesChargedOtherwise(calibration: Calibration, messagesEstimate: number, messagesReal: number, imageTokens: number): boolean {
  const known = calibration.messageFactor;
  const text = messagesEstimate - imageTokens;
  if (imageTokens <= 0 || known === undefined || text < CALIBRATION.minEstimate) return false;
  const ratio = (messagesReal - imageTokens) / text;
  return ratio > known * CALIBRATION.maxStep || ratio < known / CALIBRATION.maxStep;
}
