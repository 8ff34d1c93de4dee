import type { ChannelState } from '../context/channel-state.js';
import { CALIBRATION, messageFactorOf, usableWindow } from '../context/calibration.js';
import { SUMMARY_FIXED_TOKENS } from './summary-prompt.js';
import type { ChannelSettings } from '../config/types.js';

/** The emergency threshold in uncalibrated tokens: what a truncation must get below. */
export function emergencyCeiling(settings: ChannelSettings, factor: number): number {
  return (settings.compaction.emergencyThreshold * usableWindow(settings)) / factor;
}

/** The roll-up threshold in uncalibrated tokens (summaries are estimated like messages). */
export function rollupTokens(state: ChannelState, settings: ChannelSettings): number {
  return (settings.compaction.rollupThreshold * usableWindow(settings)) / state.calibration.factor;
}

/**
 * The most a compaction's range may weigh (uncalibrated) for its summary request to fit the
 * model's window beside the request's own part and `summary_min_tokens` of summary.
 */
export function summaryInputTokens(state: ChannelState, settings: ChannelSettings): number {
  const margin = 1 + CALIBRATION.margin;
  const room = settings.contextWindow - settings.compaction.summaryMinTokens - SUMMARY_FIXED_TOKENS;
  return Math.max(0, room / (transcriptFactor(state) * margin));
}

/**
 * What a summary request's transcript is corrected by: the channel's messages factor, never
 * below 1. Its lines (time, speaker, message id) are framed unlike the chat messages the factor
 * was learnt on, and text that the channel's framing made look cheaper must not make the
 * request overflow.
 */
export function transcriptFactor(state: ChannelState): number {
  return Math.max(1, messageFactorOf(state.calibration));
}

/** What the events say about the window and the calibration behind a usage figure. */
export function calibrationFields(state: ChannelState, settings: ChannelSettings, tokens: number) {
  return {
    context_window: settings.contextWindow,
    usable_window: usableWindow(settings),
    calibration_factor: state.calibration.factor,
    calibrated_tokens: Math.round(tokens * state.calibration.factor),
  };
}

/** A usage figure as the events carry it (four decimals). */
export function roundUsage(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
