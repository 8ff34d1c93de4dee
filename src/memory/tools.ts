import { errorMessage, InputError } from '../common/errors.js';
import type { ToolContext, ToolHandler, ToolOutcome } from '../llm/tool.js';
import { MEMORY_TYPES, type MemoryLocation, type MemoryStore } from './types.js';
import { resolveSources, MAX_SOURCE_IDS } from './provenance.js';
import {
  checkContent,
  checkImportance,
  checkLimit,
  checkMemoryType,
  checkQuery,
  MAX_MEMORY_LENGTH,
  MAX_SEARCH_LIMIT,
} from './validation.js';

const MEMORY_SAVE_DEFINITION = {
  name: 'memory_save',
  description:
    'Save one lasting fact, preference, decision, identity detail, event, observation, goal or todo so it can be ' +
    'recalled later, even after this conversation has been summarized. Write it as a self-contained sentence that ' +
    'names who it is about. Saving something already saved updates it instead of adding a copy.',
  input_schema: {
    type: 'object',
    properties: {
      content: { type: 'string', description: 'The memory, as one self-contained sentence.', maxLength: MAX_MEMORY_LENGTH },
      memory_type: { type: 'string', enum: [...MEMORY_TYPES], description: 'What kind of memory this is.' },
      importance: {
        type: 'number',
        minimum: 0,
        maximum: 1,
        description: 'How much it matters later, from 0 to 1; a default per type when omitted.',
      },
      source_ids: {
        type: 'array',
        items: { type: 'string' },
        maxItems: MAX_SOURCE_IDS,
        description:
          'The ids of the messages this memory is drawn from (only those), so that it can be forgotten when they are deleted.',
      },
    },
    required: ['content', 'memory_type'],
    additionalProperties: false,
  },
};

const MEMORY_SEARCH_DEFINITION = {
  name: 'memory_search',
  description:
    'Search long-term memory: saved memories and everything said earlier in this channel, including messages that ' +
    'were summarized away. Returns the best matches with a relevance score from 0 to 1. A past message comes ' +
    'with its message_id, author and created_at, and the messages just before and after it as neighbors.',
  input_schema: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'What to look for: names, topics, words likely to have been used.' },
      limit: { type: 'integer', minimum: 1, maximum: MAX_SEARCH_LIMIT, description: 'Most results to return (default 5).' },
      memory_type: { type: 'string', enum: [...MEMORY_TYPES], description: 'Only saved memories of this type.' },
    },
    required: ['query'],
    additionalProperties: false,
  },
};

/** The two tools' definitions, in the order the channel agent offers them (search, save). */
export const MEMORY_TOOL_DEFINITIONS = [MEMORY_SEARCH_DEFINITION, MEMORY_SAVE_DEFINITION] as const;

/**
 * The `memory_save` and `memory_search` tools, scoped by the caller's context (channel, guild,
 * DM user). Input is checked field by field; anything wrong comes back as a tool error naming
 * the field, never as an exception out of the turn.
 */
export function createMemoryTools(store: MemoryStore): { memorySave: ToolHandler; memorySearch: ToolHandler } {
  const memorySave: ToolHandler = {
    definition: MEMORY_SAVE_DEFINITION,
    async run(input, context) {
      return guarded(async () => {
        const fields = objectInput(input, ['content', 'memory_type', 'importance', 'source_ids']);
        const content = checkContent(fields.content);
        const memoryType = checkMemoryType(fields.memory_type);
        const importance = fields.importance === undefined ? undefined : checkImportance(fields.importance);
        const sourceIds = resolveSources(fields.source_ids, content, context);
        const result = await store.save({
          location: locationOf(context),
          content,
          memoryType,
          ...(importance === undefined ? {} : { importance }),
          sourceIds,
        });
        return JSON.stringify({ id: result.id, status: result.status });
      });
    },
  };
  const memorySearch: ToolHandler = {
    definition: MEMORY_SEARCH_DEFINITION,
    async run(input, context) {
      return guarded(async () => {
        const fields = objectInput(input, ['query', 'limit', 'memory_type']);
        const query = checkQuery(fields.query);
        const limit = fields.limit === undefined ? undefined : checkLimit(fields.limit);
        const memoryType = fields.memory_type === undefined ? undefined : checkMemoryType(fields.memory_type);
        const results = await store.search({
          location: locationOf(context),
          query,
          ...(limit === undefined ? {} : { limit }),
          ...(memoryType === undefined ? {} : { memoryType }),
        });
        // Only the channel's own messages may become sources (memories of other channels are theirs).
        for (const result of results) {
          if (result.kind !== 'transcript') continue;
          for (const id of result.source_ids) {
            context.seenSourceIds?.add(id);
            context.seenSources?.set(id, result.content);
          }
        }
        return JSON.stringify(
          results.map((result) => ({
            content: result.content,
            score: result.score,
            kind: result.kind,
            ...(result.memory_type ? { memory_type: result.memory_type } : {}),
            source_ids: result.source_ids,
            created_at: result.created_at,
            ...(result.kind === 'transcript'
              ? { message_id: result.message_id ?? '', author: result.author ?? '', neighbors: result.neighbors ?? [] }
              : {}),
          })),
        );
      });
    },
  };
  return { memorySave, memorySearch };
}

async function guarded(work: () => Promise<string>): Promise<ToolOutcome> {
  try {
    return { content: await work(), isError: false };
  } catch (error) {
    const prefix = error instanceof InputError ? 'invalid input: ' : 'memory error: ';
    return { content: `${prefix}${errorMessage(error)}`, isError: true };
  }
}

function objectInput(input: unknown, known: readonly string[]): Record<string, unknown> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InputError(`input must be a JSON object with the fields ${known.join(', ')}`);
  }
  const unknownFields = Object.keys(input).filter((key) => !known.includes(key));
  if (unknownFields.length > 0) {
    throw new InputError(`unknown field ${unknownFields.join(', ')}; expected only ${known.join(', ')}`);
  }
  return input as Record<string, unknown>;
}

function locationOf(context: ToolContext): MemoryLocation {
  if (!context || typeof context.channelId !== 'string' || context.channelId.length === 0) {
    throw new InputError('the tool was called without a channel');
  }
  return {
    channelId: context.channelId,
    ...(context.guildId ? { guildId: context.guildId } : {}),
    ...(context.dmUserId ? { dmUserId: context.dmUserId } : {}),
  };
}
