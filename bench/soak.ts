/**
 * `npm run bench:soak`: 10,000 channels × 100 messages through the real runtime (see
 * soak-run.ts), then a nothing-lost verdict computed from the data. Sizes can be changed:
 *
 *     node --expose-gc dist/bench/soak.js --channels 1000 --messages 100 --cap 500 --search all
 */
import { parseArgs } from 'node:util';
import { runSoak, type SoakOptions } from './soak-run.js';

const MIB = 2 ** 20;

function options(): SoakOptions {
  const { values } = parseArgs({
    options: {
      channels: { type: 'string', default: '10000' },
      messages: { type: 'string', default: '100' },
      cap: { type: 'string', default: '1000' },
      active: { type: 'string', default: '250' },
      window: { type: 'string', default: '1500' },
      'model-share': { type: 'string', default: '0.1' },
      latency: { type: 'string', default: '50' },
      search: { type: 'string', default: 'sample' },
    },
  });
  const number = (name: keyof typeof values, min: number): number => {
    const value = Number(values[name]);
    if (!Number.isFinite(value) || value < min) throw new Error(`--${name} must be a number ≥ ${min}, got '${String(values[name])}'`);
    return value;
  };
  if (values.search !== 'all' && values.search !== 'sample') throw new Error(`--search must be all or sample, got '${values.search}'`);
  return {
    channels: number('channels', 1),
    messagesPerChannel: number('messages', 1),
    maxLoadedChannels: number('cap', 1),
    activeChannels: number('active', 1),
    contextWindow: number('window', 200),
    modelShare: Math.min(1, number('model-share', 0)),
    modelLatencyMs: number('latency', 0),
    search: values.search,
    progress: (line) => process.stdout.write(`${line}\n`),
  };
}

const soak = options();
process.stdout.write(
  `## soak: ${soak.channels} channels × ${soak.messagesPerChannel} messages, window ${soak.contextWindow} tokens, ` +
    `max_loaded_channels ${soak.maxLoadedChannels}, ${soak.activeChannels} channels active at a time, ` +
    `${Math.round(soak.modelShare * 100)}% of channels compacted by a model with ${soak.modelLatencyMs} ms latency\n`,
);
const report = await runSoak(soak);
const { verdict } = report;
const lines = [
  `  messages ingested: ${report.messages} in ${report.ingestSeconds.toFixed(1)} s = ${Math.round(report.messagesPerSecond)} messages/s (each durably committed and searchable before it counts)`,
  `  peak RSS: ${(report.peakRssBytes / MIB).toFixed(0)} MiB (baseline ${(report.baselineRssBytes / MIB).toFixed(0)} MiB); peak loaded channels ${report.peakLoadedChannels} (cap ${soak.maxLoadedChannels})`,
  `  peak RSS while verifying (a memory_search in every channel in turn, ${report.verdict.searched} searches): ${(report.peakRssVerifyBytes / MIB).toFixed(0)} MiB`,
  `  RSS per loaded channel at peak: ${((report.peakRssBytes - report.baselineRssBytes) / Math.max(1, report.peakLoadedChannels) / 1024).toFixed(1)} KiB`,
  `  per idle (unloaded) channel: heap ${report.heapPerIdleChannelBytes.toFixed(0)} bytes, RSS ${report.rssPerIdleChannelBytes.toFixed(0)} bytes (RSS is not returned to the OS at once)`,
  `  compactions triggered by tier: background ${report.tiers.background}, aggressive ${report.tiers.aggressive}, emergency ${report.tiers.emergency}`,
  `  compactions completed: extractive ${report.completed.extractive}, model ${report.completed.model}; failed ${report.failed}`,
  `  nothing lost: ${verdict.ok ? 'YES' : 'NO'} — ${verdict.sent} sent; missing from archive ${verdict.missingFromArchive}, ` +
    `from the searchable transcript ${verdict.missingFromTranscript}; memory_search with its own text: ${verdict.searched - verdict.notFound} of ${verdict.searched} found` +
    `${soak.search === 'sample' ? ' (first, middle and last message of every channel; --search all for every one)' : ''}` +
    `${verdict.examples.length > 0 ? `; e.g. ${verdict.examples.join(', ')}` : ''} (checked in ${report.verifySeconds.toFixed(1)} s)`,
];
process.stdout.write(`${lines.join('\n')}\n`);
process.exitCode = verdict.ok ? 0 : 1;
