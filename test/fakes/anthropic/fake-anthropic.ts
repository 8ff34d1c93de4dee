/**
 * A fake Anthropic Messages API on loopback, so tests run the real `@anthropic-ai/sdk` over
 * real HTTP. Replies are scripted: queued replies are consumed one per HTTP request (so each
 * SDK retry takes the next one), then the default answers. The default is an error, so a
 * test that forgot to script the model fails instead of passing by accident.
 *
 *     const fake = await startFakeAnthropic();
 *     const model = createAnthropicModel({ ...DEFAULTS.llm, model: 'claude-test', baseUrl: fake.baseUrl,
 *       maxRetries: 0, timeoutMs: 2_000 }, { env: {} });          // custom base URL: no key needed
 *     fake.enqueue(
 *       { toolUse: [{ name: 'memory_save', input: { content: 'Ana likes tea', memory_type: 'preference' } }] },
 *       { text: 'Ana said she likes tea.' },
 *       { status: 429 },                                          // an Anthropic-shaped error
 *       { delayMs: 500, then: { text: 'slow' } },                 // dropped cleanly if the client gives up
 *       (request) => ({ text: `echo ${request.body.messages.length}` }),
 *     );
 *     ... fake.requests[0].body.system, fake.requests[0].body.tools, fake.requests[0].headers ...
 *     await fake.close();
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { errorBody, flattenHeaders, parseJson, sendJson } from './http.js';
import { refusalFor } from './limits.js';
import { sendStream, type StreamedMessage } from './streaming.js';
import type { FakeAnthropic, FakeAnthropicOptions, FakeReply, FakeTextReply, FakeToolUseReply, RecordedRequest } from './types.js';

const NO_REPLY_MESSAGE = 'fake-anthropic: no reply queued';

export async function startFakeAnthropic(options: FakeAnthropicOptions = {}): Promise<FakeAnthropic> {
  const requests: RecordedRequest[] = [];
  const queue: FakeReply[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const initialDefault: FakeReply = {
    status: 500,
    message: NO_REPLY_MESSAGE,
    // A missing script is a test bug, not a blip: tell the SDK not to retry it.
    headers: { 'x-should-retry': 'false' },
  };
  let defaultReply: FakeReply = initialDefault;
  let inFlight = 0;
  let maxInFlight = 0;
  let messageCounter = 0;
  let toolCounter = 0;
  let refused = 0;

  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const recorded: RecordedRequest = {
        method: request.method ?? 'GET',
        path: request.url ?? '/',
        headers: flattenHeaders(request.headers),
        body: parseJson(text),
        index: requests.length + 1,
      };
      requests.push(recorded);
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      let finished = false;
      const finish = (): void => {
        if (finished) return;
        finished = true;
        inFlight -= 1;
      };
      // 'close' fires both after a full answer and when the client aborts mid-delay.
      response.on('close', finish);

      if (recorded.method !== 'POST' || !recorded.path.startsWith('/v1/messages')) {
        sendJson(response, 404, errorBody(404, `fake-anthropic: no route ${recorded.method} ${recorded.path}`));
        return;
      }
      const tokens = options.countTokens?.(recorded);
      recorded.inputTokens = tokens;
      const refusal = tokens === undefined ? undefined : refusalFor(tokens, Number(recorded.body?.max_tokens) || 0, options);
      if (refusal) {
        // Refused before any reply is generated: the queued reply stays for the retry.
        refused += 1;
        recorded.refusal = refusal.form;
        sendJson(response, 400, errorBody(400, refusal.message));
        return;
      }
      const cacheProblem = options.promptCache?.problem(recorded.body);
      if (cacheProblem !== undefined) return sendJson(response, 400, errorBody(400, cacheProblem));
      const reply = queue.length > 0 ? queue.shift()! : defaultReply;
      answer(reply, recorded, response).catch((error: unknown) => {
        if (!response.headersSent && !response.destroyed) {
          sendJson(response, 500, errorBody(500, `fake-anthropic: reply failed: ${String(error)}`));
        }
      });
    });
  });

  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  // A client that hangs up mid-request must never take the fake down with it.
  server.on('clientError', (_error, socket) => socket.destroy());

  async function answer(reply: FakeReply, recorded: RecordedRequest, response: http.ServerResponse): Promise<void> {
    if (response.destroyed) return;
    if (typeof reply === 'function') {
      return answer(await reply(recorded), recorded, response);
    }
    if ('delayMs' in reply) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          timers.delete(timer);
          resolve();
        }, reply.delayMs);
        timers.add(timer);
        response.on('close', () => {
          clearTimeout(timer);
          timers.delete(timer);
          resolve();
        });
      });
      return answer(reply.then, recorded, response);
    }
    if ('hangUp' in reply) {
      response.socket?.destroy();
      return;
    }
    if ('raw' in reply) {
      sendJson(response, reply.status ?? 200, reply.raw);
      return;
    }
    if ('status' in reply) {
      const headers: Record<string, string> = {};
      if ([408, 409, 429].includes(reply.status) || reply.status >= 500) headers['retry-after-ms'] = '5';
      Object.assign(headers, reply.headers ?? {});
      const body = reply.body ?? errorBody(reply.status, reply.message ?? `fake-anthropic: status ${reply.status}`);
      sendJson(response, reply.status, body, headers);
      return;
    }
    const body = messageBody(reply, recorded);
    if (recorded.body?.stream === true) {
      await sendStream(response, body as StreamedMessage, reply, timers);
      return;
    }
    sendJson(response, 200, body);
  }

  function messageBody(reply: FakeTextReply | FakeToolUseReply, recorded: RecordedRequest): unknown {
    messageCounter += 1;
    const content: unknown[] = [];
    let stopReason: string;
    if ('toolUse' in reply) {
      if (reply.text) content.push({ type: 'text', text: reply.text });
      for (const call of reply.toolUse) {
        toolCounter += 1;
        content.push({
          type: 'tool_use',
          id: call.id ?? `toolu_fake_${toolCounter}`,
          name: call.name,
          input: call.input,
        });
      }
      stopReason = 'tool_use';
    } else {
      content.push({ type: 'text', text: reply.text });
      stopReason = reply.stopReason ?? 'end_turn';
    }
    const outputText = JSON.stringify(content);
    return {
      id: `msg_fake_${messageCounter}`,
      type: 'message',
      role: 'assistant',
      model: typeof recorded.body?.model === 'string' ? recorded.body.model : 'fake-model',
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage: {
        ...(options.promptCache
          ? options.promptCache.account(recorded.body, reply.usage?.inputTokens ?? recorded.inputTokens)
          : { input_tokens: reply.usage?.inputTokens ?? recorded.inputTokens ?? Math.ceil(JSON.stringify(recorded.body ?? '').length / 4) }),
        output_tokens: reply.usage?.outputTokens ?? Math.ceil(outputText.length / 4),
      },
    };
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    get pending() {
      return queue.length;
    },
    get refusedTooLong() {
      return refused;
    },
    enqueue(...replies: FakeReply[]) {
      queue.push(...replies);
    },
    setDefault(reply: FakeReply) {
      defaultReply = reply;
    },
    reset() {
      queue.length = 0;
      requests.length = 0;
      maxInFlight = inFlight;
      defaultReply = initialDefault;
      refused = 0;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await closed;
    },
  };
}
