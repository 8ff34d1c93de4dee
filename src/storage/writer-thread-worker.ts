/**
 * The writer thread's side (see writer-thread.ts): a connection of its own to one SQLite file,
 * with the writer's settings, that runs each script the main thread sends as one transaction,
 * in the order they arrive, and answers each.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { applyWriterPragmas } from './sqlite-pragmas.js';
import type { ScriptStep } from './sql-client.js';
import type { WriterReply, WriterRequest, WriterThreadData } from './writer-thread.js';

const { file } = workerData as WriterThreadData;
const port = parentPort!;

// Opened at once: a file this thread cannot open fails the thread (the main thread then writes
// on its own connection), not the first group commit.
const db = new Database(file, { fileMustExist: true });
// A reader elsewhere (a CLI command beside the bot) can hold the file for a moment: this thread
// waits for it, not the event loop.
db.pragma('busy_timeout = 5000');
applyWriterPragmas(db);
const statements = new Map<string, Database.Statement>();

function statement(sql: string): Database.Statement {
  let prepared = statements.get(sql);
  if (!prepared) {
    prepared = db.prepare(sql);
    statements.set(sql, prepared);
  }
  return prepared;
}

/** Structured cloning turns a Buffer into a plain Uint8Array; better-sqlite3 binds Buffers. */
function bindable(params: unknown[]): unknown[] {
  return params.map((value) => (value instanceof Uint8Array && !Buffer.isBuffer(value) ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : value));
}

const SKIPPED: Database.RunResult = { changes: 0, lastInsertRowid: 0 };

/** One step's runs, each linked to the run of the step before where the step asks for it. */
function runStep(step: ScriptStep, previous: readonly Database.RunResult[]): Database.RunResult[] {
  const prepared = statement(step.sql);
  return step.paramLists.map((params, index) => {
    let bound = bindable(params);
    if (step.afterRowidsOfPrevious) {
      const before = previous[index];
      if (!before || before.changes === 0) return SKIPPED;
      bound = [before.lastInsertRowid, ...bound];
    }
    const result = prepared.run(...bound);
    if (step.mustChange && result.changes === 0) {
      throw Object.assign(new Error(`run ${index + 1} of a script step changed no row`), { code: 'script_conflict' });
    }
    return result;
  });
}

/**
 * A script's steps in one transaction (BEGIN IMMEDIATE); a throw, or a run that must change a
 * row and did not, rolls all of it back. Nothing but the outcome goes back: cloning a thousand
 * results costs the event loop, and a caller that needs rows reads them on its own connection.
 */
const runScript = db.transaction((steps: ScriptStep[]) => {
  let previous: Database.RunResult[] = [];
  for (const step of steps) previous = runStep(step, previous);
}).immediate;

port.on('message', (request: WriterRequest) => {
  if (request.op === 'stop') {
    // After every script sent before it: messages are taken in order.
    db.close();
    port.close();
    return;
  }
  let reply: WriterReply;
  try {
    runScript(request.steps);
    reply = { id: request.id, ok: true };
  } catch (error) {
    const failure = error as { message?: unknown; code?: unknown };
    reply = {
      id: request.id,
      ok: false,
      message: typeof failure.message === 'string' ? failure.message : String(error),
      ...(typeof failure.code === 'string' ? { code: failure.code } : {}),
    };
  }
  port.postMessage(reply);
});
