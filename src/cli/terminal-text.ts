/**
 * Stored text (messages, author names, memories, personas, channel ids) as a terminal may print
 * it. That text was written by anyone in a channel: printed raw, a newline in it forges a line of
 * the output (an extra `match` result), and escape sequences recolour the terminal, set its
 * title or move the cursor. Every control character is therefore shown as a visible symbol, one
 * column wide, that does nothing: `--json` output stays exact; this is only for text output.
 *
 * - C0 controls as their Unicode control pictures (ESC as `␛`, CR as `␍`, TAB as `␉`), newline
 *   as `⏎`, DEL as `␡`;
 * - C1 controls (U+0080–U+009F, which some terminals obey like ESC sequences), the bidi
 *   embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069, which reorder what
 *   follows, so a line can read differently from what it holds) and the line and paragraph
 *   separators (U+2028, U+2029) as `<U+XXXX>`.
 */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, visible);
}

/**
 * The same for text meant to be read as several lines (a reply, a persona): newlines and tabs
 * are kept, every other control character is shown as `terminalSafe` shows it.
 */
export function terminalSafeLines(text: string): string {
  return text.replace(UNSAFE_IN_LINES, visible);
}

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_IN_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function visible(character: string): string {
  const code = character.charCodeAt(0);
  if (code === 0x0a) return '⏎';
  if (code < 0x20) return String.fromCharCode(0x2400 + code);
  if (code === 0x7f) return '␡';
  return `<U+${code.toString(16).toUpperCase().padStart(4, '0')}>`;
}
