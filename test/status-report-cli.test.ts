/** `magpie status`, `magpie report` and `replay --report` as real processes, reading the compaction log. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { formatDuration, progressLine } from '../src/cli/progress.js';
import { CompactionLog } from '../src/compaction-log/index.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { generateTranscript, openHarness, tempDir, TickingClock, userMessage } from './compaction-support.js';
import { MAGPIE_MAIN, magpieEnv, type MagpieRun, runMagpie } from './support/magpie-process.js';
import { TEST_STORAGE } from './support/storage.js';

const ENV = { ...process.env, MAGPIE_DATA_DIR: '', MAGPIE_PROGRESS: '' };

function magpie(args: string[], cwd: string, env: NodeJS.ProcessEnv = ENV): Promise<MagpieRun> {
  return runMagpie(args, { cwd, env });
}

function jsonLines(stdout: string): Array<Record<string, unknown>> {
  return stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The markers of each channel's chart(s), by channel id, read from the HTML. */
function markersByChannel(html: string): Map<string, number[]> {
  const result = new Map<string, number[]>();
  for (const section of html.split('<section class="channel"').slice(1)) {
    const channel = /data-channel="([^"]+)"/.exec(section)![1]!;
    const figures = section.split('<figure class="run-chart"').slice(1);
    result.set(channel, figures.map((figure) => (figure.match(/<g class="marker"/g) ?? []).length));
  }
  return result;
}

test('replay --report, then status and report read the same compaction log; replay numbers add up', async () => {
  const dir = tempDir();
  const transcript = join(dir.path, 't.jsonl');
  writeFileSync(transcript, generateTranscript(300));
  const first = join(dir.path, 'small-window');
  const replay = await magpie(['replay', transcript, '--data-dir', first, '--context-window', '2000', '--worker-lag', '5', '--json', '--report', 'first.html'], dir.path);
  assert.equal(replay.code, 0, replay.stderr);
  assert.doesNotMatch(replay.stderr, /replay: \d/, 'no progress line when stderr is not a terminal');
  assert.match(replay.stderr, /report written to .*first\.html/);
  const events = jsonLines(replay.stdout);
  const summary = events.at(-1)!;
  // Where the messages are now adds up to what was replayed; the flow numbers explain it.
  assert.equal(summary.archived_messages, 300);
  assert.equal(Number(summary.live_messages) + Number(summary.messages_under_summaries) + Number(summary.messages_under_markers), 300);
  assert.equal(summary.messages_left_context, 300 - Number(summary.live_messages));
  assert.equal(
    Number(summary.messages_compacted) + Number(summary.messages_truncated) - Number(summary.messages_resummarized),
    summary.messages_left_context,
  );
  for (const key of ['messages', 'channels', 'tiers', 'compactions_completed', 'messages_compacted', 'messages_truncated']) assert.ok(key in summary, key);

  const perChannel = (channel: string, type: string, tier?: string) =>
    events.filter((event) => event.channel_id === channel && event.type === type && (tier === undefined || event.tier === tier));

  // The report: one chart per channel, one marker per summary landed or truncation.
  const html = readFileSync(join(dir.path, 'first.html'), 'utf8');
  const markers = markersByChannel(html);
  assert.deepEqual([...markers.keys()], ['chan-0', 'chan-1']);
  for (const channel of ['chan-0', 'chan-1']) {
    const expected = perChannel(channel, 'compaction_completed').length + perChannel(channel, 'emergency_truncation').length;
    assert.ok(expected > 0);
    assert.deepEqual(markers.get(channel), [expected], channel);
  }
  assert.doesNotMatch(html, /<script|<link|src=|href=|url\(/i, 'self-contained: nothing to fetch');
  assert.match(html, /class="threshold" data-tier="emergency"/);
  assert.match(html, /<code>background_threshold<\/code><\/th><td>0\.8<\/td>/);

  // status --json: the state of each channel, and the last compaction the log holds.
  const status = await magpie(['status', '--data-dir', first, '--json'], dir.path);
  assert.equal(status.code, 0, status.stderr);
  const parsed = JSON.parse(status.stdout) as { channels: Array<Record<string, any>> };
  assert.deepEqual(parsed.channels.map((channel) => channel.channel_id), ['chan-0', 'chan-1']);
  for (const channel of parsed.channels) {
    const id = channel.channel_id as string;
    assert.equal(channel.archived_messages, 150);
    assert.equal(channel.live_messages + channel.messages_under_summaries + channel.messages_under_markers, 150);
    assert.equal(channel.context_window, 2000, 'the window the replay ran with, from the log');
    assert.equal(channel.settings_from, 'compaction_log');
    assert.equal(channel.logged.background, perChannel(id, 'compaction_triggered', 'background').length);
    assert.equal(channel.logged.aggressive, perChannel(id, 'compaction_triggered', 'aggressive').length);
    assert.equal(channel.logged.emergency, perChannel(id, 'emergency_truncation').length);
    const landed = events.filter((event) => event.channel_id === id && (event.type === 'compaction_completed' || event.type === 'emergency_truncation')).at(-1)!;
    assert.equal(channel.last_compaction.tier, landed.type === 'emergency_truncation' ? 'emergency' : landed.tier);
    assert.equal(channel.last_compaction.tokens_freed, landed.tokens_freed);
    assert.ok(channel.usage > 0 && channel.estimated_tokens > 0);
    // Transcript times are from 2025: nothing happened in the last 24 hours.
    assert.equal(channel.last_day.background, 0);
  }
  const table = await magpie(['status', '--data-dir', first, '--channel', 'chan-1'], dir.path);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /chan-1 +\d+\.\d%/);
  assert.doesNotMatch(table.stdout, /chan-0/);

  // Compared runs are SQLite data dirs (replays): on PostgreSQL there is none to compare.
  if (TEST_STORAGE === 'sqlite') {
    // A second setting on the same transcript, compared in one report.
    writeFileSync(join(dir.path, 'calm.toml'), '[defaults.compaction]\nbackground_threshold = 0.6\naggressive_threshold = 0.7\n');
    const second = join(dir.path, 'calm');
    const calm = await magpie(['replay', transcript, '--data-dir', second, '--config', 'calm.toml', '--context-window', '2000', '--json', '--report', 'both.html', '--compare', first], dir.path);
    assert.equal(calm.code, 0, calm.stderr);
    const compared = readFileSync(join(dir.path, 'both.html'), 'utf8');
    const calmEvents = jsonLines(calm.stdout);
    for (const [channel, counts] of markersByChannel(compared)) {
      const calmMarkers = calmEvents.filter((event) => event.channel_id === channel && (event.type === 'compaction_completed' || event.type === 'emergency_truncation')).length;
      assert.deepEqual(counts, [calmMarkers, markers.get(channel)![0]], `${channel}: this run first, then the compared one`);
    }
    assert.match(compared, /<th>difference<\/th>/);
    assert.match(compared, /<caption class="difference">difference = \S+ − \S+ \(second run minus first\)<\/caption>/, 'the difference says what it is where it is shown');
    assert.match(compared, /<tr class="differs"><th scope="row"><code>background_threshold<\/code><\/th><td>0\.6<\/td><td>0\.8<\/td>/);

    // magpie report on two data dirs gives the same comparison, in the order given.
    const report = await magpie(['report', '--data-dir', first, '--compare', second, '--out', 'again.html'], dir.path);
    assert.equal(report.code, 0, report.stderr);
    assert.match(report.stderr, /small-window: 2 channel\(s\)/);
    const again = markersByChannel(readFileSync(join(dir.path, 'again.html'), 'utf8'));
    for (const [channel, counts] of again) assert.deepEqual(counts, [...markersByChannel(compared).get(channel)!].reverse());
  }
  const one = await magpie(['report', '--data-dir', first, '--channel', 'chan-0', '--out', '-'], dir.path);
  assert.equal(one.code, 0, one.stderr);
  assert.deepEqual([...markersByChannel(one.stdout).keys()], ['chan-0']);
  dir.remove();
});

test('status and report refuse bad input with a clear message', async () => {
  const dir = tempDir();
  const transcript = join(dir.path, 't.jsonl');
  writeFileSync(transcript, generateTranscript(20));
  const data = join(dir.path, 'data');
  assert.equal((await magpie(['replay', transcript, '--data-dir', data], dir.path)).code, 0);
  const cases: Array<[string[], number, RegExp]> = [
    [['report', '--data-dir', data], 2, /missing required option --out/],
    [['report', '--data-dir', data, '--out', 'x.html', '--compare', data, '--compare', data, '--compare', data, '--compare', data], 2, /at most 4 runs/],
    [['report', '--data-dir', data, '--out', 'x.html', '--compare', ''], 2, /--compare needs a data directory/],
    [['report', '--data-dir', join(dir.path, 'nothing'), '--out', 'x.html'], 1, /no Magpie data in .*nothing/],
    [['report', '--data-dir', data, '--out', 'x.html', '--colour', 'red'], 2, /unknown option '--colour'/],
    [['report', '--data-dir', data, '--out', join(transcript, 'x.html')], 2, /cannot write the report/],
    [['report', '--data-dir', data, '--out', join(dir.path, 'no', 'such', 'r.html')], 2, /the directory .*no\/such does not exist[\s\S]*hint: create it first/],
    // A mistyped --compare is found before any data dir is read: bad usage.
    [['report', '--data-dir', data, '--compare', join(dir.path, 'runs', 'nope'), '--out', 'x.html'], 2, /--compare .*runs\/nope: no Magpie data there[\s\S]*hint: check the --compare path/],
    [['status', '--data-dir', data, '--channel', 'chan-9'], 1, /no history for channel 'chan-9'.*channels with data: chan-0, chan-1/],
    [['status', '--data-dir', join(dir.path, 'nothing')], 1, /no Magpie data/],
    [['status', 'extra'], 2, /unexpected argument/],
    [['replay', transcript, '--data-dir', data, '--compare', data], 2, /--compare goes with --report/],
    [['replay', transcript, '--data-dir', data, '--report', ''], 2, /--report needs a file name/],
    [['replay', transcript, '--data-dir', join(dir.path, 'fresh'), '--report', join(dir.path, 'no', 'r.html')], 2, /the directory .*no does not exist[\s\S]*give --report a file/],
  ];
  for (const [args, code, pattern] of cases) {
    const run = await magpie(args, dir.path);
    assert.equal(run.code, code, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, pattern, args.join(' '));
  }
  assert.equal(existsSync(join(dir.path, 'no')), false, 'a missing --out directory is not created');
  // A channel with nothing logged still gets a report, with a note.
  const empty = await magpie(['report', '--data-dir', data, '--channel', 'chan-9', '--out', 'e.html'], dir.path);
  assert.equal(empty.code, 0, empty.stderr);
  assert.match(empty.stderr, /nothing is logged for channel 'chan-9'/);
  writeFileSync(join(dir.path, 'bad.toml'), '[metrics]\ncompaction_log_days = -1\n');
  const badConfig = await magpie(['status', '--config', 'bad.toml', '--data-dir', data], dir.path);
  assert.equal(badConfig.code, 3);
  assert.match(badConfig.stderr, /metrics\.compaction_log_days/);
  dir.remove();
});

test('Ctrl-C (SIGINT) and SIGTERM stop a replay after the current message; a re-run continues and loses nothing', async () => {
  const dir = tempDir();
  const transcript = join(dir.path, 'long.jsonl');
  writeFileSync(transcript, generateTranscript(6000, { channels: 3 }));
  const data = join(dir.path, 'data');
  const interrupted = async (signal: NodeJS.Signals) => {
    const args = ['replay', transcript, '--data-dir', data, '--json'];
    const child = spawn(process.execPath, [MAGPIE_MAIN, ...args], {
      cwd: dir.path,
      // Progress forced on through a pipe: it shows the replay is under way.
      env: magpieEnv(args, { cwd: dir.path, env: { ...ENV, MAGPIE_PROGRESS: '1' } }),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    let sent = false;
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (!sent && /replay: [\d,]+ messages \(\d+%\), [\d,]+\/s, ETA/.test(stderr)) {
        sent = true;
        child.kill(signal);
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    return { code, stdout, stderr, sent };
  };
  const sigint = await interrupted('SIGINT');
  assert.ok(sigint.sent, `progress shown: ${sigint.stderr}`);
  assert.equal(sigint.code, 130, sigint.stderr);
  assert.match(sigint.stderr, /stopped by SIGINT after line \d+: \d+ new messages stored in/);
  assert.match(sigint.stderr, /Run the same command again to continue where it stopped/);
  const firstSummary = jsonLines(sigint.stdout).at(-1)!;
  assert.equal(firstSummary.type, 'replay_summary');
  assert.equal(firstSummary.interrupted, 'SIGINT');
  const storedFirst = Number(firstSummary.messages);
  assert.ok(storedFirst > 0 && storedFirst < 6000, String(storedFirst));
  assert.equal(firstSummary.archived_messages, storedFirst, 'the message being ingested when the signal came was finished');

  const sigterm = await interrupted('SIGTERM');
  assert.equal(sigterm.code, 143, sigterm.stderr);
  const secondSummary = jsonLines(sigterm.stdout).at(-1)!;
  assert.equal(secondSummary.duplicates, storedFirst);

  const rest = await magpie(['replay', transcript, '--data-dir', data, '--json'], dir.path);
  assert.equal(rest.code, 0, rest.stderr);
  const last = jsonLines(rest.stdout).at(-1)!;
  assert.equal(Number(last.messages) + Number(last.duplicates), 6000);
  assert.equal(storedFirst + Number(secondSummary.messages) + Number(last.messages), 6000, 'nothing lost, nothing doubled');
  assert.equal(last.archived_messages, 6000);
  dir.remove();
});

test('progress lines: count, rate, percentage and ETA', () => {
  assert.equal(
    progressLine({ label: 'replay', unit: 'messages', count: 1000, fraction: 0.25, elapsedMs: 2000 }),
    'replay: 1,000 messages (25%), 500/s, ETA 6 s',
  );
  assert.equal(progressLine({ label: 'report', unit: 'data dirs', count: 1, total: 2, elapsedMs: 1000, fraction: 0.5 }), 'report: 1 / 2 data dirs (50%), 1/s, ETA 1 s');
  assert.equal(progressLine({ label: 'export', unit: 'messages', count: 10, elapsedMs: 0 }), 'export: 10 messages, 0/s');
  assert.equal(formatDuration(3725), '1 h 2 min');
  assert.equal(formatDuration(95), '1 min 35 s');
});

test('replay shows its progress and the vector index build on stderr when asked (MAGPIE_PROGRESS=1); stdout stays the summary', async () => {
  const dir = tempDir();
  const transcript = join(dir.path, 't.jsonl');
  writeFileSync(transcript, generateTranscript(600, { channels: 1 }));
  const quiet = await magpie(['replay', transcript, '--data-dir', join(dir.path, 'quiet'), '--json'], dir.path);
  assert.equal(quiet.code, 0, quiet.stderr);
  assert.equal(quiet.stderr, '', 'nothing on stderr when it is not a terminal');
  const data = join(dir.path, 'data');
  const shown = await magpie(['replay', transcript, '--data-dir', data, '--json'], dir.path, { ...ENV, MAGPIE_PROGRESS: '1' });
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stderr, /replay: [\d,]+ messages \(\d+%\), [\d,]+\/s, ETA/);
  assert.match(shown.stderr, /vector index: [\d,]+ vectors \(\d+%\), [\d,]+\/s, ETA/);
  assert.match(shown.stderr, /replay: 600 messages \(100%\)/, 'the replay progress reaches 100%');
  assert.match(shown.stderr, /vector index: 600 vectors \(100%\)/, 'the index progress reaches 100%');
  const summary = JSON.parse(shown.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
  assert.equal(summary.type, 'replay_summary');
  assert.equal(summary.messages, 600);
  const stats = await magpie(['memory', 'stats', '--data-dir', data], dir.path);
  assert.match(stats.stdout, /vectors: +600 stored: 600 in the saved vector index, 0 pending/);
  dir.remove();
});

test('status counts what the runtime that wrote the data counted: no tools after a replay, the bot\'s own tools and prompt', async () => {
  const dir = tempDir();
  // A replay offers the model no tools: status must not count any (it counted two memory tools).
  const transcript = join(dir.path, 't.jsonl');
  writeFileSync(transcript, generateTranscript(40, { channels: 1 }));
  const replayed = join(dir.path, 'replayed');
  const replay = await magpie(['replay', transcript, '--data-dir', replayed, '--context-window', '100000'], dir.path);
  assert.equal(replay.code, 0, replay.stderr);
  const afterReplay = JSON.parse((await magpie(['status', '--data-dir', replayed, '--json'], dir.path)).stdout) as { channels: Array<Record<string, any>> };
  const replayedChannel = afterReplay.channels[0]!;
  // The same data dir opened by a runtime configured as replay's (defaults, no tools).
  const reader = await openHarness({ dir: replayed, configValue: DEFAULTS });
  const expected = await reader.runtime.status(replayedChannel.channel_id as string);
  await reader.close({ keepDir: true });
  assert.equal(replayedChannel.estimated_tokens, expected.estimatedTokens);
  assert.equal(replayedChannel.settings_from, 'compaction_log');

  // A runtime with tools of its own and another system prompt (a bot): status counts those.
  const botDir = join(dir.path, 'bot');
  const tools = ['alpha', 'beta', 'gamma'].map((name) => ({
    name,
    description: `The ${name} tool, described at some length so that it weighs in the estimate.`,
    input_schema: { type: 'object' as const, properties: { query: { type: 'string' } } },
  }));
  const clock = new TickingClock();
  let log: CompactionLog | undefined;
  const bot = await openHarness({
    dir: botDir,
    clock,
    toolDefinitions: tools,
    usageObserver: { observe: (...args) => log!.observe(...args) },
  });
  log = new CompactionLog({ db: bot.db, clock });
  for (let index = 0; index < 5; index += 1) await bot.runtime.ingest(userMessage('bot-channel', index));
  const counted = await bot.runtime.status('bot-channel');
  await log.close();
  await bot.close({ keepDir: true });
  const afterBot = JSON.parse((await magpie(['status', '--data-dir', botDir, '--json'], dir.path)).stdout) as { channels: Array<Record<string, any>> };
  assert.equal(afterBot.channels[0]!.estimated_tokens, counted.estimatedTokens, 'the tools and the prompt the runtime counted');
  assert.equal(afterBot.channels[0]!.usage, Math.round(counted.usage * 10_000) / 10_000);
  dir.remove();
});

test('status reads every shard data dir of a sharded deployment', async (t) => {
  // Shard dirs are a SQLite layout; on PostgreSQL every shard shares one schema.
  if (process.env.MAGPIE_TEST_STORAGE === 'postgres') return t.skip('shard data dirs are SQLite only');
  const dir = tempDir();
  try {
    const base = join(dir.path, 'data');
    for (const [shard, channel] of [
      [0, 'guild-a-chan'],
      [1, 'guild-b-chan'],
    ] as const) {
      const transcript = join(dir.path, `shard-${shard}.jsonl`);
      writeFileSync(
        transcript,
        [0, 1, 2].map((index) => JSON.stringify({ id: `${shard}-${index}`, channel, author: 'ana', content: `hello number ${index}` })).join('\n') + '\n',
      );
      const replayed = await magpie(['replay', transcript, '--data-dir', join(base, `shard-${shard}`)], dir.path);
      assert.equal(replayed.code, 0, replayed.stderr);
    }
    const status = await magpie(['status', '--data-dir', base, '--json'], dir.path);
    assert.equal(status.code, 0, status.stderr);
    const channels = (JSON.parse(status.stdout) as { channels: Array<{ channel_id: string; archived_messages: number }> }).channels;
    assert.deepEqual(
      channels.map((channel) => [channel.channel_id, channel.archived_messages]),
      [
        ['guild-a-chan', 3],
        ['guild-b-chan', 3],
      ],
    );
    const one = await magpie(['status', '--data-dir', base, '--channel', 'guild-b-chan', '--json'], dir.path);
    assert.equal(one.code, 0, one.stderr);
    assert.equal((JSON.parse(one.stdout) as { channels: unknown[] }).channels.length, 1);
  } finally {
    dir.remove();
  }
});
