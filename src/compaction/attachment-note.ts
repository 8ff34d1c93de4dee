import { filesIn, SHARED_PREFIX } from '../attachments/summary-note.js';
import type { Summarizer } from './summarizer.js';

/**
 * Makes a summary say which images and files left the live context with the messages it
 * replaces (the model behind the summary may not mention them, and the extractive summarizer
 * never would), so that the channel's model knows they existed and can look for them.
 */
export function withAttachmentNote(summarizer: Summarizer): Summarizer {
  return {
    name: summarizer.name,
    ...(summarizer.boundedByWindow ? { boundedByWindow: true } : {}),
    async summarize(request) {
      const result = await summarizer.summarize(request);
      const shared = request.entries.flatMap(filesIn);
      if (shared.length === 0) return result;
      return { ...result, summary: `${result.summary.trimEnd()}\n\n${SHARED_PREFIX}${shared.join('; ')}.` };
    },
  };
}
