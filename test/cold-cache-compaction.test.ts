import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openHarness, replyWith, ScriptedSummarizer, settle, testConfig, userMessage } from './compaction-support.js';

/** A clock the test moves by hand. */
class HandClock {
  current = Date.UTC(2026, 0, 1);
  now(): number {
    return this.current;
  }
}

async function harnessWith(coldCacheThreshold: number, promptCache: '5m' | '1h' | 'off', clock: HandClock) {
  const base = testConfig({ contextWindow: 2000, compaction: { coldCacheThreshold } });
  return await openHarness({
    configValue: { ...base, llm: { ...base.llm, promptCache } },
    clock,
    summarizer: new ScriptedSummarizer().enqueue(replyWith('They talked about words.')),
  });
}

/** Fills the channel to about half its window, below the background threshold, at `clock`'s time. */
async function halfFull(harness: Awaited<ReturnType<typeof harnessWith>>, clock: HandClock): Promise<void> {
  for (let index = 0; (await harness.runtime.status('c1')).usage < 0.5; index += 1) {
    await harness.runtime.ingest({ ...userMessage('c1', index), createdAt: clock.current });
  }
}

test('the idle sweep compacts a channel whose prompt cache went cold once it is at cold_cache_threshold', async () => {
  const clock = new HandClock();
  const harness = await harnessWith(0.4, '5m', clock);
  try {
    await halfFull(harness, clock);
    assert.equal(harness.ofType('compaction_triggered').length, 0, 'below the background threshold: nothing yet');
    clock.current += 4 * 60_000;
    harness.runtime.unloadIdle();
    assert.equal(harness.ofType('compaction_triggered').length, 0, 'four idle minutes: the cache is still warm');
    clock.current += 2 * 60_000;
    harness.runtime.unloadIdle();
    const [triggered] = harness.ofType('compaction_triggered');
    assert.equal(triggered?.reason, 'cache_cold');
    assert.equal(triggered?.tier, 'background');
    for (let wait = 0; wait < 50 && harness.ofType('compaction_completed').length === 0; wait += 1) await settle();
    assert.equal(harness.ofType('compaction_completed').length, 1);
    assert.ok((await harness.runtime.status('c1')).usage < 0.5);
  } finally {
    await harness.close();
  }
});

test('no early compaction when the threshold is off, caching is off, or usage is below it', async () => {
  for (const [threshold, cache] of [[0, '5m'], [0.4, 'off'], [0.9, '5m']] as const) {
    const clock = new HandClock();
    const harness = await harnessWith(threshold, cache, clock);
    try {
      await halfFull(harness, clock);
      clock.current += 2 * 60 * 60_000;
      harness.runtime.unloadIdle();
      assert.equal(harness.ofType('compaction_triggered').length, 0, `threshold ${threshold}, cache ${cache}`);
    } finally {
      await harness.close();
    }
  }
});

test('a hot reload that turns the threshold on applies at the next sweep', async () => {
  const clock = new HandClock();
  const harness = await harnessWith(0, '1h', clock);
  try {
    await halfFull(harness, clock);
    clock.current += 61 * 60_000;
    const current = harness.config.current();
    harness.config.replace({ ...current, defaults: { ...current.defaults, compaction: { ...current.defaults.compaction, coldCacheThreshold: 0.4 } } });
    harness.runtime.unloadIdle();
    assert.equal(harness.ofType('compaction_triggered').at(0)?.reason, 'cache_cold');
  } finally {
    await harness.close();
  }
});
