/**
 * A replay stops at the first failure to read or write the store, whichever statement it was,
 * and says how far it got: a read that timed out (checking what the channel holds) ends it as a
 * failed write does, never as an unexplained crash.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MagpieError } from '../src/common/errors.js';
import { replayLines, TranscriptClock } from '../src/cli/replay-lines.js';
import { openHarness } from './compaction-support.js';

async function* lines(count: number): AsyncIterable<string> {
  for (let index = 0; index < count; index += 1) {
    yield JSON.stringify({ id: `m${index}`, channel: 'c1', author: 'ana', content: `line ${index}`, ts: `2025-01-01T00:0${index}:00Z` });
  }
}

test('a read of the store that fails mid-replay stops it with the failure, the lines before it counted', async () => {
  const harness = await openHarness();
  try {
    const timeout = new MagpieError('storage_timeout', 'PostgreSQL did not answer within 6000 ms (Query read timeout)', { retryable: true });
    const status = harness.runtime.status.bind(harness.runtime);
    let calls = 0;
    // The fifth look at the channel (the third line's first) times out, as a read over a lost network would.
    harness.runtime.status = async (channelId: string) => {
      calls += 1;
      if (calls === 5) throw timeout;
      return status(channelId);
    };
    const progress = await replayLines({ lines: lines(6), runtime: harness.runtime, clock: new TranscriptClock() });
    assert.equal(progress.failure, timeout, 'the failure is reported, not thrown');
    assert.equal(progress.messages, 2, 'the two lines before it are stored and counted');
    assert.equal(progress.lines, 3);
    assert.equal((await status('c1')).archivedMessages, 2);
  } finally {
    await harness.close();
  }
});
