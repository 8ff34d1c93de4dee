import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import type { ToolContext } from '../src/llm/tool.js';
import { createMemoryTools, MEMORY_TYPES, openMemoryStore, type SqlMemoryStore } from '../src/memory/index.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { openTestDatabase } from './support/storage.js';

describe('memory tools', () => {
  let dir: string;
  let db: SqlClient;
  let store: SqlMemoryStore;
  let tools: ReturnType<typeof createMemoryTools>;
  const context: ToolContext = { channelId: 'tools-channel', guildId: 'g', sourceMessageIds: ['m-7', 'm-8'] };

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
    db = await openTestDatabase(dir);
    store = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory });
    tools = createMemoryTools(store);
  });
  after(async () => {
    await store.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('definitions match the documented contract', () => {
    const save = tools.memorySave.definition;
    assert.equal(save.name, 'memory_save');
    const saveProperties = save.input_schema.properties as Record<string, { enum?: string[]; type: string }>;
    assert.deepEqual(Object.keys(saveProperties).sort(), ['content', 'importance', 'memory_type', 'source_ids']);
    assert.deepEqual(saveProperties.memory_type!.enum, [...MEMORY_TYPES]);
    assert.deepEqual(save.input_schema.required, ['content', 'memory_type']);
    const search = tools.memorySearch.definition;
    assert.equal(search.name, 'memory_search');
    const searchProperties = search.input_schema.properties as Record<string, { maximum?: number; type: string }>;
    assert.deepEqual(Object.keys(searchProperties).sort(), ['limit', 'memory_type', 'query']);
    assert.equal(searchProperties.limit!.maximum, 20);
    assert.deepEqual(search.input_schema.required, ['query']);
  });

  test('memory_save answers { id, status } and takes source ids from the context', async () => {
    const outcome = await tools.memorySave.run({ content: 'Gus runs the Friday demo', memory_type: 'fact', importance: 0.75 }, context);
    assert.equal(outcome.isError, false);
    const parsed = JSON.parse(outcome.content) as { id: string; status: string };
    assert.deepEqual(Object.keys(parsed).sort(), ['id', 'status']);
    assert.equal(parsed.status, 'saved');
    const again = JSON.parse((await tools.memorySave.run({ content: 'Gus runs the Friday demo', memory_type: 'fact' }, context)).content);
    assert.deepEqual(again, { id: parsed.id, status: 'updated' });
    const record = (await store.list({ location: context, kind: 'memory' })).find((item) => item.id === parsed.id)!;
    assert.deepEqual(record.sourceIds, ['m-7', 'm-8']);
    assert.equal(record.importance, 0.75);
  });

  test('memory_search answers the documented result shape', async () => {
    const outcome = await tools.memorySearch.run({ query: 'who runs the demo on Friday?', limit: 3 }, context);
    assert.equal(outcome.isError, false);
    const results = JSON.parse(outcome.content) as Array<Record<string, unknown>>;
    assert.ok(results.length >= 1 && results.length <= 3);
    const first = results[0]!;
    assert.deepEqual(Object.keys(first).sort(), ['content', 'created_at', 'kind', 'memory_type', 'score', 'source_ids']);
    assert.equal(first.content, 'Gus runs the Friday demo');
    assert.equal(first.kind, 'memory');
    assert.equal(first.memory_type, 'fact');
    assert.ok(typeof first.score === 'number' && first.score > 0 && first.score <= 1);
    assert.ok(!Number.isNaN(Date.parse(first.created_at as string)));
    const typed = JSON.parse((await tools.memorySearch.run({ query: 'demo', memory_type: 'todo' }, context)).content);
    assert.deepEqual(typed, []);
  });

  const badSaves: Array<[string, unknown, RegExp]> = [
    ['non-object input', 'save this', /input must be a JSON object/],
    ['null input', null, /input must be a JSON object/],
    ['array input', [1, 2], /input must be a JSON object/],
    ['missing content', { memory_type: 'fact' }, /content must be a string/],
    ['empty content', { content: '   ', memory_type: 'fact' }, /content must not be empty/],
    ['content not a string', { content: 42, memory_type: 'fact' }, /content must be a string/],
    ['content too long', { content: 'a'.repeat(4001), memory_type: 'fact' }, /content is 4001 characters long/],
    ['missing memory_type', { content: 'x' }, /memory_type must be one of/],
    ['unknown memory_type', { content: 'x', memory_type: 'rumour' }, /memory_type must be one of .*"rumour"/],
    ['importance above 1', { content: 'x', memory_type: 'fact', importance: 1.2 }, /importance must be a number from 0 to 1/],
    ['importance below 0', { content: 'x', memory_type: 'fact', importance: -0.1 }, /importance must be a number from 0 to 1/],
    ['importance not a number', { content: 'x', memory_type: 'fact', importance: 'high' }, /importance must be a number/],
    ['unknown field', { content: 'x', memory_type: 'fact', tags: ['a'] }, /unknown field tags/],
  ];
  for (const [name, input, expected] of badSaves) {
    test(`memory_save refuses ${name} with a readable tool error`, async () => {
      const outcome = await tools.memorySave.run(input, context);
      assert.equal(outcome.isError, true);
      assert.match(outcome.content, expected);
    });
  }

  const badSearches: Array<[string, unknown, RegExp]> = [
    ['non-object input', 42, /input must be a JSON object/],
    ['missing query', {}, /query must be a string/],
    ['empty query', { query: ' ' }, /query must not be empty/],
    ['query not a string', { query: ['a'] }, /query must be a string/],
    ['limit over 20', { query: 'x', limit: 21 }, /limit must be an integer from 1 to 20/],
    ['limit zero', { query: 'x', limit: 0 }, /limit must be an integer from 1 to 20/],
    ['fractional limit', { query: 'x', limit: 2.5 }, /limit must be an integer/],
    ['limit as text', { query: 'x', limit: '5' }, /limit must be an integer/],
    ['unknown memory_type', { query: 'x', memory_type: 'gossip' }, /memory_type must be one of/],
  ];
  for (const [name, input, expected] of badSearches) {
    test(`memory_search refuses ${name} with a readable tool error`, async () => {
      const outcome = await tools.memorySearch.run(input, context);
      assert.equal(outcome.isError, true);
      assert.match(outcome.content, expected);
    });
  }

  test('a missing channel in the context is a tool error, not an exception', async () => {
    const outcome = await tools.memorySearch.run({ query: 'x' }, { channelId: '' });
    assert.equal(outcome.isError, true);
    assert.match(outcome.content, /without a channel/);
  });
});
