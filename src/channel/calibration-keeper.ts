import type { Clock } from '../common/clock.js';
import type { EventStream } from '../common/events.js';
import type { SqlClient } from '../storage/sql-client.js';
import { CALIBRATION, observe, observeMessages, observeOverflow, observeTools, type Calibration } from '../context/calibration.js';
import { CalibrationStore } from './calibration-store.js';
import type { ChannelState } from '../context/channel-state.js';

/** What a request's estimate holds besides the channel's text (see `CalibrationKeeper.record`). */
export interface RequestParts {
  fixed?: { estimated: number; real: number };
  imageTokens?: number;
  toolTokens?: number;
}

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

  /**
   * A response counted `inputTokens` for a request estimated at `estimatedTokens`. `parts` says
   * what the estimate holds besides the channel's text: its fixed part (estimated and in real
   * tokens), the images' estimate, the tool calls' and results' estimate.
   */
  async record(state: ChannelState, estimatedTokens: number, inputTokens: number, parts?: RequestParts): Promise<void> {
    const fixed = parts?.fixed;
    // A request that is nearly all fixed part (a first question in a new channel) says nothing
    // about the channel's messages, and a factor learnt from it would be the prompt's.
    if (fixed && estimatedTokens - fixed.estimated < CALIBRATION.minEstimate) return;
    const current = state.calibration;
    const messagesEstimate = fixed ? estimatedTokens - fixed.estimated : 0;
    const messagesReal = fixed ? inputTokens - fixed.real : 0;
    const tools = Math.min(Math.max(0, parts?.toolTokens ?? 0), messagesEstimate);
    // The tools at their correction, so that the images' test compares text with text.
    const weighted = messagesEstimate - tools + (current.toolFactor ?? 1) * tools;
    if (fixed && imagesChargedOtherwise(current, weighted, messagesReal, parts?.imageTokens ?? 0)) return;
    const next = observe(current, estimatedTokens, inputTokens);
    if (!next) return;
    if (fixed) {
      // A request made largely of tool traffic teaches the tools' correction, the text taken at
      // the messages' factor; any other teaches the messages' factor, the tools at theirs.
      const toolFactor = current.messageFactor === undefined
        ? undefined
        : observeTools(current, { estimated: tools, messagesEstimated: messagesEstimate, residual: messagesReal - current.messageFactor * (messagesEstimate - tools) });
      if (toolFactor !== undefined) next.toolFactor = toolFactor;
      else {
        const messageFactor = observeMessages(current, estimatedTokens, inputTokens, fixed, tools);
        if (messageFactor !== undefined) next.messageFactor = messageFactor;
      }
    }
    await this.set(state, next, { estimated_tokens: estimatedTokens, input_tokens: inputTokens, ...(tools > 0 ? { tool_tokens: tools } : {}) });
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
    const before = state.calibration;
    // Learnt at once, saved or not: the saved copy only spares relearning after a restart.
    state.calibration = next;
    try {
      await this.store.save(state.channelId, next, this.options.clock.now());
    } catch {
      // Only the saving is lost: the factor is learnt again from the next responses after a restart.
    }
    const moved = movedFrom(before.factor, next.factor) || movedFrom(before.messageFactor, next.messageFactor) || movedFrom(before.toolFactor, next.toolFactor);
    if (!moved && next.observations !== 1 && fields['reason'] === undefined) return;
    this.options.events.emit({
      type: 'calibration_updated',
      channel_id: state.channelId,
      factor_before: before.factor,
      factor: next.factor,
      observations: next.observations,
      ...(next.messageFactor !== undefined ? { message_factor: next.messageFactor } : {}),
      ...(next.toolFactor !== undefined ? { tool_factor: next.toolFactor } : {}),
      ...fields,
    });
  }
}

/** A factor worth an event: learnt now, or moved by half a percent or more. */
function movedFrom(previous: number | undefined, next: number | undefined): boolean {
  if (next === undefined) return false;
  if (previous === undefined) return true;
  return Math.abs(next - previous) >= 0.005 * previous;
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
