/** An app on a fake Messages API for branch and worker tests: real SDK, real SQLite, real tools. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import type { ChannelSettings, LlmSettings } from '../src/config/types.js';
import type { ToolContext, ToolHandler } from '../src/llm/tool.js';
import { BRANCH_SYSTEM_PROMPT } from '../src/branch/index.js';
import { WORKER_SYSTEM_PROMPT } from '../src/worker/index.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeAnthropicOptions, type RecordedRequest } from './fakes/fake-anthropic.js';
import { systemText } from './fakes/fake-prompt-cache.js';
import { testConfig } from './discord-helpers.js';
import { appEnv } from './support/storage.js';

export interface AgentsHarness {
  model: FakeAnthropic;
  app: MagpieApp;
  events: MagpieEvent[];
  dataDir: string;
  tool(name: string): ToolHandler;
  /** Reopens the app on the same data directory (a restart). */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function startAgents(
  options: {
    defaults?: Partial<ChannelSettings>;
    channels?: Record<string, Partial<ChannelSettings>>;
    llm?: Partial<LlmSettings>;
    dataDir?: string;
    fake?: FakeAnthropicOptions;
  } = {},
): Promise<AgentsHarness> {
  const model = await startFakeAnthropic(options.fake);
  const dataDir = options.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'magpie-agents-'));
  const events: MagpieEvent[] = [];
  const open = async (): Promise<MagpieApp> => {
    const stream = new EventStream();
    stream.subscribe((event) => events.push(event));
    const base = testConfig({
      baseUrl: model.baseUrl,
      dataDir,
      ...(options.defaults ? { defaults: options.defaults } : {}),
      ...(options.channels ? { channels: options.channels } : {}),
    });
    const config = { ...base, llm: { ...base.llm, ...options.llm } };
    return openApp({ config, env: appEnv(), events: stream });
  };
  const harness: AgentsHarness = {
    model,
    app: await open(),
    events,
    dataDir,
    tool(name) {
      const found = harness.app.tools.find((tool) => tool.definition.name === name);
      if (!found) throw new Error(`no tool ${name}`);
      return found;
    },
    async restart() {
      await harness.app.close();
      harness.app = await open();
    },
    async close() {
      await harness.app.close();
      await model.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return harness;
}

export function isBranchRequest(request: RecordedRequest): boolean {
  return systemText(request.body).startsWith(BRANCH_SYSTEM_PROMPT);
}

export function isWorkerRequest(request: RecordedRequest): boolean {
  return systemText(request.body) === WORKER_SYSTEM_PROMPT;
}

/** Compaction requests offer memory_save alone. */
export function isCompactionRequest(request: RecordedRequest): boolean {
  const tools = (request.body?.tools ?? []) as Array<{ name: string }>;
  return tools.length === 1 && tools[0]!.name === 'memory_save';
}

export async function say(app: MagpieApp, channelId: string, count: number, text: (index: number) => string, start = 0): Promise<void> {
  for (let index = start; index < start + count; index += 1) {
    await app.runtime.ingest({
      messageId: `${channelId}-m${index}`,
      channelId,
      authorId: index % 2 === 0 ? 'u-ana' : 'u-ben',
      authorName: index % 2 === 0 ? 'Ana' : 'Ben',
      role: 'user',
      content: text(index),
      createdAt: Date.UTC(2024, 0, 1) + index * 60_000,
    });
  }
}

export function contextFor(channelId: string, extra: Partial<ToolContext> = {}): ToolContext {
  return { channelId, sourceMessageIds: [`${channelId}-ask`], ...extra };
}

/** Every tool_use answered by a tool_result in the very next message, and every result answering a call just before. */
export function toolPairingProblems(messages: Array<{ role: string; content: unknown }>): string[] {
  const problems: string[] = [];
  const blocks = (message: { content: unknown } | undefined): Array<{ type: string; id?: string; tool_use_id?: string }> =>
    !message || typeof message.content === 'string' ? [] : (message.content as Array<{ type: string; id?: string; tool_use_id?: string }>);
  messages.forEach((message, index) => {
    if (message.role === 'assistant') {
      const answered = new Set(blocks(messages[index + 1]).flatMap((block) => (block.type === 'tool_result' ? [block.tool_use_id] : [])));
      for (const block of blocks(message)) if (block.type === 'tool_use' && !answered.has(block.id)) problems.push(`tool_use ${block.id} at ${index} unanswered`);
    } else {
      const asked = new Set(blocks(messages[index - 1]).flatMap((block) => (block.type === 'tool_use' ? [block.id] : [])));
      for (const block of blocks(message)) if (block.type === 'tool_result' && !asked.has(block.tool_use_id)) problems.push(`tool_result ${block.tool_use_id} at ${index} without its call`);
    }
  });
  return problems;
}

export function requestTokens(request: RecordedRequest): number {
  const body = request.body as { system?: string; messages?: unknown; tools?: unknown };
  return Math.ceil(JSON.stringify({ system: body.system, messages: body.messages, tools: body.tools }).length / 4);
}

export async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
