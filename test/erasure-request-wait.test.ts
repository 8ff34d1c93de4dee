/**
 * `magpie memory forget` beside a running bot leaves a request and waits for its outcome. Once
 * the request is committed the bot applies it whatever the command's connection does: a blip
 * while the command waits must not end it with a storage error that reads as if nothing was
 * asked, and a failure to leave the request is not taken for a bot too old to take requests.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { MagpieError } from '../src/common/errors.js';
import { ErasureRequests, requestErasure } from '../src/privacy/erasure-requests.js';
import type { SqlClient, SqlQuery } from '../src/storage/sql-client.js';
import { openTestDatabase } from './support/storage.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-erasure-wait-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** A deadline passed, as the PostgreSQL client reports it (retryable: a new connection follows). */
function timeout(): MagpieError {
  return new MagpieError('storage_timeout', 'PostgreSQL did not answer within 6000 ms (Query read timeout)', { retryable: true });
}

/** `db`, except that statements whose SQL matches `pattern` fail with `failure()` while `failing()` says so. */
function flaky(db: SqlClient, pattern: RegExp, failing: () => boolean, failure: () => Error): SqlClient {
  return new Proxy(db, {
    get(target, key, receiver) {
      if (key !== 'prepare') return Reflect.get(target, key, receiver) as unknown;
      return (sql: string): SqlQuery => {
        const query = target.prepare(sql);
        if (!pattern.test(sql)) return query;
        const fail = async (): Promise<never> => {
          throw failure();
        };
        return new Proxy(query, {
          get(inner, name, innerReceiver) {
            const value = Reflect.get(inner, name, innerReceiver) as unknown;
            if (typeof value !== 'function') return value;
            return (...args: unknown[]) => (failing() ? fail() : (value as (...a: unknown[]) => unknown).apply(inner, args));
          },
        });
      };
    },
  });
}

test('a blip while the command waits: it keeps waiting and reports what the bot did', async () => {
  const db = await openTestDatabase(path.join(root, 'blip'));
  try {
    const bot = new ErasureRequests(db);
    let reads = 0;
    // The command's reads of its request time out twice (a hung server), then answer again.
    const command = flaky(db, /FROM erasure_requests WHERE id = \?/, () => ++reads <= 2, timeout);
    let waiting = true;
    const applying = (async () => {
      while (reads < 3 && waiting) await new Promise((resolve) => setTimeout(resolve, 10));
      const [request] = await bot.pending();
      assert.ok(request, 'the request was left');
      assert.ok(await bot.claim(request.id));
      await bot.finish(request.id, 'done', { forgot: 'message' });
    })();
    const outcome = await requestErasure(command, 'item', 'msg-1', { timeoutMs: 10_000 }).finally(() => (waiting = false));
    await applying;
    assert.equal(outcome?.status, 'done');
    assert.equal(outcome?.result, JSON.stringify({ forgot: 'message' }));
  } finally {
    await db.close();
  }
});

test('reads that keep failing: the timeout says the request stays queued and why its outcome is unknown', async () => {
  const db = await openTestDatabase(path.join(root, 'down'));
  try {
    const command = flaky(db, /FROM erasure_requests WHERE id = \?/, () => true, timeout);
    await assert.rejects(requestErasure(command, 'user', 'u-1', { timeoutMs: 300 }), (error: unknown) => {
      assert.ok(error instanceof MagpieError);
      assert.equal(error.code, 'erasure_timeout');
      assert.match(error.message, /erasure request \d+ within/);
      assert.match(error.message, /could not be read: PostgreSQL did not answer/);
      assert.match(error.hint ?? '', /stays queued/);
      return true;
    });
    assert.equal((await new ErasureRequests(db).pending()).length, 1, 'still queued for the bot');
  } finally {
    await db.close();
  }
});

test('leaving the request fails on a blip: a storage error, not a bot too old for requests', async () => {
  const db = await openTestDatabase(path.join(root, 'submit'));
  try {
    const command = flaky(db, /INSERT INTO erasure_requests/, () => true, timeout);
    await assert.rejects(requestErasure(command, 'item', 'msg-1', { timeoutMs: 1_000 }), (error: unknown) => {
      assert.ok(error instanceof MagpieError);
      assert.equal(error.code, 'erasure_request_failed');
      assert.match(error.message, /could not leave the erasure request for the running bot \(PostgreSQL did not answer/);
      assert.doesNotMatch(`${error.message} ${error.hint}`, /upgrade/);
      return true;
    });
  } finally {
    await db.close();
  }
});

test('a store without the requests table (a bot older than them): refused as unsupported', async () => {
  const db = await openTestDatabase(path.join(root, 'old'));
  try {
    await db.exec('DROP TABLE erasure_claims');
    await db.exec('DROP TABLE erasure_requests');
    await assert.rejects(requestErasure(db, 'item', 'msg-1', { timeoutMs: 1_000 }), (error: unknown) => {
      assert.ok(error instanceof MagpieError);
      assert.equal(error.code, 'erasure_unsupported');
      return true;
    });
  } finally {
    await db.close();
  }
});
