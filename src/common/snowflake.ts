/**
 * Discord ids (snowflakes) are unsigned 64-bit integers written in decimal: 1 to 20 digits, below
 * 2^64. "Digits only" alone is not the rule: 26 nines are all digits and no id at all, and
 * Discord answers such an id with an error far from the flag or key that held it.
 */
const SNOWFLAKE_LIMIT = 2n ** 64n;

/** What a snowflake is, for messages that refuse something else. */
export const SNOWFLAKE_RULE = 'a snowflake: 1 to 20 digits, below 2^64 (18446744073709551616)';

/** Why `text` is not a snowflake ("has 26 digits"), or undefined when it is one. */
export function snowflakeProblem(text: string): string | undefined {
  if (text === '') return 'is empty';
  if (!/^\d+$/.test(text)) return 'is not all digits';
  if (text.length > 20) return `has ${text.length} digits`;
  if (BigInt(text) >= SNOWFLAKE_LIMIT) return 'is 2^64 or more';
  return undefined;
}
