/** What a context-overflow refusal says about the request it refused. */
export interface OverflowNumbers {
  /** The request's input, as the server counted it. */
  tokens?: number;
  /** The window the server enforces. */
  maximum?: number;
  /** The `max_tokens` the request asked for, when the refusal counted it in. */
  answerTokens?: number;
}

const NUMBER = String.raw`(\d[\d,]*)`;
/** "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, ..." */
const INPUT_PLUS_ANSWER = new RegExp(`${NUMBER}\\s*\\+\\s*${NUMBER}\\s*>\\s*${NUMBER}`);
/** "prompt is too long: 210345 tokens > 200000 maximum" */
const INPUT_ALONE = new RegExp(`${NUMBER}\\s*tokens?\\s*>\\s*${NUMBER}`, 'i');

/**
 * The numbers of a context-overflow refusal, in either of the forms Anthropic's API words it:
 * the input alone over the window, or input and `max_tokens` together over it. Empty when the
 * message carries none (a 413, another server's wording).
 */
export function overflowNumbers(message: string): OverflowNumbers {
  const sum = INPUT_PLUS_ANSWER.exec(message);
  if (sum) {
    return { ...positive('tokens', sum[1]!), ...positive('answerTokens', sum[2]!), ...positive('maximum', sum[3]!) };
  }
  const alone = INPUT_ALONE.exec(message);
  if (!alone) return {};
  return { ...positive('tokens', alone[1]!), ...positive('maximum', alone[2]!) };
}

function positive(key: keyof OverflowNumbers, digits: string): OverflowNumbers {
  const value = Number(digits.replace(/,/g, ''));
  return Number.isFinite(value) && value > 0 ? { [key]: value } : {};
}
