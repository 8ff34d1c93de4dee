import { workerData, type MessagePort } from 'node:worker_threads';
import pg from 'pg';
import { THREAD_ENDED, type BridgeReply, type BridgeRequest, type BridgeSettings } from './bridge-protocol.js';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * The connection thread behind `PgDatabase`: one `pg` client, statements run strictly in the
 * order they arrive. Each reply is posted on the port and then signalled through the shared
 * flag, which is what the caller's thread sleeps on.
 */
const { port, flag, settings } = workerData as { port: MessagePort; flag: SharedArrayBuffer; settings: BridgeSettings };
const signal = new Int32Array(flag);
const BYTEA = 17;

// Integers come back as numbers, as SQLite returns them (timestamps in ms fit in 2^53).
pg.types.setTypeParser(20, (value: string) => Number(value));
pg.types.setTypeParser(1700, (value: string) => Number(value));

const client = new pg.Client({
  connectionString: settings.url,
  application_name: settings.applicationName,
  statement_timeout: settings.statementTimeoutMs,
});
const ready: Promise<void> = (async () => {
  await client.connect();
  const schema = quoteIdentifier(settings.schema);
  await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`).catch((error: { code?: string }) => {
    // Two processes creating the schema at once: the loser sees a unique violation.
    if (error.code !== '23505' && error.code !== '42P06') throw error;
  });
  await client.query(`SET search_path TO ${schema}`);
})();
// An error from a dead connection must not end the thread: the next request reports it, as a
// connection failure (SQLSTATE 08006) when the driver gave it no code of its own.
let lost = false;
client.on('error', () => {
  lost = true;
});
client.on('end', () => {
  lost = true;
});
ready.catch(() => undefined);

// A thread that ends for any reason wakes its caller, which would otherwise sleep until timeout.
process.on('exit', () => {
  Atomics.store(signal, 0, THREAD_ENDED);
  Atomics.notify(signal, 0);
});

let chain: Promise<void> = Promise.resolve();
port.on('message', (request: BridgeRequest) => {
  chain = chain.then(() => handle(request));
});

async function handle(request: BridgeRequest): Promise<void> {
  let reply: DistributiveOmit<BridgeReply, 'id'>;
  try {
    await ready;
    if (request.close) {
      await client.end();
      reply = { ok: true, rows: [], rowCount: 0, fields: [] };
    } else {
      for (const statement of request.prefix) await client.query(statement);
      const result = request.simple
        ? await client.query(request.sql)
        : await client.query({ text: request.sql, values: request.params, ...(request.name ? { name: request.name } : {}) });
      // A multi-statement simple query returns one result per statement: the last one counts.
      const last = Array.isArray(result) ? result[result.length - 1] : result;
      const fields = (last?.fields ?? []) as Array<{ name: string; dataTypeID: number }>;
      const binary = fields.filter((field) => field.dataTypeID === BYTEA).map((field) => field.name);
      reply = {
        ok: true,
        rows: (last?.rows ?? []) as Array<Record<string, unknown>>,
        rowCount: last?.rowCount ?? 0,
        fields: fields.map((field) => field.name),
        ...(binary.length > 0 ? { binary } : {}),
      };
    }
  } catch (error) {
    const failure = error as { message?: string; code?: string; constraint?: string; detail?: string; table?: string };
    if (lost && !failure.code && !request.close) failure.code = '08006';
    reply = {
      ok: false,
      error: {
        message: failure.message ?? String(error),
        ...(failure.code ? { code: failure.code } : {}),
        ...(failure.constraint ? { constraint: failure.constraint } : {}),
        ...(failure.detail ? { detail: failure.detail } : {}),
        ...(failure.table ? { table: failure.table } : {}),
      },
    };
  }
  port.postMessage({ ...reply, id: request.id });
  // The flag holds the id of the newest reply posted: a caller waits for its own id, so a wake-up
  // meant for the previous request (its notify can land after the caller moved on) is not taken
  // for its reply.
  Atomics.store(signal, 0, request.id);
  Atomics.notify(signal, 0);
}

function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
