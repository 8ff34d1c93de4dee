import { billedInputTokens } from './usage.js';
import type { ChatModel, ModelCallOptions, ModelPurpose, ModelRequest, ModelResponse } from './chat-model.js';

/**
 * What a model call was for (`ModelPurpose`): `channel`, the channel agent's turns;
 * `compaction`, summaries; `branch` and `worker`, the agents the channel spawns. Cost and
 * latency are reported per purpose, so an operator sees what compaction costs next to what
 * answering costs.
 */
export type { ModelPurpose };

/** One finished model call, as the observer sees it: numbers only, never content. */
export interface ModelCallRecord {
  purpose: ModelPurpose;
  model: string;
  outcome: 'ok' | 'error';
  /** Uncached input (the API's `input_tokens`); 0 when the call failed (nothing was billed, or the server did not say). */
  inputTokens: number;
  outputTokens: number;
  /** Input written to the prompt cache. */
  cacheWriteTokens: number;
  /** Input read from the prompt cache. */
  cacheReadTokens: number;
  /** Input in plain-token equivalents as billed (cache reads 0.1×, writes 1.25× or 2×). */
  billedInputTokens: number;
  durationMs: number;
}

export interface ModelCallObserver {
  modelCalled(call: ModelCallRecord): void;
}

/**
 * Wraps a model so that every call is reported with its purpose: the call's own
 * (`options.purpose`, which the agent turn, summarizer, branches and workers set), else
 * `purpose`. An observer that throws never fails the call.
 */
export function observeModel(model: ChatModel, purpose: ModelPurpose, observer: ModelCallObserver): ChatModel {
  const report = (callPurpose: ModelPurpose, call: Omit<ModelCallRecord, 'purpose' | 'model'>): void => {
    try {
      observer.modelCalled({ purpose: callPurpose, model: model.model, ...call });
    } catch {
      // Instrumentation must never break the call it observes.
    }
  };
  return {
    model: model.model,
    async createMessage(request: ModelRequest, options?: ModelCallOptions): Promise<ModelResponse> {
      const startedAt = performance.now();
      const callPurpose = options?.purpose ?? purpose;
      try {
        const response = await model.createMessage(request, options);
        report(callPurpose, {
          outcome: 'ok',
          inputTokens: response.usage.inputTokens,
          outputTokens: response.usage.outputTokens,
          cacheWriteTokens: response.usage.cacheWriteTokens ?? 0,
          cacheReadTokens: response.usage.cacheReadTokens ?? 0,
          billedInputTokens: billedInputTokens(response.usage),
          durationMs: performance.now() - startedAt,
        });
        return response;
      } catch (error) {
        report(callPurpose, {
          outcome: 'error',
          inputTokens: 0,
          outputTokens: 0,
          cacheWriteTokens: 0,
          cacheReadTokens: 0,
          billedInputTokens: 0,
          durationMs: performance.now() - startedAt,
        });
        throw error;
      }
    },
  };
}
