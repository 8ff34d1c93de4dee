import { randomBytes } from 'node:crypto';
import { systemClock, type Clock } from '../common/clock.js';
import type { UserErasure } from '../channel/runtime.js';

/** How long a confirmation code of `/memory forget-me` stays valid. */
export const CONFIRMATION_TTL_MS = 10 * 60_000;

/** What `/memory forget-me` needs of the runtime. */
export interface ErasureRuntime {
  forgetUser(userId: string, requestedFrom: string): Promise<UserErasure>;
}

/**
 * The confirmation step of `/memory forget-me`: the first call hands the user a code, a
 * second call with that code (same user, within ten minutes) erases. One pending code per user.
 */
export class ErasureConfirmations {
  private readonly pending = new Map<string, { code: string; expiresAt: number }>();

  constructor(private readonly clock: Clock = systemClock) {}

  issue(userId: string): string {
    const code = randomBytes(3).toString('hex').toUpperCase();
    this.pending.set(userId, { code, expiresAt: this.clock.now() + CONFIRMATION_TTL_MS });
    return code;
  }

  /** True once, for the user's current code; a wrong code leaves it pending. */
  consume(userId: string, code: string): boolean {
    const entry = this.pending.get(userId);
    if (!entry || entry.expiresAt < this.clock.now()) {
      this.pending.delete(userId);
      return false;
    }
    if (entry.code !== code.trim().toUpperCase()) return false;
    this.pending.delete(userId);
    return true;
  }
}

/** `/memory forget-me [code]`: the asking user's words, in every channel of this data dir. */
export async function forgetMe(
  options: { runtime: ErasureRuntime; confirmations: ErasureConfirmations },
  userId: string,
  code: string | null,
): Promise<string> {
  if (code === null || code.trim() === '') {
    const issued = options.confirmations.issue(userId);
    return (
      'This erases every message you wrote in every channel Magpie keeps, here and elsewhere, and every memory drawn ' +
      `only from them. It cannot be undone. To confirm, run \`/memory forget-me code:${issued}\` within 10 minutes.`
    );
  }
  if (!/^[0-9a-f]{6}$/i.test(code.trim())) return 'That is not a confirmation code (6 letters and digits). Run /memory forget-me without a code to get one.';
  if (!options.confirmations.consume(userId, code)) {
    return 'That code does not match (or has expired). Run /memory forget-me without a code to get a new one.';
  }
  const erased = await options.runtime.forgetUser(userId, 'discord');
  return (
    `Done: erased ${erased.messages} message${erased.messages === 1 ? '' : 's'} in ${erased.channels} channel${erased.channels === 1 ? '' : 's'}, ` +
    `${erased.memoriesDeleted} memor${erased.memoriesDeleted === 1 ? 'y' : 'ies'} drawn only from them, and their quotes in earlier answers.`
  );
}
