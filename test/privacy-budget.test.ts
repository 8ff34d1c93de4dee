/**
 * The daily token budget holds: it is kept in SQLite (a restart does not forgive the day's
 * spending) and a thread spends its parent channel's budget.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { openApp, type MagpieApp } from '../src/app/index.js';
import type { ReplyTarget } from '../src/app/channel-responder.js';
import { startFakeAnthropic } from './fakes/fake-anthropic.js';
import { testConfig } from './discord-helpers.js';
import { appEnv } from './support/storage.js';

const PARENT = 'parent-channel';
const THREAD = 'thread-of-parent';
const OTHER = 'other-channel';

function target(posted: string[]): ReplyTarget {
  return {
    async send(text) {
      posted.push(text);
      return `reply-${posted.length}`;
    },
  };
}

async function ask(app: MagpieApp, channelId: string, parentId: string | undefined, posted: string[]) {
  const id = `m-${channelId}-${posted.length}-${Math.random()}`;
  await app.runtime.ingest({
    messageId: id,
    channelId,
    guildId: 'g1',
    ...(parentId ? { parentChannelId: parentId } : {}),
    authorId: 'u1',
    authorName: 'Uma',
    role: 'user',
    content: 'hello there',
    createdAt: Date.now(),
  });
  return app.responder.respond({
    channelId,
    ...(parentId ? { parentId } : {}),
    userId: 'u1',
    context: { channelId, guildId: 'g1', sourceMessageIds: [id] },
    target: target(posted),
  });
}

test('a thread spends its parent budget, and the spending survives a restart', async () => {
  const model = await startFakeAnthropic();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-budget-'));
  const config = testConfig({ baseUrl: model.baseUrl, dataDir, defaults: { dailyTokenBudget: 1_000 } });
  model.setDefault({ text: 'Hi.', usage: { inputTokens: 1_200, outputTokens: 5 } });
  try {
    const first = await openApp({ config, env: appEnv() });
    const posted: string[] = [];
    assert.equal(await ask(first, THREAD, PARENT, posted), 'replied');
    // The thread spent the parent's budget: the parent is over it too.
    assert.equal(await ask(first, PARENT, undefined, posted), 'over_budget');
    assert.match(posted.at(-1)!, /used up its model budget/);
    await first.close();

    const second = await openApp({ config, env: appEnv() });
    try {
      const after: string[] = [];
      assert.equal(await ask(second, THREAD, PARENT, after), 'over_budget', 'a restart does not reset the budget');
      assert.equal(await ask(second, PARENT, undefined, after), 'over_budget');
      assert.equal(await ask(second, OTHER, undefined, after), 'replied', 'another channel has its own budget');
      const row = (await second.db.prepare('SELECT tokens FROM token_budget WHERE channel_id = ?').get(PARENT)) as { tokens: number };
      assert.equal(row.tokens, 1_205);
      assert.equal(((await second.db.prepare('SELECT COUNT(*) AS total FROM token_budget WHERE channel_id = ?').get(THREAD)) as { total: number }).total, 0);
    } finally {
      await second.close();
    }
  } finally {
    await model.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
