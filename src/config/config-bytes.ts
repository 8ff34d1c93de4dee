import type { ConfigProblem } from './problems.js';

/**
 * A config file's bytes as text. TOML is UTF-8 by definition, and a file saved in Latin-1 or
 * Windows-1252 ("café" as `caf\xe9`) must not pass: decoded leniently, its bad bytes would
 * become U+FFFD in a system prompt, silently. Read files as bytes and decode them here.
 */
export function decodeConfigBytes(bytes: Uint8Array): { ok: true; text: string } | { ok: false; problem: ConfigProblem } {
  // ignoreBOM keeps a byte-order mark in the text: checkConfigText drops it itself.
  const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  try {
    return { ok: true, text: strict.decode(bytes) };
  } catch {
    return { ok: false, problem: { path: '', message: 'the file is not UTF-8, which TOML requires: save it as UTF-8', line: firstBadLine(bytes) } };
  }
}

/**
 * The 1-based line holding the first byte that is not UTF-8. A newline byte never occurs inside
 * a UTF-8 sequence, so each line can be decoded on its own.
 */
function firstBadLine(bytes: Uint8Array): number {
  const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let start = 0;
  for (let line = 1; ; line += 1) {
    const end = bytes.indexOf(0x0a, start);
    const stop = end < 0 ? bytes.length : end;
    try {
      strict.decode(bytes.subarray(start, stop));
    } catch {
      return line;
    }
    if (end < 0) return line;
    start = end + 1;
  }
}
