import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ALICE, CAROL, GENERAL, isAgentRequest, lastUserText, QUIET, startTestBot } from './discord-helpers.js';

test('turns are serial within a channel and concurrent across channels', async () => {
  const bot = await startTestBot({ channels: { [QUIET]: { replyPolicy: 'mention' } } });
  try {
    const active = new Map<string, number>();
    let maxPerChannel = 0;
    let maxOverall = 0;
    let overall = 0;
    bot.model.setDefault(async (request) => {
      if (!isAgentRequest(request.body)) return { text: 'summary' };
      const channel = /topic-(\w+)/.exec(lastUserText(request.body))?.[1] ?? 'other';
      active.set(channel, (active.get(channel) ?? 0) + 1);
      overall += 1;
      maxPerChannel = Math.max(maxPerChannel, active.get(channel)!);
      maxOverall = Math.max(maxOverall, overall);
      // Hold each call until two channels have been with the model at once (or 5 s pass), so
      // that overlap is observed however slowly the machine delivers the other channel's turn.
      const holdUntil = Date.now() + 5_000;
      while (maxOverall < 2 && Date.now() < holdUntil) await new Promise((resolve) => setTimeout(resolve, 5));
      active.set(channel, active.get(channel)! - 1);
      overall -= 1;
      return { text: `answer for ${channel}` };
    });
    const first = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'topic-general first', mentionsBot: true });
    const other = bot.discord.sendMessage({ channelId: QUIET, authorId: CAROL, content: 'topic-quiet hello', mentionsBot: true });
    // A second question in the same channel once the first turn is already with the model.
    const deadline = Date.now() + 5_000;
    while ((active.get('general') ?? 0) === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    const second = bot.discord.sendMessage({ channelId: GENERAL, authorId: CAROL, content: 'topic-general second', mentionsBot: true });
    for (const id of [first, other, second]) {
      await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    }
    assert.equal(maxPerChannel, 1, 'one turn at a time per channel');
    assert.ok(maxOverall >= 2, `channels ran concurrently (max ${maxOverall})`);
  } finally {
    await bot.close();
  }
});
