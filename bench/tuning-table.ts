/**
 * Replays one transcript under each compaction preset of `deploy/presets/` and prints the
 * README's tuning table (markdown), then writes one report comparing them all:
 *
 *   node dist/bench/generate-transcript.js --messages 20000 --channels 2 --out bench-data/long.jsonl
 *   node dist/bench/tuning-table.js bench-data/long.jsonl --context-window 8000 --worker-lag 30 --out-dir bench-data/runs
 *
 * Each run is a real `magpie replay --json` process into its own data dir (removed first).
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const PRESETS = ['default', 'conservative', 'aggressive'];
const MAIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

const { values, positionals } = parseArgs({
  options: {
    'context-window': { type: 'string', default: '8000' },
    'worker-lag': { type: 'string', default: '30' },
    'out-dir': { type: 'string', default: 'bench-data/runs' },
  },
  allowPositionals: true,
});
const transcript = positionals[0];
if (transcript === undefined) {
  process.stderr.write('usage: node dist/bench/tuning-table.js TRANSCRIPT.jsonl [--context-window N] [--worker-lag N] [--out-dir DIR]\n');
  process.exit(2);
}
const outDir = resolve(values['out-dir']!);
const rows: string[] = [];
for (const preset of PRESETS) {
  const dataDir = join(outDir, preset);
  rmSync(dataDir, { recursive: true, force: true });
  const args = [MAIN, 'replay', transcript, '--data-dir', dataDir, '--config', join(ROOT, 'deploy', 'presets', `${preset}.toml`)];
  args.push('--context-window', values['context-window']!, '--worker-lag', values['worker-lag']!, '--json');
  const run = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 30, env: { ...process.env, MAGPIE_PROGRESS: '0' } });
  if (run.status !== 0) {
    process.stderr.write(run.stderr);
    process.exit(1);
  }
  const summary = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, any>;
  rows.push(
    `| ${preset} | ${summary.tiers.background} | ${summary.tiers.aggressive} | ${summary.tiers.emergency} | ${summary.compactions_completed} | ` +
      `${summary.tokens_freed.toLocaleString('en-US')} | ${summary.live_messages} | ${summary.messages_under_summaries.toLocaleString('en-US')} | ` +
      `${summary.messages_under_markers.toLocaleString('en-US')} |`,
  );
  process.stderr.write(`${preset}: done in ${(summary.duration_ms / 1000).toFixed(1)} s\n`);
}
const report = join(outDir, 'presets.html');
const compare = PRESETS.slice(1).flatMap((preset) => ['--compare', join(outDir, preset)]);
const made = spawnSync(process.execPath, [MAIN, 'report', '--data-dir', join(outDir, PRESETS[0]!), ...compare, '--out', report], { encoding: 'utf8' });
if (made.status !== 0) process.stderr.write(made.stderr);
process.stdout.write(
  [
    '| preset | background | aggressive | emergency | summaries written | tokens freed | live at the end | under summaries | behind markers |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `report: ${report}`,
    '',
  ].join('\n'),
);
