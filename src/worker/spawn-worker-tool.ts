import { withoutNul } from '../common/outside-text.js';
import type { ToolContext, ToolHandler, ToolOutcome } from '../llm/tool.js';
import type { WorkerManager } from './worker-manager.js';

/** Longest task statement a worker takes; a longer one is a tool error, not a silent cut. */
export const MAX_TASK_LENGTH = 4000;

const SPAWN_WORKER_DEFINITION = {
  name: 'spawn_worker',
  description:
    'Start a background worker on a longer task (for example: go through this channel\'s history and list every ' +
    'decision about X). It can read the channel\'s archived messages and search and save memories. Returns at once ' +
    'with { worker_id, status: "started" }; the worker posts its report in the channel when it is done. Tell the ' +
    'user it has started.',
  input_schema: {
    type: 'object',
    properties: {
      task: { type: 'string', description: 'What the worker should do, self-contained: it does not see this conversation.', maxLength: MAX_TASK_LENGTH },
    },
    required: ['task'],
    additionalProperties: false,
  },
};

/** The channel agent's `spawn_worker` tool. Limits and bad input are tool errors the model can read. */
export function createSpawnWorkerTool(workers: Pick<WorkerManager, 'spawn'>): ToolHandler {
  return {
    definition: SPAWN_WORKER_DEFINITION,
    async run(input: unknown, context: ToolContext): Promise<ToolOutcome> {
      if (typeof input !== 'object' || input === null || Array.isArray(input)) {
        return { isError: true, content: 'invalid input: spawn_worker takes a JSON object { "task": string }' };
      }
      const unknownFields = Object.keys(input).filter((key) => key !== 'task');
      if (unknownFields.length > 0) {
        return { isError: true, content: `invalid input: unknown field ${unknownFields.join(', ')}; spawn_worker takes only task` };
      }
      const task = (input as { task?: unknown }).task;
      if (typeof task !== 'string') return { isError: true, content: 'invalid input: task must be a string' };
      // Stored with the worker's row: U+0000 replaced as in every text that reaches the store.
      const trimmed = withoutNul(task).trim();
      if (trimmed === '') return { isError: true, content: 'invalid input: task is empty' };
      if (trimmed.length > MAX_TASK_LENGTH) {
        return { isError: true, content: `invalid input: task is ${trimmed.length} characters; at most ${MAX_TASK_LENGTH}` };
      }
      const started = await workers.spawn({ task: trimmed, context });
      if ('refused' in started) return { isError: true, content: `worker not started: ${started.refused}` };
      return { isError: false, content: JSON.stringify({ worker_id: started.workerId, status: 'started' }) };
    },
  };
}
