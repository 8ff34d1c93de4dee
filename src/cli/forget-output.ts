import type { UserErasure } from '../channel/runtime.js';
import { USER_ERASURE_COUNTS } from '../channel/user-erasure.js';
import type { ItemRef } from '../memory/item-ref.js';
import type { CliIo } from './command.js';
import { jsonLine } from './json-output.js';
import { terminalSafe } from './terminal-text.js';

/**
 * What `magpie memory forget` prints, in text and with --json, whoever applied it: one place,
 * so the command erasing by itself and the running bot erasing for it (see
 * forget-running-bot.ts) print the same shape (docs/json-output.md) and differ only in
 * `applied_by`.
 */

/** Who applied a forget: this command itself, or the running bot that holds the writer lock. */
type AppliedBy = 'command' | 'running_bot';

/** `memory forget ID`: naming both ids, which one the typed id matched, and who applied it. */
export function reportForgotten(io: CliIo, typed: string, ref: ItemRef, appliedBy: AppliedBy, json: boolean): void {
  if (json) {
    io.stdout.write(
      jsonLine({
        forgotten: true,
        id: ref.id,
        kind: ref.kind,
        channelId: ref.channelId,
        messageId: ref.messageId,
        // Named after the field of search results that the typed id equals.
        matched: ref.matched === 'platform message id' ? 'message_id' : 'id',
        appliedBy,
      }),
    );
    return;
  }
  const what = ref.kind === 'memory' ? 'memory' : 'archived message';
  // The platform and channel ids come from the store (as a transcript or Discord gave them),
  // so they are shown as the terminal can take them.
  const given = terminalSafe(typed.trim());
  const platform = ref.messageId !== undefined && ref.messageId !== typed.trim() ? ` (message id ${terminalSafe(ref.messageId)})` : '';
  const matched = ref.matched === 'platform message id' ? `'${given}' matched the platform message id` : `'${given}' matched the internal id`;
  const by = appliedBy === 'running_bot' ? ' (applied by the running bot)' : '';
  io.stdout.write(`forgot ${ref.id}: the ${what}${platform} in channel ${terminalSafe(ref.channelId)}; ${matched}${by}\n`);
}

/** `memory forget --user ID`: the counts (never the user's words), and who applied it. */
export function reportUserErasure(io: CliIo, erased: UserErasure, appliedBy: AppliedBy, json: boolean): void {
  if (json) {
    // The counts are picked by name: a field the bot's answer carries besides them stays out.
    const counts = Object.fromEntries(USER_ERASURE_COUNTS.map((key) => [key, erased[key]]));
    io.stdout.write(jsonLine({ userErased: true, appliedBy, ...counts }));
    return;
  }
  const by = appliedBy === 'running_bot' ? ' through the running bot' : '';
  io.stdout.write(
    `erased ${erased.messages} message(s) in ${erased.channels} channel(s)${by}; ${erased.memoriesDeleted} memor${erased.memoriesDeleted === 1 ? 'y' : 'ies'} deleted, ` +
      `${erased.memoriesUpdated} updated; ${erased.summariesChanged} summar${erased.summariesChanged === 1 ? 'y' : 'ies'} rewritten; ` +
      `${erased.toolEntriesRedacted} tool result(s) redacted\n`,
  );
}
