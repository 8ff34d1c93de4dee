/**
 * What a delete costs once history holds many tool results: the propagation finds the rows
 * that may quote the message with `instr` in SQLite, instead of parsing every tool row. The
 * reference, measured in the same run, is that full parse of every tool row.
 */
import { HistoryStore } from '../src/channel/history-store.js';
import { estimateEntryTokens } from '../src/context/token-estimate.js';
import type { HistoryEntry } from '../src/context/types.js';
import { redactionTarget, redactToolBlock, DELETED_NOTE } from '../src/privacy/redact.js';
import { median, timeOnce, type BenchReport } from './harness.js';
import { benchConfig, openBenchRuntime } from './compaction-support.js';

const TOOL_ROWS = 20_000;
const SAMPLES = 15;

export async function run(): Promise<BenchReport> {
  const bench = await openBenchRuntime(benchConfig(200_000));
  const { db, runtime } = bench;
  const store = new HistoryStore(db);
  // 20,000 stored memory_search results of five quoted lines each, in another channel.
  await db.transaction(async () => {
    for (let seq = 1; seq <= TOOL_ROWS; seq += 1) {
      const lines = Array.from({ length: 5 }, (_, line) => ({
        content: `bob: note ${seq}-${line} about w${(seq * 7 + line) % 997} and w${(seq * 13 + line) % 991}`,
        score: 0.5,
        kind: 'transcript',
        source_ids: [`o-${seq}-${line}`],
      }));
      const content = JSON.stringify({ type: 'tool_result', tool_use_id: `toolu_${seq}`, content: JSON.stringify(lines) });
      const entry: HistoryEntry = { seq, channelId: 'tools', messageId: `t-${seq}`, kind: 'tool_result', role: 'user', authorId: 'bot', authorName: 'Magpie', content, createdAt: seq, tokens: 0, turnId: seq };
      entry.tokens = estimateEntryTokens(entry);
      await store.insert(entry, {});
    }
  });

  const propagated: number[] = [];
  const fullScan: number[] = [];
  for (let sample = 0; sample < SAMPLES + 2; sample += 1) {
    const text = `the secret of sample ${sample} is kumquat-${sample}`;
    await runtime.ingest({ messageId: `s-${sample}`, channelId: 'chat', authorId: 'u1', authorName: 'alice', role: 'user', content: text, createdAt: sample });
    const elapsed = await timeOnce(() => runtime.deleteMessages('chat', [`s-${sample}`]));
    const target = redactionTarget({ messageIds: [`s-${sample}`], texts: [text, `alice: ${text}`], note: DELETED_NOTE });
    const reference = await timeOnce(async () => {
      for await (const row of db.prepare(`SELECT content FROM history_entries WHERE kind IN ('tool_call', 'tool_result')`).iterate() as AsyncIterableIterator<{ content: string }>) {
        redactToolBlock(row.content, target);
      }
    });
    if (sample >= 2) {
      propagated.push(elapsed);
      fullScan.push(reference);
    }
  }
  await bench.close();
  const delete_ = median(propagated);
  const reference = median(fullScan);
  return {
    name: 'privacy-delete',
    metrics: [
      { name: 'delete with propagation, median', value: delete_, unit: 'ms' },
      { name: 'reference: parse every tool row, median', value: reference, unit: 'ms' },
      { name: 'ratio delete / reference', value: delete_ / reference, unit: 'x' },
    ],
    notes: [`${TOOL_ROWS} stored tool results (memory_search answers of 5 quoted lines), none quoting the deleted message`],
  };
}
