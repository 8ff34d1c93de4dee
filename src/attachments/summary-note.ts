import type { HistoryEntry } from '../context/types.js';

/**
 * The placeholders a file leaves in a message's text: an image or a text file the model was
 * shown, or a file only named (`[attachment: …]`: not shown, or not resolved yet).
 */
const PLACEHOLDER = /\[(image|file|attachment): ([^,\]\n]+)[^\]\n]*\]/g;

/** How a list of shared files is introduced, in summaries and truncation markers alike. */
export const SHARED_PREFIX = 'Shared in these messages: ';

/** The files a message carried, each as `image chart.png (shared by Ana)`; none for tool traffic. */
export function filesIn(entry: Pick<HistoryEntry, 'kind' | 'content' | 'authorName'>): string[] {
  if (entry.kind !== 'message' || !entry.content.includes('[')) return [];
  const shared: string[] = [];
  for (const match of entry.content.matchAll(PLACEHOLDER)) {
    const [, kind, name] = match;
    shared.push(`${kind === 'image' ? 'image' : 'file'} ${name!.trim()} (shared by ${entry.authorName})`);
  }
  return shared;
}
