/**
 * Key-based redaction (pino `redact`) only catches a secret under a known field name at a known
 * depth. A secret can also arrive inside text: an SDK error message that quotes a header, an
 * `err.cause` chain, a header list, a URL. The values of the secret environment variables are
 * known at start, so every log line is scrubbed of them before it is written.
 */

/** Variables whose values are always treated as secrets (the defaults the config names). */
export const SECRET_ENV_NAMES: readonly string[] = ['DISCORD_TOKEN', 'ANTHROPIC_API_KEY', 'EMBEDDINGS_API_KEY'];

/** Other variables whose name says they hold a secret (a `token_env` pointing elsewhere, say). */
const SECRET_NAME_PATTERN = /(TOKEN|API_?KEY|SECRET|PASSWORD)/i;

/** Shorter values would scrub ordinary words and numbers out of every line. */
const MIN_SECRET_LENGTH = 8;

export const SCRUBBED = '[redacted]';

/** The secret values present in `env`: the named variables plus any whose name looks secret. */
export function secretValuesFrom(env: NodeJS.ProcessEnv, extraNames: readonly string[] = []): string[] {
  const names = new Set([...SECRET_ENV_NAMES, ...extraNames]);
  for (const name of Object.keys(env)) if (SECRET_NAME_PATTERN.test(name)) names.add(name);
  const values = new Set<string>();
  for (const name of names) {
    const value = env[name]?.trim();
    if (value === undefined || value.length < MIN_SECRET_LENGTH) continue;
    values.add(value);
    // In a JSON line a value with quotes or backslashes appears escaped.
    const escaped = JSON.stringify(value).slice(1, -1);
    if (escaped !== value) values.add(escaped);
  }
  // Longest first, so a secret that contains another is replaced whole.
  return [...values].sort((left, right) => right.length - left.length);
}

/** `text` with every occurrence of each secret replaced by `[redacted]`. */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let result = text;
  for (const secret of secrets) {
    if (result.includes(secret)) result = result.split(secret).join(SCRUBBED);
  }
  return result;
}

/** A pino destination that scrubs each line and hands it on. */
export function scrubbingDestination(
  target: { write(chunk: string): unknown },
  secrets: readonly string[],
): { write(chunk: string): boolean } {
  return {
    write(chunk: string): boolean {
      target.write(scrubSecrets(chunk, secrets));
      return true;
    },
  };
}
