import { InputError } from '../common/errors.js';

/**
 * The longest line read, in bytes (16 MiB): hundreds of times the longest Discord message, and
 * beyond a text file the bot inlines at the largest `max_attachment_chars`. A longer line is
 * refused by its number and length, counted without being kept: read whole, it could exceed
 * what one JavaScript string can hold (about 512 million characters) and end the process.
 */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;

export interface Utf8LinesOptions {
  /** Decode invalid bytes as U+FFFD instead of refusing the line. */
  acceptInvalid?: boolean;
  /** Told about each line that held invalid UTF-8 (when accepted). */
  onInvalid?: (lineNumber: number) => void;
}

/**
 * Splits a byte stream into lines and decodes each strictly as UTF-8: a line with invalid bytes
 * throws an InputError naming the line (a silently replaced character would change what a user
 * wrote), unless `acceptInvalid`. A line over MAX_LINE_BYTES throws, whatever its bytes. Lines
 * end at LF; a CR before it is dropped.
 */
export async function* utf8Lines(input: AsyncIterable<Buffer | string>, options: Utf8LinesOptions = {}): AsyncGenerator<string> {
  const lenient = new TextDecoder('utf-8', { ignoreBOM: true });
  for await (const line of checkedUtf8Lines(input)) {
    if ('text' in line) {
      yield line.text;
      continue;
    }
    if ('byteLength' in line) {
      throw new InputError(`transcript line ${line.lineNumber}: ${tooLongProblem(line.byteLength)}`, {
        context: { line: line.lineNumber, bytes: line.byteLength },
        hint: 'a line is one message: split the text over several lines, or leave it out',
      });
    }
    if (!options.acceptInvalid) {
      throw new InputError(`transcript line ${line.lineNumber}: is not valid UTF-8 (byte ${line.invalidByte} of the line)`, {
        context: { line: line.lineNumber },
        hint: 'save the transcript as UTF-8, or pass --accept-invalid-utf8 to replace bad bytes with U+FFFD',
      });
    }
    options.onInvalid?.(line.lineNumber);
    yield lenient.decode(line.bytes);
  }
}

/** "is 16777300 bytes long; the limit is 16777216 bytes (16 MiB)": the words both readers use. */
export function tooLongProblem(byteLength: number): string {
  return `is ${byteLength} bytes long; the limit is ${MAX_LINE_BYTES} bytes (${MAX_LINE_BYTES / 1024 / 1024} MiB)`;
}

/**
 * One line of a byte stream: its text; or (not UTF-8) its bytes and its first bad byte (1-based);
 * or (over MAX_LINE_BYTES) only its length in bytes.
 */
export type CheckedLine =
  | { lineNumber: number; text: string }
  | { lineNumber: number; bytes: Buffer; invalidByte: number }
  | { lineNumber: number; byteLength: number };

/**
 * The lines of a byte stream, each decoded strictly as UTF-8 or reported as not UTF-8 or too
 * long, so a reader that answers line by line (`memory search --queries`) can refuse one line
 * and go on. Lines end at LF; a CR before it is dropped.
 */
export async function* checkedUtf8Lines(input: AsyncIterable<Buffer | string> | Iterable<Buffer | string>): AsyncGenerator<CheckedLine> {
  const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let lineNumber = 0;
  const decode = (bytes: Buffer): CheckedLine => {
    const line = bytes.length > 0 && bytes[bytes.length - 1] === 0x0d ? bytes.subarray(0, bytes.length - 1) : bytes;
    try {
      return { lineNumber, text: strict.decode(line) };
    } catch (error) {
      // Only the decoder's own verdict means "not UTF-8"; anything else is no fault of the file.
      if ((error as { code?: string }).code !== 'ERR_ENCODING_INVALID_ENCODED_DATA') throw error;
      return { lineNumber, bytes: line, invalidByte: firstInvalidByte(line) + 1 };
    }
  };
  // Pieces of the line still open; joined once its end arrives, so a long line costs O(length).
  // Past MAX_LINE_BYTES they are dropped and only counted.
  let open: Buffer[] = [];
  let openBytes = 0;
  let overLimit = false;
  const add = (piece: Buffer): void => {
    openBytes += piece.length;
    if (!overLimit && openBytes > MAX_LINE_BYTES) {
      overLimit = true;
      open = [];
    }
    if (!overLimit) open.push(piece);
  };
  const close = (): CheckedLine => {
    lineNumber += 1;
    const line = overLimit ? { lineNumber, byteLength: openBytes } : decode(open.length === 1 ? open[0]! : Buffer.concat(open));
    open = [];
    openBytes = 0;
    overLimit = false;
    return line;
  };
  for await (const chunk of input) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let start = 0;
    let newline = bytes.indexOf(0x0a);
    while (newline >= 0) {
      add(bytes.subarray(start, newline));
      yield close();
      start = newline + 1;
      newline = bytes.indexOf(0x0a, start);
    }
    if (start < bytes.length) add(bytes.subarray(start));
  }
  if (openBytes > 0) yield close();
}

/** Position (0-based) of the first byte that starts an invalid UTF-8 sequence. */
export function firstInvalidByte(bytes: Uint8Array): number {
  let index = 0;
  while (index < bytes.length) {
    const lead = bytes[index]!;
    let length: number;
    let min: number;
    if (lead < 0x80) {
      index += 1;
      continue;
    } else if (lead >= 0xc2 && lead <= 0xdf) [length, min] = [2, 0x80];
    else if (lead >= 0xe0 && lead <= 0xef) [length, min] = [3, 0x800];
    else if (lead >= 0xf0 && lead <= 0xf4) [length, min] = [4, 0x10000];
    else return index;
    if (index + length > bytes.length) return index;
    let code = lead & (0xff >> (length + 1));
    for (let offset = 1; offset < length; offset += 1) {
      const next = bytes[index + offset]!;
      if ((next & 0xc0) !== 0x80) return index;
      code = (code << 6) | (next & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    if (code < min || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return index;
    index += length;
  }
  return bytes.length;
}
