import type { SearchResult } from '../../memory/types.js';
import { terminalSafe } from '../terminal-text.js';

/**
 * Search results as the terminal shows them: score, kind, id, then the text indented. Every
 * stored string goes through `terminalSafe`, so a result is exactly its lines: a newline or an
 * escape sequence written in a message cannot forge another result line or reach the terminal.
 */
export function formatResults(results: SearchResult[]): string {
  if (results.length === 0) return '(no results)\n';
  return results
    .map((result, position) => {
      const label = result.kind === 'memory' ? `memory/${result.memory_type}` : 'transcript';
      const sources = result.source_ids.length > 0 ? `  sources ${result.source_ids.map(terminalSafe).join(', ')}` : '';
      if (result.kind === 'transcript' && result.message_id !== undefined) {
        // Named by its platform message id, as people know it; the archive's own id is what
        // `memory forget` takes.
        const header = `${position + 1}. ${result.score.toFixed(3)}  ${label}  message ${terminalSafe(result.message_id)}  ${result.created_at}${sources}  (forget: ${result.id})`;
        return `${header}\n${transcriptLines(result)}\n`;
      }
      return `${position + 1}. ${result.score.toFixed(3)}  ${label}  ${result.id}  ${result.created_at}${sources}\n${indented(result.content)}\n`;
    })
    .join('');
}

/** One indented line: the text's own newlines are shown as `⏎`, never started as lines. */
function indented(text: string): string {
  return `   ${terminalSafe(text)}`;
}

/** The matched message and its neighbours, one labelled line each, in the order they were written. */
function transcriptLines(result: SearchResult): string {
  const neighbors = result.neighbors ?? [];
  const line = (label: string, id: string, author: string, at: string, text: string): string =>
    indented(`${label.padEnd(6)} ${id}  ${at}  ${author}: ${text}`);
  const matchText = result.author && result.content.startsWith(`${result.author}: `) ? result.content.slice(result.author.length + 2) : result.content;
  return [
    ...neighbors.filter((item) => item.position === 'before').map((item) => line('before', item.message_id, item.author, item.created_at, item.content)),
    line('match', result.message_id ?? '', result.author ?? '', result.created_at, matchText),
    ...neighbors.filter((item) => item.position === 'after').map((item) => line('after', item.message_id, item.author, item.created_at, item.content)),
  ].join('\n');
}
