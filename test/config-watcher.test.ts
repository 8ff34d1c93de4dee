import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { LiveConfig, loadConfigFile, watchConfigFile } from '../src/config/index.js';
import { waitFor, watchTestConfig } from './support/config-watch.js';

const temp = mkdtempSync(path.join(os.tmpdir(), 'magpie-watch-'));
after(() => rmSync(temp, { recursive: true, force: true }));


function thresholds(background: number, aggressive: number): string {
  return `[defaults.compaction]\nbackground_threshold = ${background}\naggressive_threshold = ${aggressive}\n`;
}


const setUp = (name: string, initial: string) => watchTestConfig(temp, name, initial);

describe('config hot reload', () => {
  it('applies a valid change, refuses an invalid one keeping old values, then applies a later valid one', async (t) => {
    const { file, live, outcomes, logs, watcher } = setUp('reload.toml', thresholds(0.8, 0.85));
    t.after(() => watcher.close());
    assert.equal(live.settingsFor('123').compaction.backgroundThreshold, 0.8);

    writeFileSync(file, `${thresholds(0.6, 0.7)}[channels."123"]\ncontext_window = 1000\nmax_response_tokens = 64\n`);
    await waitFor(() => live.settingsFor('123').contextWindow === 1000, 'the valid change');
    assert.equal(live.settingsFor('123').compaction.backgroundThreshold, 0.6);
    assert.equal(live.settingsFor('other').compaction.aggressiveThreshold, 0.7);
    const applied = logs.find((line) => line.fields.event === 'config_reloaded');
    assert.ok(applied, 'a reload is logged');
    assert.ok(
      (applied.fields.changes as string[]).includes('defaults.compaction.background_threshold: 0.8 → 0.6'),
      JSON.stringify(applied.fields.changes),
    );

    const before = live.current();
    writeFileSync(file, thresholds(0.9, 0.7));
    await waitFor(() => outcomes.some((outcome) => outcome.status === 'refused'), 'the refusal');
    assert.equal(live.current(), before, 'running values kept');
    assert.equal(live.settingsFor('123').compaction.backgroundThreshold, 0.6);
    const refused = logs.find((line) => line.fields.event === 'config_refused');
    assert.ok(refused);
    assert.equal(refused.level, 'warn');
    assert.match(String(refused.fields.problems), /defaults\.compaction\.background_threshold: 0\.9 must be below/);

    writeFileSync(file, thresholds(0.5, 0.75));
    await waitFor(() => live.settingsFor('123').compaction.backgroundThreshold === 0.5, 'the later valid change');
    assert.equal(live.settingsFor('123').compaction.aggressiveThreshold, 0.75);
    assert.equal(live.settingsFor('123').contextWindow, DEFAULT_WINDOW, 'the override was removed with the file');
  });

  it('follows editors that save by renaming a new file over the old one', async (t) => {
    const { file, live, watcher } = setUp('rename.toml', thresholds(0.8, 0.85));
    t.after(() => watcher.close());
    for (const background of [0.4, 0.45]) {
      const scratch = `${file}.tmp`;
      writeFileSync(scratch, thresholds(background, 0.85));
      renameSync(scratch, file);
      await waitFor(() => live.settingsFor('x').compaction.backgroundThreshold === background, `rename ${background}`);
    }
  });

  it('a syntax error is refused and listed; subscribers only see valid configs', async (t) => {
    const { file, live, outcomes, watcher } = setUp('syntax.toml', thresholds(0.8, 0.85));
    t.after(() => watcher.close());
    const seen: number[] = [];
    live.subscribe((next) => seen.push(next.defaults.compaction.backgroundThreshold));
    writeFileSync(file, '[defaults.compaction\nbackground_threshold = 0.1\n');
    await waitFor(() => outcomes.some((outcome) => outcome.status === 'refused'), 'the refusal');
    const refused = outcomes.find((outcome) => outcome.status === 'refused');
    assert.ok(refused && refused.status === 'refused');
    assert.equal(refused.problems[0]?.line, 1);
    assert.deepEqual(seen, []);
  });

  it('close() stops following the file', async (t) => {
    const closed = setUp('closed.toml', thresholds(0.8, 0.85));
    closed.watcher.close();
    // A second, open watcher on the same file is the yardstick: once it has seen two later
    // writes, the closed one would long have seen the first.
    const open = new LiveConfig(loadConfigFile(closed.file, { env: {} }));
    const witness = watchConfigFile({ path: closed.file, live: open, env: {}, debounceMs: 20, pollIntervalMs: 50 });
    t.after(() => witness.close());
    writeFileSync(closed.file, thresholds(0.3, 0.85));
    await waitFor(() => open.settingsFor('x').compaction.backgroundThreshold === 0.3, 'the first write');
    writeFileSync(closed.file, thresholds(0.35, 0.85));
    await waitFor(() => open.settingsFor('x').compaction.backgroundThreshold === 0.35, 'the second write');
    assert.equal(closed.live.settingsFor('x').compaction.backgroundThreshold, 0.8);
    assert.deepEqual(closed.outcomes, []);
  });
});

const DEFAULT_WINDOW = 200_000;
