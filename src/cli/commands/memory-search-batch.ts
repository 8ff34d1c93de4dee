import { readFileSync } from 'node:fs';
import { errorMessage, InputError } from '../../common/errors.js';
import { checkId } from '../../common/outside-text.js';
import type { SqlMemoryStore } from '../../memory/sql-memory-store.js';
import type { MemoryKind, MemoryType } from '../../memory/types.js';
import { checkLimit, checkQuery } from '../../memory/validation.js';
import { EXIT, type CliIo } from '../command.js';
import { jsonLine } from '../json-output.js';
import { checkedUtf8Lines, tooLongProblem } from '../utf8-lines.js';

const LINE_SHAPE = '{ "id", "channel", "query", "limit"? }';

/** What a line without its own `channel` or `limit` gets (`--channel`, `--limit`). */
export interface LineDefaults {
  channel: string | undefined;
  limit: number | undefined;
}

/**
 * `memory search --queries`: one answer line per query line, in order. A line that cannot be
 * answered (not UTF-8, not JSON, no id, a bad field) gets `{ line, id?, error }` naming the line
 * and the field, and the others are still answered; a storage failure stops the batch.
 */
export async function runBatch(
  storeFor: (channelId: string) => Promise<SqlMemoryStore>,
  input: AsyncIterable<Buffer | string> | Iterable<Buffer | string>,
  filters: { kind: MemoryKind | undefined; memoryType: MemoryType | undefined },
  defaults: LineDefaults,
  io: CliIo,
): Promise<number> {
  let failed = 0;
  for await (const line of checkedUtf8Lines(input)) {
    let id: unknown;
    try {
      // Refused, as `replay` refuses such a line: a replaced character would search for
      // something the file does not say.
      if ('byteLength' in line) throw new InputError(tooLongProblem(line.byteLength));
      if (!('text' in line)) throw new InputError(`not valid UTF-8 (byte ${line.invalidByte} of the line); save the file as UTF-8`);
      // A byte-order mark (Windows editors) is not part of the first line's JSON.
      const text = (line.lineNumber === 1 ? line.text.replace(/^\uFEFF/, '') : line.text).trim();
      if (text.length === 0) continue;
      const fields = parseLine(text);
      // A number JSON rounded is not echoed: it could be another line's id.
      if (!(typeof fields.id === 'number' && !Number.isSafeInteger(fields.id))) id = fields.id;
      const results = await answer(fields, storeFor, filters, defaults);
      io.stdout.write(jsonLine({ id: fields.id, results }));
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      failed += 1;
      const report: Record<string, unknown> = { line: line.lineNumber };
      if (id !== undefined) report.id = id;
      report.error = `line ${line.lineNumber}: ${error.message}`;
      io.stdout.write(jsonLine(report));
    }
  }
  if (failed > 0) {
    io.stderr.write(`magpie memory search: ${failed} bad query line${failed === 1 ? '' : 's'} (see the error objects)\n`);
    return EXIT.failure;
  }
  return EXIT.ok;
}

function parseLine(text: string): Record<string, unknown> {
  let request: unknown;
  try {
    request = JSON.parse(text);
  } catch {
    throw new InputError('not valid JSON');
  }
  if (typeof request !== 'object' || request === null || Array.isArray(request)) {
    throw new InputError(`expected a JSON object ${LINE_SHAPE}`);
  }
  return request as Record<string, unknown>;
}

async function answer(
  fields: Record<string, unknown>,
  storeFor: (channelId: string) => Promise<SqlMemoryStore>,
  filters: { kind: MemoryKind | undefined; memoryType: MemoryType | undefined },
  defaults: LineDefaults,
): Promise<unknown[]> {
  // The id is what matches an answer to its question: without one the answer could only be
  // matched by position, which a skipped blank line already shifts.
  if (fields.id === undefined) throw new InputError(`"id" is missing; each line is ${LINE_SHAPE}`);
  if (typeof fields.id === 'number' && !Number.isSafeInteger(fields.id)) {
    // Past 2^53 JSON.parse has already rounded it (12345678901234567891 reads as ...7000), so the
    // answer would come back under another id than the one asked.
    throw new InputError(`"id" is a number past 2^53 or not whole (read as ${fields.id}), which JSON readers round; write the id as a string, in quotes`);
  }
  if (!(typeof fields.id === 'string' && fields.id !== '') && typeof fields.id !== 'number') {
    throw new InputError(`"id" must be a non-empty string or a number; got ${JSON.stringify(fields.id)}`);
  }
  if (fields.channel === undefined && defaults.channel === undefined) {
    throw new InputError('"channel" is missing; give it on the line, or --channel for every line without one');
  }
  const channel = fields.channel ?? defaults.channel;
  if (typeof channel !== 'string' || channel.length === 0) {
    throw new InputError('"channel" must be a non-empty string');
  }
  const channelId = checkId(channel, '"channel"');
  const query = checkQuery(fields.query, '"query"');
  const limit = fields.limit === undefined ? defaults.limit : checkLimit(fields.limit, '"limit"');
  const store = await storeFor(channelId);
  return store.search({
    location: { channelId },
    query,
    ...(limit === undefined ? {} : { limit }),
    ...(filters.kind ? { kind: filters.kind } : {}),
    ...(filters.memoryType ? { memoryType: filters.memoryType } : {}),
  });
}

/** The queries file's bytes (decoded line by line, so a line that is not UTF-8 is named). */
export function readQueriesFile(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new InputError(`cannot read queries file ${file}: ${errorMessage(error)}`);
  }
}
