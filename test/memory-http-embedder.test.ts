import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import type { HttpEmbedderSettings } from '../src/config/types.js';
import { EmbeddingError, HttpEmbedder, openMemoryStore } from '../src/memory/index.js';
import { startFakeEmbeddingsServer, type FakeEmbeddingsServer } from './fakes/fake-embeddings-server.js';
import { openTestDatabase } from './support/storage.js';

describe('HTTP embedder against an OpenAI-compatible endpoint on loopback', () => {
  let server: FakeEmbeddingsServer;
  let settings: HttpEmbedderSettings;

  before(async () => {
    server = await startFakeEmbeddingsServer();
  });
  after(async () => server.close());
  beforeEach(() => {
    server.requests.length = 0;
    server.setDefault({ kind: 'vectors', dimension: 16 });
    settings = { ...DEFAULTS.memory.http, url: server.url, model: 'fake-embed', dimension: 16, batchSize: 2, timeoutMs: 2000, maxRetries: 2 };
  });

  const embedder = (overrides: Partial<HttpEmbedderSettings> = {}) =>
    new HttpEmbedder({ settings: { ...settings, ...overrides }, env: { TEST_EMBED_KEY: 'sekrit' }, backoffMs: () => 5 });

  test('batches by batchSize, sends the model and the key, returns unit vectors in order', async () => {
    const vectors = await embedder({ apiKeyEnv: 'TEST_EMBED_KEY' }).embed(['one', 'two', 'three']);
    assert.equal(vectors.length, 3);
    assert.equal(server.requests.length, 2);
    assert.deepEqual(server.requests[0]!.input, ['one', 'two']);
    assert.deepEqual(server.requests[1]!.input, ['three']);
    assert.equal(server.requests[0]!.model, 'fake-embed');
    assert.equal(server.requests[0]!.authorization, 'Bearer sekrit');
    for (const vector of vectors) {
      assert.equal(vector.length, 16);
      const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
      assert.ok(Math.abs(norm - 1) < 1e-5);
    }
    assert.notDeepEqual(vectors[0], vectors[1]);
  });

  test('no key header when the named variable is unset', async () => {
    await embedder({ apiKeyEnv: 'UNSET_VARIABLE_FOR_TEST' }).embed(['x']);
    assert.equal(server.requests[0]!.authorization, undefined);
  });

  test('a 500 then success is retried', async () => {
    server.enqueue({ kind: 'error', status: 500 }, { kind: 'error', status: 429 });
    const vectors = await embedder().embed(['retry me']);
    assert.equal(vectors.length, 1);
    assert.equal(server.requests.length, 3);
  });

  test('gives up after maxRetries, keeping the status', async () => {
    server.setDefault({ kind: 'error', status: 503 });
    await assert.rejects(embedder({ maxRetries: 1 }).embed(['x']), (error: unknown) => {
      assert.ok(error instanceof EmbeddingError);
      assert.match(error.message, /HTTP 503.*after 2 attempts/);
      assert.equal(error.context.status, 503);
      return true;
    });
    assert.equal(server.requests.length, 2);
  });

  test('a 400 is not retried', async () => {
    server.enqueue({ kind: 'error', status: 400, body: '{"error":"bad model"}' });
    await assert.rejects(embedder().embed(['x']), /HTTP 400.*bad model/);
    assert.equal(server.requests.length, 1);
  });

  test('a request slower than timeoutMs times out (and is retried)', async () => {
    // Generous enough that the quick retry fits on a loaded machine.
    server.enqueue({ kind: 'delay', ms: 10_000, dimension: 16 });
    const vectors = await embedder({ timeoutMs: 1_500 }).embed(['slow']);
    assert.equal(vectors.length, 1);
    assert.equal(server.requests.length, 2);
    server.setDefault({ kind: 'delay', ms: 1500, dimension: 16 });
    await assert.rejects(embedder({ timeoutMs: 100, maxRetries: 0 }).embed(['slow']), /timed out after 100 ms/);
  });

  test('a wrong dimension is refused with a clear error', async () => {
    server.setDefault({ kind: 'vectors', dimension: 12 });
    await assert.rejects(embedder().embed(['x']), /dimension 12, but memory.http.dimension is 16/);
  });

  test('the store works on the HTTP embedder, and switching to it rebuilds the vectors', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
    const db = await openTestDatabase(dir);
    try {
      const hashStore = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory });
      await hashStore.archiveTranscript([
        { channelId: 'h', messageId: '1', authorId: 'a', authorName: 'Ivy', content: 'the boiler needs servicing in May', createdAt: 1 },
      ]);
      await hashStore.close();
      const memory = { ...DEFAULTS.memory, embedder: 'http' as const, http: settings };
      const httpStore = await openMemoryStore({ db, dataDir: dir, settings: memory });
      assert.equal((await httpStore.stats()).embedder, 'http:fake-embed');
      assert.ok(server.requests.length >= 1, 'existing text was re-embedded');
      const results = await httpStore.search({ location: { channelId: 'h' }, query: 'boiler servicing' });
      assert.ok(results[0]!.source_ids.includes('1'));
      await httpStore.close();
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
