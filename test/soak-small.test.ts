/** The soak benchmark's machinery at a small size: compaction everywhere, bounded channels, and a verdict that notices a loss. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ChannelRuntime } from '../src/channel/index.js';
import { EventStream } from '../src/common/events.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import { openMemoryStore } from '../src/memory/index.js';
import { runSoak, soakChannelId, soakText, verifyNothingLost } from '../bench/soak-run.js';
import { openTestDatabase } from './support/storage.js';

test('a small soak compacts every channel, stays near its channel cap and loses nothing', { timeout: 300_000 }, async () => {
  const report = await runSoak({
    channels: 12,
    messagesPerChannel: 40,
    maxLoadedChannels: 3,
    activeChannels: 3,
    contextWindow: 800,
    modelShare: 0.25,
    modelLatencyMs: 5,
    search: 'all',
  });
  assert.equal(report.verdict.ok, true, JSON.stringify(report.verdict));
  assert.equal(report.verdict.sent, 480);
  assert.equal(report.verdict.searched, 480);
  assert.ok(report.tiers.background + report.tiers.aggressive + report.tiers.emergency >= 12, `compaction fired: ${JSON.stringify(report.tiers)}`);
  assert.ok(report.completed.extractive > 0 && report.completed.model > 0, `both summarizers ran: ${JSON.stringify(report.completed)}`);
  // Active channels plus those whose compaction or write is still in flight, never all twelve.
  assert.ok(report.peakLoadedChannels < 12, `peak loaded ${report.peakLoadedChannels}`);
});

test('the nothing-lost verdict counts a message missing from the archive, the transcript or search', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-verdict-'));
  const db = await openTestDatabase(dir);
  const memory = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory });
  const runtime = new ChannelRuntime({ db, memory, config: new LiveConfig(DEFAULTS), events: new EventStream(), summarizer: createExtractiveSummarizer() });
  try {
    for (let channel = 0; channel < 2; channel += 1) {
      for (let index = 0; index < 5; index += 1) {
        await runtime.ingest({
          messageId: `k${channel}x${index}`,
          channelId: soakChannelId(channel),
          guildId: 'soak-guild',
          authorId: 'u1',
          authorName: 'ann',
          role: 'user',
          content: soakText(channel, index),
          createdAt: index,
        });
      }
    }
    const clean = await verifyNothingLost({ db, memory, channels: 2, messagesPerChannel: 5, search: 'all' });
    assert.deepEqual({ ok: clean.ok, sent: clean.sent, searched: clean.searched }, { ok: true, sent: 10, searched: 10 });
    // A message never sent counts as lost: ask for one more per channel than was ingested.
    const short = await verifyNothingLost({ db, memory, channels: 2, messagesPerChannel: 6, search: 'sample' });
    assert.equal(short.ok, false);
    assert.equal(short.missingFromArchive, 2);
    assert.equal(short.missingFromTranscript, 2);
    assert.equal(short.notFound, 2, 'the last of each channel is in the sample and not found');
    // A transcript row gone (the archive still has it) is caught too.
    await db.prepare(`DELETE FROM memory_items WHERE message_id = 'k1x2'`).run();
    const broken = await verifyNothingLost({ db, memory, channels: 2, messagesPerChannel: 5, search: 'all' });
    assert.equal(broken.ok, false);
    assert.equal(broken.missingFromTranscript, 1);
    assert.equal(broken.notFound, 1);
    assert.deepEqual(broken.examples, ['k1x2', 'k1x2']);
  } finally {
    await runtime.close();
    await memory.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
