/**
 * Channels replayed through a fake Messages API that counts tokens like a server and refuses
 * what does not fit exactly as Anthropic's does (both forms): a Chinese channel, an English one
 * and one with images, each on a small window so that compaction runs many times.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { resolveAttachments, type ResolvedAttachment } from '../src/attachments/resolve-attachments.js';
import { estimateImageTokens } from '../src/context/image-tokens.js';
import { runAgentTurn } from '../src/channel/agent-turn.js';
import type { ChannelSettings } from '../src/config/types.js';
import { definitionsOf } from '../src/llm/tool.js';
import { characterTokenCounter, startFakeAnthropic, type RecordedRequest } from './fakes/fake-anthropic.js';
import { isCompactionRequest } from './branch-worker-support.js';
import { isAgentRequest, lastUserText, testConfig } from './discord-helpers.js';
import { appEnv } from './support/storage.js';
import { CHINESE, codeMessages } from '../bench/token-calibration.js';


const ENGLISH = [
  'Morning all, the release review moved to three this afternoon in room two, bring your notes.',
  'API tests are about eighty percent done; I will finish the rest tomorrow before lunch.',
  'The migration script needs another look, it timed out on staging last time we ran it.',
  'Could someone sort the user feedback by severity and send it over before Friday?',
  'The front page still takes more than three seconds to show anything on a cold cache.',
  'Let us add the cache first and then see whether the images can be made smaller.',
];

/** A PNG of the given size, as far as anything reads it: signature and header. */
function pngOf(width: number, height: number): string {
  const bytes = Buffer.alloc(64);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(bytes, 0);
  bytes.writeUInt32BE(13, 8);
  bytes.write('IHDR', 12, 'latin1');
  bytes.writeUInt32BE(width, 16);
  bytes.writeUInt32BE(height, 20);
  return bytes.toString('base64');
}

interface Replay {
  app: MagpieApp;
  window: number;
  requests: RecordedRequest[];
  /** The real count of what the channel would send now. */
  realNow(): Promise<number>;
  /** `/context` against the real count after each turn. */
  contextErrors: number[];
  /** Messages answered whose text was missing from their request. */
  missingCurrent: string[];
}

async function replay(options: {
  channelId: string;
  messages: number;
  text: (index: number) => string;
  images?: (index: number) => ResolvedAttachment[];
  defaults: Partial<ChannelSettings>;
  turnEvery: number;
  summary?: string;
  reply?: string;
  check: (replay: Replay) => void;
}): Promise<void> {
  const count = characterTokenCounter();
  const window = options.defaults.contextWindow!;
  const fake = await startFakeAnthropic({ countTokens: count, contextWindow: window });
  // A model summarizes a channel in the channel's language.
  const summary = options.summary ?? 'Summary: the team went over the release plan, tests, migration and the slow front page.';
  fake.setDefault((request) => (isAgentRequest(request.body) ? { text: options.reply ?? 'Noted.' } : { text: summary }));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-edges-'));
  const app = await openApp({ config: testConfig({ baseUrl: fake.baseUrl, dataDir, defaults: options.defaults }), env: appEnv() });
  const { channelId } = options;
  const realNow = async () => count({ body: await app.runtime.buildModelRequest(channelId, { tools: definitionsOf(app.tools), maxTokens: 1 }) } as never);
  const result: Replay = { app, window, requests: fake.requests, realNow, contextErrors: [], missingCurrent: [] };
  try {
    for (let index = 0; index < options.messages; index += 1) {
      const content = `${index}: ${options.text(index)}`;
      const messageId = `${channelId}-m${index}`;
      await app.runtime.ingest({ messageId, channelId, guildId: 'g1', authorId: `u${index % 3}`, authorName: `P${index % 3}`, role: 'user', content, createdAt: Date.UTC(2026, 0, 1) + index * 60_000 });
      const files = options.images?.(index) ?? [];
      if (files.length > 0) await app.runtime.attachFiles(channelId, messageId, files);
      if (index % options.turnEvery !== options.turnEvery - 1) continue;
      const before = fake.requests.length;
      await app.runtime.runSerial(channelId, () =>
        runAgentTurn({ runtime: app.runtime, channelId, model: app.model!, tools: app.tools, settings: app.config.settingsFor(channelId), context: { channelId, guildId: 'g1' } }),
      );
      const sent = fake.requests.slice(before).filter((request) => isAgentRequest(request.body) && request.refusal === undefined);
      if (!sent.some((request) => lastUserText(request.body).includes(content))) result.missingCurrent.push(messageId);
      await app.runtime.flushCompactions();
      const real = await realNow();
      result.contextErrors.push(Math.abs((await app.runtime.status(channelId)).calibratedTokens - real) / real);
    }
    await app.runtime.flushCompactions();
    options.check(result);
  } finally {
    await app.close();
    await fake.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function refusedBy(requests: readonly RecordedRequest[], kind: (request: RecordedRequest) => boolean): RecordedRequest[] {
  return requests.filter((request) => request.refusal !== undefined && kind(request));
}

function assertEdgesHeld(replay: Replay, label: string): void {
  const channelRefused = refusedBy(replay.requests, (request) => isAgentRequest(request.body));
  const summaryRefused = refusedBy(replay.requests, isCompactionRequest);
  const summaries = replay.requests.filter(isCompactionRequest).length;
  assert.ok(channelRefused.length <= 1, `${label}: at most one refused channel request, got ${channelRefused.map((request) => `${request.inputTokens}+${request.body.max_tokens}`)}`);
  assert.equal(summaryRefused.length, 0, `${label}: no summary request refused (${summaries} sent): ${summaryRefused.map((request) => `${request.inputTokens}+${request.body.max_tokens}`)}`);
  assert.ok(summaries > 0, `${label}: the model summarized`);
  assert.deepEqual(replay.missingCurrent, [], `${label}: every answered message was in its request`);
  // From the third turn on, /context is within 10% of the real count.
  const late = replay.contextErrors.slice(2);
  assert.ok(late.every((error) => error < 0.1), `${label}: /context errors ${late.map((error) => error.toFixed(3)).join(' ')}`);
  for (const request of replay.requests) {
    if (request.refusal === undefined && request.inputTokens !== undefined) {
      assert.ok(request.inputTokens + Number(request.body.max_tokens) <= replay.window, 'every request sent fits with its answer');
    }
  }
}

const SMALL = { contextWindow: 3000, maxResponseTokens: 256 } as const;

test('a Chinese channel on a 3,000-token window: summaries never refused, at most one refused reply, /context near the real count', async () => {
  await replay({
    channelId: 'zh',
    messages: 120,
    text: (index) => CHINESE[index % CHINESE.length]! + CHINESE[(index * 3 + 1) % CHINESE.length]!,
    defaults: SMALL,
    turnEvery: 2,
    summary: '摘要：大家讨论了发布计划、接口测试、数据库迁移脚本的超时问题和首页加载太慢的问题。',
    reply: '好的，记下了。',
    check: (replay) => assertEdgesHeld(replay, 'zh'),
  });
});

test('an English channel on a 3,000-token window holds the same edges', async () => {
  await replay({
    channelId: 'en',
    messages: 120,
    text: (index) => ENGLISH[index % ENGLISH.length]!,
    defaults: SMALL,
    turnEvery: 2,
    check: (replay) => assertEdgesHeld(replay, 'en'),
  });
});

test('a channel pasting code on a 3,000-token window holds the same edges, and no request is refused', async () => {
  // The benchmark's code corpus: this repository's own sources, 40 lines a message.
  const code = codeMessages();
  assert.ok(code.length >= 40, `a corpus of ${code.length} sections`);
  await replay({
    channelId: 'code',
    messages: 80,
    text: (index) => code[index % code.length]!,
    defaults: SMALL,
    turnEvery: 2,
    summary: 'Summary: the team pasted the channel runtime, its request builders and its stores, and went over how they fit.',
    check: (replay) => {
      assertEdgesHeld(replay, 'code');
      assert.deepEqual(
        replay.requests.filter((request) => request.refusal !== undefined).map((request) => `${request.inputTokens}+${request.body.max_tokens}`),
        [],
        'no request refused',
      );
    },
  });
});

test('a channel with images, counted by their pixels, holds the same edges', async () => {
  await replay({
    channelId: 'img',
    messages: 60,
    text: (index) => ENGLISH[index % ENGLISH.length]!,
    // Every third message carries a 400×300 picture: 160 tokens to the server, not its base64 length.
    images: (index) => (index % 3 === 0 ? [{ kind: 'image', name: `p${index}.png`, size: 64, mediaType: 'image/png', width: 400, height: 300, tokens: 160, data: pngOf(400, 300) }] : []),
    defaults: { ...SMALL, contextWindow: 4000 },
    turnEvery: 3,
    check: (replay) => assertEdgesHeld(replay, 'img'),
  });
});

test('a text file far larger than the window is cut to fit, with a note, and the message is answered', async () => {
  const count = characterTokenCounter();
  const window = 3000;
  const fake = await startFakeAnthropic({ countTokens: count, contextWindow: window });
  fake.setDefault((request) => (isAgentRequest(request.body) ? { text: 'Read what I could.' } : { text: 'Summary: a log was shared.' }));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-edges-'));
  // 40,000 characters inlined: about 10,000 tokens, over three times the window.
  const app = await openApp({ config: testConfig({ baseUrl: fake.baseUrl, dataDir, defaults: { ...SMALL, maxAttachmentChars: 40_000 } }), env: appEnv() });
  const channelId = 'big-file';
  try {
    const log = 'GET /health 200 in 3 ms\n'.repeat(1700).slice(0, 40_000);
    await app.runtime.ingest({ messageId: 'm1', channelId, guildId: 'g1', authorId: 'u1', authorName: 'Ana', role: 'user', content: 'what is in this log?\n[attachment: server.log]', createdAt: Date.UTC(2026, 0, 1) });
    const files = await resolveAttachments([{ name: 'server.log', size: log.length, data: Buffer.from(log) }], { vision: true, maxImages: 4, maxChars: 40_000 });
    assert.equal(files[0]!.kind === 'text' && files[0]!.text.length, 40_000, 'the whole file was read');
    await app.runtime.attachFiles(channelId, 'm1', files);
    const result = await app.runtime.runSerial(channelId, () =>
      runAgentTurn({ runtime: app.runtime, channelId, model: app.model!, tools: app.tools, settings: app.config.settingsFor(channelId), context: { channelId, guildId: 'g1' } }),
    );
    assert.equal(result.reply, 'Read what I could.');
    const agent = fake.requests.filter((request) => isAgentRequest(request.body));
    assert.ok(agent.length > 0);
    assert.ok(agent.every((request) => request.refusal === undefined), 'no request was refused');
    for (const request of agent) assert.ok(request.inputTokens! + Number(request.body.max_tokens) <= window, 'the request fits with its answer');
    const seen = lastUserText(agent.at(-1)!.body);
    assert.match(seen, /what is in this log\?/);
    assert.match(seen, /\[file: server\.log, \d+ KB, first [\d,]+ characters shown\]/, 'the placeholder says the file was cut');
    const note = /Attached file server\.log:\n(GET[^[]*)\n\[cut here: the file is longer than ([\d,]+) characters\]$/m.exec(seen);
    assert.ok(note, 'the model sees the note that the file was cut');
    const shown = Number(note[2]!.replace(/,/g, ''));
    assert.equal(note[1]!.length, shown, 'the note gives how much of it is shown');
    assert.ok(shown > 1000 && shown < 10_000, `a useful beginning within the window: ${shown}`);
  } finally {
    await app.close();
    await fake.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a message within half the window is cut when the prompt and tools leave it less, and answered', async () => {
  const count = characterTokenCounter();
  const window = 3000;
  const fake = await startFakeAnthropic({ countTokens: count, contextWindow: window });
  fake.setDefault({ text: 'Read it.' });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-edges-'));
  const app = await openApp({ config: testConfig({ baseUrl: fake.baseUrl, dataDir, defaults: SMALL }), env: appEnv() });
  const channelId = 'long-paste';
  try {
    // About 1,250 tokens: under half the emergency room, over what the system prompt and the
    // tool definitions (some 1,500 tokens here) leave beside it and the answer.
    const content = ENGLISH.join(' ').repeat(10).slice(0, 5000);
    await app.runtime.ingest({ messageId: 'm1', channelId, guildId: 'g1', authorId: 'u1', authorName: 'Ana', role: 'user', content, createdAt: Date.UTC(2026, 0, 1) });
    const result = await app.runtime.runSerial(channelId, () =>
      runAgentTurn({ runtime: app.runtime, channelId, model: app.model!, tools: app.tools, settings: app.config.settingsFor(channelId), context: { channelId, guildId: 'g1' } }),
    );
    assert.match(result.reply, /^\(Your message was too long for me to read whole/);
    assert.match(result.reply, /Read it\.$/);
    assert.ok(fake.requests.length > 0 && fake.requests.every((request) => request.refusal === undefined), 'nothing refused');
    for (const request of fake.requests) assert.ok(request.inputTokens! + Number(request.body.max_tokens) <= window, 'the request fits with its answer');
    assert.match(lastUserText(fake.requests.at(-1)!.body), /too long to read whole/);
  } finally {
    await app.close();
    await fake.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a server that charges images three times their pixel rule does not move the factor text messages are corrected by', async () => {
  const fake = await startFakeAnthropic({ countTokens: characterTokenCounter({ imageScale: 3 }), contextWindow: 20_000 });
  fake.setDefault({ text: 'Noted.' });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-edges-'));
  const app = await openApp({ config: testConfig({ baseUrl: fake.baseUrl, dataDir, defaults: { contextWindow: 20_000, maxResponseTokens: 256 } }), env: appEnv() });
  const channelId = 'pictures';
  let index = 0;
  const say = async (files: ResolvedAttachment[] = []) => {
    const messageId = `${channelId}-m${index}`;
    await app.runtime.ingest({ messageId, channelId, guildId: 'g1', authorId: 'u1', authorName: 'Ana', role: 'user', content: `${index}: ${ENGLISH[index % ENGLISH.length]!}`, createdAt: Date.UTC(2026, 0, 1) + index * 60_000 });
    index += 1;
    if (files.length > 0) await app.runtime.attachFiles(channelId, messageId, files);
    await app.runtime.runSerial(channelId, () =>
      runAgentTurn({ runtime: app.runtime, channelId, model: app.model!, tools: app.tools, settings: app.config.settingsFor(channelId), context: { channelId, guildId: 'g1' } }),
    );
  };
  const picture = (name: string): ResolvedAttachment => ({ kind: 'image', name, size: 64, mediaType: 'image/png', width: 800, height: 600, tokens: estimateImageTokens(800, 600), data: pngOf(800, 600) });
  try {
    for (let turn = 0; turn < 6; turn += 1) await say();
    const learnt = app.runtime.messageFactor(channelId);
    // Three turns with two pictures each: 1,280 estimated tokens that the server counts as 3,840.
    for (let turn = 0; turn < 3; turn += 1) await say([picture(`a${turn}.png`), picture(`b${turn}.png`)]);
    await say();
    const after = app.runtime.messageFactor(channelId);
    assert.ok(Math.abs(after / learnt - 1) < 0.03, `the messages factor stays where text put it: ${learnt} → ${after}`);
    assert.ok(fake.requests.every((request) => request.refusal === undefined), 'nothing refused');
  } finally {
    await app.close();
    await fake.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
