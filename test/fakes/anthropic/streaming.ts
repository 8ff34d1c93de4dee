/**
 * A reply as the Messages API streams it (server-sent events: message_start,
 * content_block_start/delta/stop, message_delta, message_stop), paced and broken as the test
 * asks, for requests with `stream: true`.
 */
import type http from 'node:http';
import type { FakeStreaming } from './types.js';

/** The message body that is streamed, as the plain (non-streamed) answer would carry it. */
export interface StreamedMessage {
  id: string;
  model: string;
  content: Array<{ type: string; text?: string; id?: string; name?: string; input?: unknown }>;
  stop_reason: string;
  usage: { input_tokens: number; output_tokens: number };
}

/** One message as the Messages API streams it, with the pacing and breakage asked for. */
export async function sendStream(
  response: http.ServerResponse,
  message: StreamedMessage,
  options: FakeStreaming,
  timers: Set<NodeJS.Timeout>,
): Promise<void> {
  if (response.destroyed) return;
  response.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    'request-id': `req_fake_${Date.now().toString(36)}`,
  });
  const event = (type: string, data: Record<string, unknown>): void => {
    if (!response.destroyed) response.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  };
  const pause = (ms: number): Promise<void> =>
    ms <= 0
      ? Promise.resolve()
      : new Promise((resolve) => {
          const timer = setTimeout(() => {
            timers.delete(timer);
            resolve();
          }, ms);
          timers.add(timer);
        });
  event('message_start', {
    message: {
      id: message.id,
      type: 'message',
      role: 'assistant',
      model: message.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...message.usage, output_tokens: 1 },
    },
  });
  event('ping', {});
  let textDeltas = 0;
  for (const [index, block] of message.content.entries()) {
    if (block.type === 'text') {
      event('content_block_start', { index, content_block: { type: 'text', text: '' } });
      const text = block.text ?? '';
      const chunks = options.chunks ?? splitEvery(text, 40);
      for (const chunk of chunks) {
        await pause(options.chunkDelayMs ?? 0);
        if (response.destroyed) return;
        if (options.breakAfter !== undefined && textDeltas >= options.breakAfter) {
          response.socket?.destroy();
          return;
        }
        if (options.errorAfter !== undefined && textDeltas >= options.errorAfter) {
          event('error', { error: { type: 'overloaded_error', message: 'fake-anthropic: overloaded midway' } });
          response.end();
          return;
        }
        event('content_block_delta', { index, delta: { type: 'text_delta', text: chunk } });
        textDeltas += 1;
      }
      event('content_block_stop', { index });
    } else {
      event('content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
      const json = JSON.stringify(block.input ?? {});
      for (const piece of splitEvery(json, 16)) {
        event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
      }
      event('content_block_stop', { index });
    }
  }
  event('message_delta', { delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: { output_tokens: message.usage.output_tokens } });
  event('message_stop', {});
  response.end();
}

function splitEvery(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let at = 0; at < text.length; at += size) pieces.push(text.slice(at, at + size));
  return pieces;
}
