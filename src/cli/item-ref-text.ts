import type { ItemRef } from '../memory/item-ref.js';
import { terminalSafe } from './terminal-text.js';

/**
 * What `memory forget` did, naming both ids and which one the typed id matched. The platform
 * and channel ids come from the store (as a transcript or Discord gave them), so they are shown
 * as the terminal can take them.
 */
export function describeForgotten(typed: string, ref: ItemRef): string {
  const what = ref.kind === 'memory' ? 'memory' : 'archived message';
  const platform = ref.messageId !== undefined && ref.messageId !== typed.trim() ? ` (message id ${terminalSafe(ref.messageId)})` : '';
  const given = terminalSafe(typed.trim());
  const matched = ref.matched === 'platform message id' ? `'${given}' matched the platform message id` : `'${given}' matched the internal id`;
  return `forgot ${ref.id}: the ${what}${platform} in channel ${terminalSafe(ref.channelId)}; ${matched}`;
}
