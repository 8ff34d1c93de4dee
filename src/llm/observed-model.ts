import type { ChatModel, ModelCallOptions, ModelRequest, ModelResponse } from './chat-model.js';

/**
 * What a model call was for. `channel`: the channel agent's turns; `compaction`: summaries;
 * `branch` and `worker`: the agents the channel spawns. Cost and latency are reported per
 * purpose, so an operator sees what compaction costs next to what answering costs.
 */
export type ModelPurpose = 'channel' | 'compaction' | 'branch' | 'worker';

export const MODEL_PURPOSES: readonly ModelPurpose[] = ['channel', 'compaction', 'branch', 'worker'];

/** One finished model call, as the observer sees it: numbers only, never content. */
export interface ModelCallRecord {
  purpose: ModelPurpose;
  model: string;
  outcome: 'ok' | 'error';
  /** 0 when the call failed (nothing was billed, or the server did not say). */
  inputTokens: number;
  outputTokens: number;
  durationMs: number;
}

export interface ModelCallObserver {
  modelCalled(call: ModelCallRecord): void;
}

/**
 * Wraps a model so that every call is reported with its purpose. Wrap the same (shared,
 * concurrency-limited) model once per purpose: `observeModel(model, 'branch', observer)`.
 * An observer that throws never fails the call.
 */
export function observeModel(model: ChatModel, purpose: ModelPurpose, observer: ModelCallObserver): ChatModel {
  const report = (call: Omit<ModelCallRecord, 'purpose' | 'model'>): void => {
    try {
      observer.modelCalled({ purpose, model: model.model, ...call });
    } catch {
      // Instrumentation must never break the call it observes.
    }
  };
  return {
    model: model.model,
    async createMessage(request: ModelRequest, options?: ModelCallOptions): Promise<ModelResponse> {
      const startedAt = performance.now();
      try {
        const response = await model.createMessage(request, options);
        report({
          outcome: 'ok',
          inputTokens: response.usage.inputTokens,
          outputTokens: response.usage.outputTokens,
          durationMs: performance.now() - startedAt,
        });
        return response;
      } catch (error) {
        report({ outcome: 'error', inputTokens: 0, outputTokens: 0, durationMs: performance.now() - startedAt });
        throw error;
      }
    },
  };
}
