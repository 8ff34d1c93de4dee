import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakePromptCache, minimumCacheableTokens } from './fakes/fake-prompt-cache.js';

/** A block of `tokens` tokens (the test counts a text block's length as its tokens). */
function text(letter: string, tokens: number, ttl?: '5m' | '1h'): Record<string, unknown> {
  return { type: 'text', text: letter.repeat(tokens), ...(ttl ? { cache_control: { type: 'ephemeral', ...(ttl === '1h' ? { ttl } : {}) } } : {}) };
}

function cache(clock = { now: 0 }): FakePromptCache {
  return new FakePromptCache({ now: () => clock.now, blockTokens: (block) => String((block as { text?: string }).text ?? '').length });
}

const MODEL = 'claude-sonnet-4-5';
const MINUTE = 60_000;

function usage(read: number, write: number, uncached: number, write1h = 0): object {
  return {
    input_tokens: uncached,
    cache_creation_input_tokens: write,
    cache_read_input_tokens: read,
    cache_creation: { ephemeral_5m_input_tokens: write - write1h, ephemeral_1h_input_tokens: write1h },
  };
}

describe('the fake prompt cache', () => {
  it('writes every breakpoint of a first request, then reads the same request whole', () => {
    const fake = cache();
    const body = { model: MODEL, system: [text('s', 1200, '5m')], messages: [{ role: 'user', content: [text('u', 300, '5m'), text('v', 40)] }] };
    // 1,200 up to the system breakpoint, 300 more up to the message's: written; 40 after it: plain input.
    assert.deepEqual(fake.account(body), usage(0, 1500, 40));
    assert.deepEqual(fake.account(body), usage(1500, 0, 40));
    assert.deepEqual(fake.totals, { requests: 2, uncached: 80, cacheWrite5m: 1500, cacheWrite1h: 0, cacheRead: 1500 });
  });

  it('finds the previous turn within 20 blocks before a breakpoint, and writes only what is new', () => {
    const fake = cache();
    fake.account({ model: MODEL, system: [text('s', 1200, '5m')], messages: [{ role: 'user', content: [text('u', 300, '5m')] }] });
    const next = {
      model: MODEL,
      system: [text('s', 1200, '5m')],
      messages: [
        { role: 'user', content: [text('u', 300)] },
        { role: 'assistant', content: [text('a', 100)] },
        { role: 'user', content: [text('w', 50, '5m')] },
      ],
    };
    // The breakpoint at the end looks back two blocks and finds the 1,500-token prefix.
    assert.deepEqual(fake.account(next), usage(1500, 150, 0));
  });

  it('misses a cached prefix more than 20 blocks back, unless a breakpoint sits near it', () => {
    const first = { model: MODEL, system: [text('s', 2000, '5m')], messages: [{ role: 'user', content: [...'abcd'.split('').map((l) => text(l, 10)), text('e', 10, '5m')] }] };
    const later = (extraBreakpoint: boolean) => ({
      model: MODEL,
      system: [text('s', 2000, '5m')],
      messages: [
        {
          role: 'user',
          content: [
            ...'abcd'.split('').map((l) => text(l, 10)),
            text('e', 10, extraBreakpoint ? '5m' : undefined),
            ...Array.from({ length: 24 }, (_, i) => text(String.fromCharCode(0x100 + i), 10)),
            text('z', 10, '5m'),
          ],
        },
      ],
    });
    const far = cache();
    far.account(first);
    // Block 30 looks back to block 10 only: the 2,050-token prefix at block 5 is out of reach;
    // the system breakpoint still reads its own 2,000.
    assert.deepEqual(far.account(later(false)), usage(2000, 300, 0));
    const near = cache();
    near.account(first);
    assert.deepEqual(near.account(later(true)), usage(2050, 250, 0));
  });

  it('caches nothing below the model minimum, and knows the minimum of each model', () => {
    const fake = cache();
    const body = { model: MODEL, system: [text('s', 500, '5m')], messages: [{ role: 'user', content: [text('u', 300, '5m')] }] };
    assert.deepEqual(fake.account(body), usage(0, 0, 800));
    assert.deepEqual(fake.account(body), usage(0, 0, 800));
    const sonnet46 = { ...body, model: 'claude-sonnet-4-6', system: [text('s', 1500, '5m')] };
    assert.deepEqual(fake.account(sonnet46), usage(0, 0, 1800), '2,048 for Sonnet 4.6');
    assert.equal(minimumCacheableTokens('claude-sonnet-4-5-20250929'), 1024);
    assert.equal(minimumCacheableTokens('claude-sonnet-4-6'), 2048);
    assert.equal(minimumCacheableTokens('claude-opus-4-5'), 4096);
    assert.equal(minimumCacheableTokens('claude-opus-4-6'), 4096);
    assert.equal(minimumCacheableTokens('claude-haiku-4-5'), 4096);
  });

  it('lets an entry expire after its lifetime, counted from its last read', () => {
    const clock = { now: 0 };
    const fake = cache(clock);
    const body = { model: MODEL, system: [text('s', 1100, '5m')], messages: [{ role: 'user', content: [text('u', 10)] }] };
    assert.deepEqual(fake.account(body), usage(0, 1100, 10));
    clock.now = 4 * MINUTE;
    assert.deepEqual(fake.account(body), usage(1100, 0, 10));
    clock.now = 8 * MINUTE; // 4 minutes after the read that refreshed it
    assert.deepEqual(fake.account(body), usage(1100, 0, 10));
    clock.now = 13 * MINUTE + 1;
    assert.deepEqual(fake.account(body), usage(0, 1100, 10), 'cold after 5 idle minutes: written again');
  });

  it('bills a one-hour breakpoint as a one-hour write and keeps it for the hour', () => {
    const clock = { now: 0 };
    const fake = cache(clock);
    const body = { model: MODEL, system: [text('s', 1100, '1h')], messages: [{ role: 'user', content: [text('u', 10)] }] };
    assert.deepEqual(fake.account(body), usage(0, 1100, 10, 1100));
    clock.now = 59 * MINUTE;
    assert.deepEqual(fake.account(body), usage(1100, 0, 10));
    clock.now = 120 * MINUTE;
    assert.deepEqual(fake.account(body), usage(0, 1100, 10, 1100));
  });

  it('misses on one changed byte before a breakpoint: a timestamp, a reordered tool, another persona', () => {
    const tools = [
      { name: 'memory_search', description: 'x'.repeat(3000), input_schema: {} },
      { name: 'memory_save', description: 'y'.repeat(3000), input_schema: {}, cache_control: { type: 'ephemeral' } },
    ];
    const tokens = (block: unknown): number => Math.ceil(JSON.stringify(block).length / 4);
    const counted = new FakePromptCache({ now: () => 0, blockTokens: tokens });
    const body = (system: string, toolList: unknown[]) => ({ model: MODEL, tools: toolList, system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }], messages: [{ role: 'user', content: 'hi' }] });
    const first = counted.account(body('You are Magpie. It is 12:01.', tools));
    assert.equal(first.cache_read_input_tokens, 0);
    const again = counted.account(body('You are Magpie. It is 12:01.', tools));
    assert.equal(again.cache_creation_input_tokens, 0, 'the same bytes: all read');
    const timestamp = counted.account(body('You are Magpie. It is 12:02.', tools));
    assert.ok(timestamp.cache_creation_input_tokens > 0 && timestamp.cache_read_input_tokens > 0, 'tools still read, the system written again');
    const persona = counted.account(body('You are a pirate.', tools));
    assert.ok(persona.cache_creation_input_tokens > 0);
    const reordered = [{ ...tools[1], cache_control: undefined }, { ...tools[0], cache_control: { type: 'ephemeral' } }].map((tool) =>
      Object.fromEntries(Object.entries(tool).filter(([, value]) => value !== undefined)),
    );
    const swapped = counted.account(body('You are Magpie. It is 12:01.', reordered));
    assert.equal(swapped.cache_read_input_tokens, 0, 'reordered tools: nothing read');
  });

  it('misses the messages, not the system, when tool_choice changes', () => {
    const fake = cache();
    const body = (choice: unknown) => ({ model: MODEL, tool_choice: choice, system: [text('s', 1100, '5m')], messages: [{ role: 'user', content: [text('u', 200, '5m')] }] });
    fake.account(body({ type: 'auto' }));
    assert.deepEqual(fake.account(body({ type: 'none' })), usage(1100, 200, 0));
  });

  it('keeps the split inside the total the server counted', () => {
    const fake = cache();
    const body = { model: MODEL, system: [text('s', 1200, '5m')], messages: [{ role: 'user', content: [text('u', 300)] }] };
    assert.deepEqual(fake.account(body, 1000), usage(0, 1000, 0));
    assert.deepEqual(fake.account(body, 1400), usage(1200, 0, 200));
  });

  it('refuses more than four breakpoints, an unknown lifetime, and a 1h breakpoint after a 5m one', () => {
    const fake = cache();
    const five = { model: MODEL, system: [text('a', 1, '5m'), text('b', 1, '5m')], messages: [{ role: 'user', content: [text('c', 1, '5m'), text('d', 1, '5m'), text('e', 1, '5m')] }] };
    assert.match(fake.problem(five)!, /maximum of 4 blocks with cache_control/);
    assert.match(fake.problem({ system: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral', ttl: '2h' } }] })!, /ttl/);
    assert.match(fake.problem({ system: [text('a', 1, '5m'), text('b', 1, '1h')] })!, /must not come after/);
    assert.equal(fake.problem({ system: [text('a', 1, '1h'), text('b', 1, '5m')] }), undefined);
    assert.equal(fake.problem({ system: 'plain', messages: [{ role: 'user', content: 'hi' }] }), undefined);
    assert.equal(fake.problem(undefined), undefined, 'garbage is not a breakpoint problem');
  });
});
