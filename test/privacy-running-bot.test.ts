/**
 * An operator erases while the bot runs: `magpie memory forget` (a real process) cannot take the
 * writer lock the bot holds, so it leaves a request the bot applies; the command reports the
 * outcome, and the bot's next model request no longer carries the text.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ALICE, BOB, CAROL, GENERAL, isAgentRequest, startTestBot, waitUntil, type TestBot } from './discord-helpers.js';
import { runMagpie } from './support/magpie-process.js';

let bot: TestBot;
let cwd: string;
before(async () => {
  bot = await startTestBot();
  bot.model.setDefault((request) => (isAgentRequest(request.body) ? { text: 'Noted.' } : { status: 500 }));
  cwd = mkdtempSync(path.join(os.tmpdir(), 'magpie-forget-'));
});
after(async () => {
  await bot.close();
  rmSync(cwd, { recursive: true, force: true });
});

const forget = (args: string[]) => runMagpie(['memory', 'forget', ...args, '--data-dir', bot.dataDir], { cwd, env: { ...process.env, MAGPIE_DATA_DIR: '' } });

async function nextRequestBody(): Promise<string> {
  const before = bot.model.requests.length;
  const ask = bot.discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'anything new?', mentionsBot: true });
  await bot.discord.waitForPost((message) => message.messageReference?.message_id === ask, { timeoutMs: 10_000 });
  await bot.adapter.idle();
  const request = bot.model.requests.slice(before).find((recorded) => isAgentRequest(recorded.body));
  assert.ok(request, 'the bot asked the model');
  return JSON.stringify(request.body);
}

test('memory forget ID beside the running bot: applied by the bot, reported by the command', async () => {
  const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'my passport number is X9921-QRT-5510, keep it safe' });
  await waitUntil(async () => (await bot.app.runtime.liveContext(GENERAL)).entries.some((entry) => entry.messageId === id), 'recorded');
  await waitUntil(
    async () => await bot.app.db.prepare(`SELECT rowid FROM memory_items WHERE message_id = ? AND kind = 'transcript'`).get(id) !== undefined,
    'archived',
  );
  assert.ok((await nextRequestBody()).includes('X9921-QRT-5510'), 'precondition: the model sees it');
  const { rowid } = (await bot.app.db.prepare(`SELECT rowid FROM memory_items WHERE message_id = ? AND kind = 'transcript'`).get(id)) as { rowid: number };

  const run = await forget([`msg-${rowid}`]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(
    run.stdout,
    `forgot msg-${rowid}: the archived message (message id ${id}) in channel ${GENERAL}; 'msg-${rowid}' matched the internal id (applied by the running bot)\n`,
  );
  assert.ok(bot.events.some((event) => event.type === 'erasure_request_applied'));
  assert.ok(!(await nextRequestBody()).includes('X9921'), 'the next request no longer carries it');

  const unknown = await forget(['msg-99999999']);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no memory or transcript entry with id 'msg-99999999'/);
});

test('memory forget with the Discord message id beside the running bot: the bot applies it', async () => {
  const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'the vault combination is 31-07-KESTREL, do not share' });
  await waitUntil(
    async () => await bot.app.db.prepare(`SELECT rowid FROM memory_items WHERE message_id = ? AND kind = 'transcript'`).get(id) !== undefined,
    'archived',
  );
  assert.ok((await nextRequestBody()).includes('31-07-KESTREL'), 'precondition: the model sees it');
  const { rowid } = (await bot.app.db.prepare(`SELECT rowid FROM memory_items WHERE message_id = ? AND kind = 'transcript'`).get(id)) as { rowid: number };
  const applied = bot.events.filter((event) => event.type === 'erasure_request_applied').length;

  const run = await forget([id, '--json']);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), {
    forgotten: true,
    id: `msg-${rowid}`,
    kind: 'transcript',
    channel_id: GENERAL,
    message_id: id,
    matched: 'message_id',
    applied_by: 'running_bot',
  });
  assert.equal(bot.events.filter((event) => event.type === 'erasure_request_applied').length, applied + 1, 'the bot applied it');
  assert.ok(!(await nextRequestBody()).includes('KESTREL'), 'the next request no longer carries it');

  // Gone now: the same id matches nothing, and nothing is asked of the bot.
  const again = await forget([id]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, new RegExp(`no memory or transcript entry with id '${id}'`));
  assert.equal(bot.events.filter((event) => event.type === 'erasure_request_applied').length, applied + 1);
});

test('memory forget --user beside the running bot erases that user everywhere', async () => {
  const said = bot.discord.sendMessage({ channelId: GENERAL, authorId: CAROL, content: 'Carol here: my home address is 12 Larkspur Lane' });
  await waitUntil(async () => (await bot.app.runtime.liveContext(GENERAL)).entries.some((entry) => entry.messageId === said), 'recorded');
  const run = await forget(['--user', CAROL, '--json']);
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout) as { user_erased: boolean; applied_by: string; messages: number; memories_deleted: number };
  assert.equal(report.user_erased, true);
  assert.equal(report.applied_by, 'running_bot');
  assert.ok(report.messages >= 1);
  assert.equal(typeof report.memories_deleted, 'number', run.stdout);
  // The audit line on the command's stderr too, counts only.
  const audit = run.stderr.split('\n').find((line) => line.includes('"user_erased"'));
  assert.ok(audit, run.stderr);
  assert.ok(!audit.includes(CAROL), audit);
  assert.equal((JSON.parse(audit) as { messages: number }).messages, report.messages);
  assert.ok(!(await nextRequestBody()).includes('Larkspur'), 'the next request no longer carries it');
});
