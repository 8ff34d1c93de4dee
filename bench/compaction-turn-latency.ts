/**
 * A channel turn's latency with a compaction worker in flight (a summarizer that takes 2 s)
 * against the same turn in a channel with no worker. The turn: ingest a message, build the model
 * request, a fake model answering at once, append the reply, all in the serial queue.
 */
import type { SummarizeRequest } from '../src/compaction/summarizer.js';
import { median, timeOnce, type BenchReport } from './harness.js';
import { benchConfig, fillHistory, openBenchRuntime } from './compaction-support.js';
import type { ChannelRuntime } from '../src/channel/index.js';

const MESSAGES = 2000;

async function turn(runtime: ChannelRuntime, channelId: string, index: number): Promise<void> {
  await runtime.runSerial(channelId, async () => {
    const message = await runtime.ingest({
      messageId: `turn-${index}`,
      channelId,
      authorId: 'u2',
      authorName: 'bob',
      role: 'user',
      content: `Question ${index}: what did we decide about the release on Friday?`,
      createdAt: Date.now(),
    });
    const request = await runtime.buildModelRequest(channelId, { tools: [], maxTokens: 256 });
    const reply = await Promise.resolve(`Answer to ${request.messages.length} messages.`);
    await runtime.appendToTurn(channelId, [{ kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: reply }], message.turnId);
  });
}

export async function run(): Promise<BenchReport> {
  const slowSummarizer = {
    name: 'slow',
    summarize: (request: SummarizeRequest) =>
      new Promise<{ summary: string; memoriesSaved: number }>((resolve) =>
        setTimeout(() => resolve({ summary: `Summary of ${request.entries.length} messages.`, memoriesSaved: 0 }), 2000),
      ),
  };
  const probe = await openBenchRuntime(benchConfig(1));
  const filled = await fillHistory(probe.db, 'probe', MESSAGES);
  await probe.close();
  // Same history in both channels; only the busy one is over its background threshold.
  const busyWindow = Math.floor(filled / 0.81);
  const bench = await openBenchRuntime(benchConfig(busyWindow, { idle: filled * 4 }), { summarizer: slowSummarizer });
  const { runtime } = bench;
  await fillHistory(bench.db, 'busy', MESSAGES);
  await fillHistory(bench.db, 'idle', MESSAGES);
  if ((await runtime.check('busy')) === 'none' || !(await runtime.status('busy')).compactionRunning) throw new Error('no worker started');
  for (let index = 0; index < 20; index += 1) {
    await turn(runtime, 'busy', -index - 1);
    await turn(runtime, 'idle', -index - 1);
  }
  const busy: number[] = [];
  const idle: number[] = [];
  // Alternating which channel goes first removes any bias from the order within a pair.
  for (let index = 0; index < 600 && (await runtime.status('busy')).compactionRunning; index += 1) {
    if (index % 2 === 0) {
      busy.push(await timeOnce(() => turn(runtime, 'busy', index)));
      idle.push(await timeOnce(() => turn(runtime, 'idle', index)));
    } else {
      idle.push(await timeOnce(() => turn(runtime, 'idle', index)));
      busy.push(await timeOnce(() => turn(runtime, 'busy', index)));
    }
  }
  const stillRunning = (await runtime.status('busy')).compactionRunning;
  await bench.close();
  return {
    name: 'compaction-turn-latency',
    metrics: [
      { name: 'turn median, worker in flight', value: median(busy), unit: 'ms' },
      { name: 'turn median, no worker', value: median(idle), unit: 'ms' },
      { name: 'ratio in flight / none', value: median(busy) / median(idle), unit: '×', target: '≤ 1.05' },
      // Pairs run back to back, so their ratio cancels slow phases of the machine.
      { name: 'median of per-pair ratios', value: median(busy.map((time, index) => time / idle[index]!)), unit: '×' },
    ],
    notes: [
      `${busy.length} interleaved turn pairs on ${MESSAGES}-message histories; the worker (2 s) was ${stillRunning ? 'still' : 'no longer'} running at the end`,
    ],
  };
}
