import type { Summarizer } from '../compaction/summarizer.js';

/** The placeholders an image or a shown file leaves in a message's text. */
const PLACEHOLDER = /\[(image|file): ([^,\]\n]+)[^\]\n]*\]/g;

/**
 * Makes a summary say which images and files left the live context with the messages it
 * replaces (the model behind the summary may not mention them, and the extractive summarizer
 * never would), so that the channel's model knows they existed and can look for them.
 */
export function withAttachmentNote(summarizer: Summarizer): Summarizer {
  return {
    name: summarizer.name,
    async summarize(request) {
      const result = await summarizer.summarize(request);
      const shared: string[] = [];
      for (const entry of request.entries) {
        if (entry.kind !== 'message') continue;
        for (const match of entry.content.matchAll(PLACEHOLDER)) {
          const [, kind, name] = match;
          shared.push(`${kind} ${name!.trim()} (shared by ${entry.authorName})`);
        }
      }
      if (shared.length === 0) return result;
      return { ...result, summary: `${result.summary.trimEnd()}\n\nShared in these messages: ${shared.join('; ')}.` };
    },
  };
}
