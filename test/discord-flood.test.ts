/**
 * A flood into one channel: 1,000 messages as fast as the gateway delivers them, reply policy
 * "always", no debounce. Every message is recorded; the turns are coalesced (one running, one
 * waiting per channel) so neither queued work nor memory grows with the flood; another channel
 * is still answered.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HistoryStore } from '../src/channel/history-store.js';
import { ALICE, BURST, GENERAL, isAgentRequest, lastUserText, startTestBot, waitUntil } from './discord-helpers.js';

const FLOOD = 1_000;

test('a burst of 1,000 messages into one channel is coalesced and does not starve another channel', { timeout: 180_000 }, async () => {
  const bot = await startTestBot({
    channels: { [BURST]: { replyPolicy: 'always' } },
    discord: { debounceMs: 0, debounceMaxMs: 0 },
  });
  try {
    bot.model.setDefault((request) => {
      if (!isAgentRequest(request.body)) return { text: 'summary' };
      if (lastUserText(request.body).includes('general question')) return { text: 'general answer' };
      // Slower than the flood, so turns pile up unless they are coalesced.
      return { delayMs: 200, then: { text: 'burst answer' } };
    });
    let peakPending = 0;
    const sampler = setInterval(() => {
      peakPending = Math.max(peakPending, bot.app.responder.pending);
    }, 2);
    for (let index = 0; index < FLOOD; index += 1) {
      bot.discord.sendMessage({ channelId: BURST, authorId: ALICE, content: `flood ${index}` });
      if (index === FLOOD / 2) bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'a general question', mentionsBot: true });
      if (index % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
    }
    await bot.discord.waitForPost((message) => message.channelId === GENERAL && message.content === 'general answer', { timeoutMs: 60_000 });
    const store = new HistoryStore(bot.app.db);
    const floodRecorded = async () => (await store.archive(BURST)).filter((entry) => entry.role === 'user').length;
    await waitUntil(async () => (await floodRecorded()) === FLOOD, 'every flood message recorded', 120_000);
    await bot.adapter.idle();
    clearInterval(sampler);
    const burstTurns = bot.model.requests.filter((request) => isAgentRequest(request.body) && lastUserText(request.body).includes('flood')).length;
    assert.ok(burstTurns >= 1, 'the flood was answered');
    assert.ok(burstTurns <= FLOOD / 4, `turns were coalesced: ${burstTurns} model turns for ${FLOOD} messages`);
    assert.ok(peakPending <= 25, `queued turns stay bounded during the flood (peak ${peakPending})`);
    const coalesced = bot.events.filter((event) => event.type === 'turn_coalesced' && event.channel_id === BURST).length;
    assert.ok(coalesced > 0, 'requests were folded into waiting turns');
    // The last turn answers the newest message: it saw the end of the flood.
    const lastTurn = bot.model.requests.filter((request) => isAgentRequest(request.body) && lastUserText(request.body).includes('flood')).at(-1)!;
    assert.match(lastUserText(lastTurn.body), new RegExp(`flood ${FLOOD - 1}\\b`));
  } finally {
    await bot.close();
  }
});
