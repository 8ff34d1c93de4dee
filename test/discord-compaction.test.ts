import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ALICE, CAROL, isAgentRequest, lastUserText, LONG, QUIET, startTestBot, waitUntil } from './discord-helpers.js';
import { systemText } from './fakes/fake-prompt-cache.js';

test('during a long conversation in a small window, compaction fires and replies keep flowing', async () => {
  const bot = await startTestBot({ channels: { [LONG]: { contextWindow: 3_000, replyPolicy: 'mention' } } });
  try {
    bot.model.setDefault((request) =>
      isAgentRequest(request.body)
        ? { text: `noted: ${lastUserText(request.body).slice(-40)}` }
        : { text: 'Summary: Alice and Carol planned the garden, chose tomatoes and set a budget of 40 euros.' },
    );
    let replies = 0;
    for (let index = 0; index < 48; index += 1) {
      const author = index % 2 === 0 ? ALICE : CAROL;
      const content = `message ${index}: ${'we keep planning the community garden beds and the watering rota. '.repeat(4)}`;
      const mention = index % 6 === 5;
      const id = bot.discord.sendMessage({ channelId: LONG, authorId: author, content, mentionsBot: mention });
      if (mention) {
        await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
        replies += 1;
      }
    }
    await bot.adapter.idle();
    const completed = bot.events.filter((event) => event.type === 'compaction_completed' && event.channel_id === LONG);
    assert.ok(completed.length >= 1, `compactions: ${completed.length}`);
    assert.equal(replies, 8);
    const status = await bot.app.runtime.status(LONG);
    assert.ok(status.usage < status.thresholds.emergency, `usage ${status.usage}`);
    assert.ok(status.summaries >= 1);
    assert.ok(status.archivedMessages > status.liveMessages);
    // What the agent was last sent fits the window and carries the summary.
    const lastAgent = bot.model.requests.filter((request) => isAgentRequest(request.body)).at(-1)!;
    assert.match(systemText(lastAgent.body), /Summary: Alice and Carol planned the garden/);
  } finally {
    await bot.close();
  }
});

test('a mention waiting out its debounce is not compacted before its turn reads it', async () => {
  // A burst that waits for a minute of quiet: the mention has no turn yet, only its trigger.
  const bot = await startTestBot({ discord: { debounceMs: 60_000, debounceMaxMs: 60_000 } });
  try {
    bot.model.setDefault(() => ({ text: 'Summary: the mention and what followed.' }));
    bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: 'can you sum up the garden plan?', mentionsBot: true });
    for (let index = 0; index < 6; index += 1) bot.discord.sendMessage({ channelId: QUIET, authorId: CAROL, content: `message ${index} about the watering rota` });
    await waitUntil(async () => (await bot.app.runtime.liveContext(QUIET)).entries.length === 7, 'the messages stored');
    // The oldest half would take the mention: it waits for an answer, and what follows it stays too.
    const outcome = await bot.app.runtime.compactNow(QUIET);
    assert.equal(outcome.status, 'nothing_to_compact', JSON.stringify(outcome));
    assert.equal((await bot.app.runtime.liveContext(QUIET)).entries.length, 7);
  } finally {
    await bot.close();
  }
});
