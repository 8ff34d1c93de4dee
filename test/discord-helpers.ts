/** A whole bot on loopback for end-to-end tests: fake Discord, fake Messages API, real everything else. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { MEMORY_RESTATE_SYSTEM_PROMPT } from '../src/compaction/memory-restatement.js';
import { DEFAULTS } from '../src/config/defaults.js';
import type { ChannelSettings, DiscordSettings, MagpieConfig, MemorySettings } from '../src/config/types.js';
import { createDiscordClient, DiscordAdapter } from '../src/discord/index.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';
import { startFakeDiscord, type FakeChannel, type FakeDiscord } from './fakes/fake-discord.js';
import { systemText } from './fakes/fake-prompt-cache.js';
import { appEnv, withTestStorage } from './support/storage.js';

export const ALICE = '100000000000000001';
export const BOB = '100000000000000002';
export const OTHER_BOT = '100000000000000003';
export const MOD = '100000000000000004';
export const CAROL = '100000000000000005';
export const GENERAL = '700000000000000001';
export const QUIET = '700000000000000002';
export const THREAD = '700000000000000003';
export const LONG = '700000000000000004';
export const BURST = '700000000000000005';
export const DM_ALICE = '710000000000000001';
export const DM_CAROL = '710000000000000002';
export const ROLE_MODS = '600000000000000001';

export interface TestBot {
  discord: FakeDiscord;
  model: FakeAnthropic;
  app: MagpieApp;
  adapter: DiscordAdapter;
  events: MagpieEvent[];
  dataDir: string;
  close(): Promise<void>;
}

export interface TestBotOptions {
  discord?: Partial<DiscordSettings>;
  channels?: Record<string, Partial<ChannelSettings>>;
  defaults?: Partial<ChannelSettings>;
  memory?: Partial<MemorySettings>;
  /** Channels the fake Discord has besides the standard ones. */
  extraChannels?: FakeChannel[];
}

export function testConfig(options: TestBotOptions & { baseUrl: string; dataDir: string }): MagpieConfig {
  const defaults = { ...DEFAULTS.defaults, ...options.defaults };
  const channels: Record<string, ChannelSettings> = {};
  for (const [id, overrides] of Object.entries(options.channels ?? {})) channels[id] = { ...defaults, ...overrides };
  return withTestStorage({
    ...DEFAULTS,
    defaults,
    channels,
    llm: { ...DEFAULTS.llm, model: 'claude-test', baseUrl: options.baseUrl, maxRetries: 0, timeoutMs: 10_000 },
    memory: { ...DEFAULTS.memory, ...options.memory, dataDir: options.dataDir },
    discord: {
      ...DEFAULTS.discord,
      debounceMs: 15,
      debounceMaxMs: 150,
      userTurnsPerMinute: 0,
      shutdownGraceMs: 2_000,
      ...options.discord,
    },
  });
}

/** Agent turns offer memory_search; compaction workers only memory_save. */
export function isAgentRequest(body: { tools?: Array<{ name: string }> }): boolean {
  return (body.tools ?? []).some((tool) => tool.name === 'memory_search');
}

/** A request to restate a memory that lost a source message (sent with its own system prompt). */
export function isMemoryRestateRequest(body: { system?: unknown }): boolean {
  return systemText(body) === MEMORY_RESTATE_SYSTEM_PROMPT;
}

/** The text of the last user message of a Messages API request body. */
export function lastUserText(body: { messages: Array<{ role: string; content: unknown }> }): string {
  const last = [...body.messages].reverse().find((message) => message.role === 'user');
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  return (last.content as Array<{ type: string; text?: string }>).map((block) => block.text ?? '').join('\n');
}

export async function startTestBot(options: TestBotOptions = {}): Promise<TestBot> {
  const discord = await startFakeDiscord({
    users: [
      { id: ALICE, username: 'alice', globalName: 'Alice' },
      { id: BOB, username: 'bob' },
      { id: OTHER_BOT, username: 'otherbot', bot: true },
      { id: MOD, username: 'mod', nick: 'The Moderator', roles: [ROLE_MODS] },
      { id: CAROL, username: 'carol' },
    ],
    roles: [{ id: ROLE_MODS, name: 'mods' }],
    channels: [
      { id: GENERAL, name: 'general', type: 0 },
      { id: QUIET, name: 'quiet', type: 0 },
      { id: THREAD, name: 'a-thread', type: 11, parentId: GENERAL },
      { id: LONG, name: 'long', type: 0 },
      { id: BURST, name: 'burst', type: 0 },
      { id: DM_ALICE, name: 'dm-alice', type: 1 },
      { id: DM_CAROL, name: 'dm-carol', type: 1 },
      ...(options.extraChannels ?? []),
    ],
  });
  const model = await startFakeAnthropic();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-discord-'));
  const config = testConfig({ ...options, baseUrl: model.baseUrl, dataDir });
  const stream = new EventStream();
  const events: MagpieEvent[] = [];
  stream.subscribe((event) => events.push(event));
  const app = await openApp({ config, env: appEnv(), events: stream });
  const client = createDiscordClient({ restApi: discord.restApi });
  const adapter = new DiscordAdapter({
    client,
    runtime: app.runtime,
    responder: app.responder,
    memory: app.memory,
    config: app.config,
    events: stream,
    workers: app.workers,
  });
  await adapter.start('test-token');
  return {
    discord,
    model,
    app,
    adapter,
    events,
    dataDir,
    async close() {
      await adapter.stop(1_000);
      await app.close();
      await model.close();
      await discord.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export { waitUntil } from './support/wait-until.js';
