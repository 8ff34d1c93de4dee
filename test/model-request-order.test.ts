/**
 * A reply is sent to the model right after the message it answers, even when people wrote
 * while it was being made: the request for those later messages ends with them, not with the
 * earlier reply (which the Messages API would read as the start of its own answer).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ModelMessage } from '../src/llm/chat-model.js';
import { openHarness, userMessage } from './compaction-support.js';

function texts(message: ModelMessage): string {
  return typeof message.content === 'string' ? message.content : message.content.map((block) => ('text' in block ? block.text : block.type)).join(' | ');
}

test('messages written during a turn come after its reply in the next request, which ends with them', async () => {
  const harness = await openHarness();
  try {
    const { runtime } = harness;
    const alice = await runtime.ingest({ ...userMessage('c1', 0, { author: 'Alice' }), content: 'Alice asks: capital of France?' });
    // While the answer to Alice is being made, Bob and Carol write.
    await runtime.ingest({ ...userMessage('c1', 1, { author: 'Bob' }), content: 'Bob asks: capital of Spain?' });
    await runtime.ingest({ ...userMessage('c1', 2, { author: 'Carol' }), content: 'Carol asks: capital of Italy?' });
    await runtime.appendToTurn(
      'c1',
      [
        { kind: 'tool_call', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: JSON.stringify({ type: 'tool_use', id: 't1', name: 'memory_search', input: { query: 'France' } }) },
        { kind: 'tool_result', role: 'user', authorId: 'bot', authorName: 'Magpie', content: JSON.stringify({ type: 'tool_result', tool_use_id: 't1', content: 'nothing found' }) },
        { kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: 'Paris.' },
      ],
      alice.turnId,
    );
    const { messages } = await runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 });
    assert.deepEqual(
      messages.map((message) => [message.role, texts(message)]),
      [
        ['user', 'Alice: Alice asks: capital of France?'],
        ['assistant', 'tool_use'],
        ['user', 'tool_result'],
        ['assistant', 'Paris.'],
        ['user', 'Bob: Bob asks: capital of Spain? | Carol: Carol asks: capital of Italy?'],
      ],
    );
  } finally {
    await harness.close();
  }
});
