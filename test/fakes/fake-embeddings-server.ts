import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the fake answers to one request. */
export type FakeEmbeddingsReply =
  /** Embeds every input deterministically with vectors of this dimension. */
  | { kind: 'vectors'; dimension: number }
  | { kind: 'error'; status: number; body?: string }
  /** Waits this long before answering with vectors (a client timeout gives up first). */
  | { kind: 'delay'; ms: number; dimension: number };

export interface RecordedEmbeddingsRequest {
  model: unknown;
  input: unknown;
  authorization: string | undefined;
}

export interface FakeEmbeddingsServer {
  /** Full URL of the endpoint, `http://127.0.0.1:PORT/v1/embeddings`. */
  url: string;
  requests: RecordedEmbeddingsRequest[];
  enqueue(...replies: FakeEmbeddingsReply[]): void;
  setDefault(reply: FakeEmbeddingsReply): void;
  close(): Promise<void>;
}

/**
 * An OpenAI-compatible `/v1/embeddings` endpoint on loopback. Replies come from a queue, then
 * from the default; with neither, it answers HTTP 501 "not implemented" so no test passes by
 * accident. Vectors are a deterministic function of the input text.
 */
/** `port`: listen there (default: any free port), so a test can point Magpie at it before it is up. */
export async function startFakeEmbeddingsServer(options: { port?: number } = {}): Promise<FakeEmbeddingsServer> {
  const queue: FakeEmbeddingsReply[] = [];
  let fallback: FakeEmbeddingsReply | undefined;
  const requests: RecordedEmbeddingsRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      let body: { model?: unknown; input?: unknown } = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
      } catch {
        response.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"bad json"}');
        return;
      }
      requests.push({ model: body.model, input: body.input, authorization: request.headers.authorization });
      const reply = queue.shift() ?? fallback;
      if (!reply) {
        response.writeHead(501, { 'content-type': 'application/json' }).end('{"error":"not implemented"}');
        return;
      }
      if (reply.kind === 'error') {
        response.writeHead(reply.status, { 'content-type': 'application/json' }).end(reply.body ?? '{"error":"fake failure"}');
        return;
      }
      const send = (): void => {
        if (response.destroyed) return;
        const inputs = Array.isArray(body.input) ? body.input : [body.input];
        const data = inputs.map((text, index) => ({ object: 'embedding', index, embedding: vectorFor(String(text), reply.dimension) }));
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data }));
      };
      if (reply.kind === 'delay') {
        const timer = setTimeout(() => {
          timers.delete(timer);
          send();
        }, reply.ms);
        timers.add(timer);
      } else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/embeddings`,
    requests,
    enqueue: (...replies) => queue.push(...replies),
    setDefault: (reply) => {
      fallback = reply;
    },
    close: async () => {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A deterministic, unnormalized vector: letters of the text spread over the dimensions. */
function vectorFor(text: string, dimension: number): number[] {
  const vector = new Array<number>(dimension).fill(0.01);
  for (let index = 0; index < text.length; index += 1) vector[(text.charCodeAt(index) * 31 + index) % dimension]! += 1;
  return vector;
}
