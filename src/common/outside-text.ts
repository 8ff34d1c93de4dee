import { InputError } from './errors.js';

/**
 * Text from outside (Discord, the terminal, a transcript, a queries file, a model's tool input)
 * on its way into the runtime or the store. PostgreSQL `text` cannot hold U+0000 at all (error
 * 22021) while SQLite stores it, so without one rule a message kept on one backend would stop a
 * replay or a batch on the other. The rule, the same on both:
 *
 * - free text (message content, author names, queries, memories, personas) keeps every
 *   character but U+0000, which becomes U+FFFD: nothing Discord can send is refused;
 * - ids (channels, messages, authors, guilds) are compared and looked up exactly, so a changed
 *   character would make another id: an id holding a control character is refused instead.
 */

/** What U+0000 becomes in free text: the replacement character, as for bytes that are not UTF-8. */
const NUL_REPLACEMENT = '\uFFFD';

/** Free text with every U+0000 replaced by U+FFFD (the same string when it has none). */
export function withoutNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', NUL_REPLACEMENT) : text;
}

// C0 controls, DEL and C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** The first control character of `text` (C0, DEL or C1) and where it is, or undefined. */
function controlCharacterIn(text: string): { codePoint: string; position: number } | undefined {
  const match = CONTROL.exec(text);
  if (!match) return undefined;
  return { codePoint: `U+${match[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`, position: match.index + 1 };
}

/**
 * Why an id cannot be used, or undefined when it can: "holds a control character (U+0000 at
 * character 4)". For callers that word their own errors (a transcript line).
 */
export function idProblem(value: string): string | undefined {
  const found = controlCharacterIn(value);
  return found ? `holds a control character (${found.codePoint} at character ${found.position}); ids cannot contain control characters` : undefined;
}

/** The id itself, or an InputError naming the field when it holds a control character. */
export function checkId(value: string, field: string): string {
  const problem = idProblem(value);
  if (problem) throw new InputError(`${field} ${problem}`, { context: { field } });
  return value;
}
