import type { ItemRef } from '../memory/item-ref.js';

/** What `memory forget` did, naming both ids and which one the typed id matched. */
export function describeForgotten(typed: string, ref: ItemRef): string {
  const what = ref.kind === 'memory' ? 'memory' : 'archived message';
  const platform = ref.messageId !== undefined && ref.messageId !== typed.trim() ? ` (message id ${ref.messageId})` : '';
  const matched = ref.matched === 'platform message id' ? `'${typed.trim()}' matched the platform message id` : `'${typed.trim()}' matched the internal id`;
  return `forgot ${ref.id}: the ${what}${platform} in channel ${ref.channelId}; ${matched}`;
}
