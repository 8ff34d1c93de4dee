import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compactFork, forkRequest, forkTokens, type Fork } from '../src/branch/index.js';
import type { HistoryEntry } from '../src/context/types.js';
import type { ModelMessage } from '../src/llm/chat-model.js';
import { estimateConversation, trimWorkerHistory } from '../src/worker/index.js';
import { toolPairingProblems } from './branch-worker-support.js';

/** A worker conversation: the task, then turns of (model calls tools, results answer them). */
function conversation(turns: Array<{ calls: number; size: number; text: boolean }>, endsWithAnswer: boolean): ModelMessage[] {
  const messages: ModelMessage[] = [{ role: 'user', content: [{ type: 'text', text: 'Your task:\nDo the thing.' }] }];
  turns.forEach((turn, index) => {
    const ids = Array.from({ length: turn.calls }, (_, call) => `toolu_${index}_${call}`);
    messages.push({
      role: 'assistant',
      content: [...(turn.text ? [{ type: 'text' as const, text: `thinking ${index}` }] : []), ...ids.map((id) => ({ type: 'tool_use' as const, id, name: 'memory_search', input: { query: 'x' } }))],
    });
    messages.push({ role: 'user', content: ids.map((id) => ({ type: 'tool_result' as const, tool_use_id: id, content: 'r'.repeat(turn.size) })) });
  });
  if (endsWithAnswer) messages.push({ role: 'assistant', content: [{ type: 'text', text: 'done' }] });
  return messages;
}

test('trimWorkerHistory keeps the task first, pairs whole, roles alternating, and the newest turns', () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ calls: fc.integer({ min: 1, max: 3 }), size: fc.integer({ min: 0, max: 400 }), text: fc.boolean() }), { maxLength: 40 }),
      fc.boolean(),
      fc.integer({ min: 0, max: 3000 }),
      fc.integer({ min: 1, max: 6 }),
      (turns, endsWithAnswer, targetTokens, keepTurns) => {
        const messages = conversation(turns, endsWithAnswer);
        const trimmed = trimWorkerHistory(messages, { targetTokens, fixedTokens: 100, keepTurns, totalDroppedCalls: 0 });
        const first = trimmed.messages[0]!;
        assert.equal(first.role, 'user');
        assert.deepEqual((first.content as Array<{ text: string }>)[0], { type: 'text', text: 'Your task:\nDo the thing.' });
        assert.deepEqual(toolPairingProblems(trimmed.messages as Array<{ role: string; content: unknown }>), []);
        trimmed.messages.forEach((message, index) => assert.equal(message.role, index % 2 === 0 ? 'user' : 'assistant'));
        // The newest turns always survive, and nothing is dropped when it already fits.
        assert.deepEqual(trimmed.messages.at(-1), messages.at(-1));
        if (estimateConversation(messages, 100) <= targetTokens) assert.equal(trimmed.droppedTurns, 0);
        if (trimmed.droppedTurns > 0) assert.ok(trimmed.messages.length < messages.length);
      },
    ),
  );
});

function entry(seq: number, kind: HistoryEntry['kind'], tokens: number): HistoryEntry {
  const content = kind === 'tool_call'
    ? JSON.stringify({ type: 'tool_use', id: `t${seq}`, name: 'memory_search', input: {} })
    : kind === 'tool_result'
      ? JSON.stringify({ type: 'tool_result', tool_use_id: `t${seq - 1}`, content: 'ok' })
      : `message ${seq}`;
  return { seq, channelId: 'c', messageId: `m${seq}`, kind, role: kind === 'tool_result' || (kind === 'message' && seq % 2 === 0) ? 'user' : 'assistant', authorId: 'a', authorName: 'A', content, createdAt: seq, tokens, turnId: seq };
}

test('compactFork fits the target when it can, never strands a tool result, and keeps the newest entry', () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ call: fc.boolean(), tokens: fc.integer({ min: 1, max: 500 }) }), { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 0, max: 8000 }),
      (shape, target) => {
        const entries: HistoryEntry[] = [];
        for (const item of shape) {
          if (item.call) {
            entries.push(entry(entries.length, 'tool_call', item.tokens), entry(entries.length + 1, 'tool_result', 20));
          } else {
            entries.push(entry(entries.length, 'message', item.tokens));
          }
        }
        const fork: Fork = { summaries: [], entries, setAsideEntries: 0, setAsideSummaries: 0 };
        const compacted = compactFork(fork, 50, target);
        assert.equal(compacted.entries.at(-1), entries.at(-1));
        assert.equal(compacted.setAsideEntries + compacted.entries.length, entries.length);
        if (compacted.entries.length > 1) assert.notEqual(compacted.entries[0]!.kind, 'tool_result');
        // It stops early only when it fits (or when the newest entry alone is left).
        if (compacted.entries.length > 1) assert.ok(forkTokens(compacted, 50) <= target);
        const request = forkRequest(compacted, 'system', 'why?');
        assert.equal(request.messages.at(-1)!.role, 'user');
        request.messages.forEach((message, index) => index > 0 && assert.notEqual(message.role, request.messages[index - 1]!.role));
      },
    ),
  );
});
