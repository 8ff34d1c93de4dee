import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, rmdirSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { LiveConfig, loadConfigFile, watchConfigFile } from '../src/config/index.js';
import { waitFor, watchTestConfig } from './support/config-watch.js';

const temp = mkdtempSync(path.join(os.tmpdir(), 'magpie-watch-edges-'));
after(() => rmSync(temp, { recursive: true, force: true }));


// Small windows leave the answer a small room (the check refuses a window the answer would fill).
const windowOf = (size: number) => `[defaults]\ncontext_window = ${size}\nmax_response_tokens = 64\n`;

const setUp = (name: string, initial: string) => watchTestConfig(temp, name, initial);

describe('config hot reload, edge cases', () => {
  it('a key named like an Object.prototype member is refused on reload instead of crashing the process', async (t) => {
    const { file, live, outcomes, watcher } = setUp('proto.toml', windowOf(1000));
    t.after(() => watcher.close());
    writeFileSync(file, `${windowOf(2000)}constructor = 1\n`);
    await waitFor(() => outcomes.some((outcome) => outcome.status === 'refused'), 'the refusal');
    assert.equal(live.settingsFor('1').contextWindow, 1000);
    writeFileSync(file, windowOf(3000));
    await waitFor(() => live.settingsFor('1').contextWindow === 3000, 'the fixed file');
  });

  it('a subscriber that throws neither stops the watcher nor crashes the process', async (t) => {
    const { file, live, logs, watcher } = setUp('listener.toml', windowOf(1000));
    t.after(() => watcher.close());
    const unsubscribe = live.subscribe(() => {
      throw new Error('subscriber broke');
    });
    writeFileSync(file, windowOf(2000));
    await waitFor(() => logs.some((line) => line.fields.event === 'config_listener_error'), 'the listener error log');
    assert.equal(live.settingsFor('1').contextWindow, 2000);
    unsubscribe();
    writeFileSync(file, windowOf(3000));
    await waitFor(() => live.settingsFor('1').contextWindow === 3000, 'a later reload');
  });

  it('rapid successive writes end on the last one; subscribers only ever see written values', async (t) => {
    const { file, live, outcomes, watcher } = setUp('burst.toml', windowOf(1000));
    t.after(() => watcher.close());
    const seen: number[] = [];
    live.subscribe(() => seen.push(live.settingsFor('1').contextWindow));
    const written: number[] = [];
    for (let index = 1; index <= 20; index++) {
      written.push(1000 + index);
      writeFileSync(file, windowOf(1000 + index));
    }
    await waitFor(() => live.settingsFor('1').contextWindow === 1020, 'the last write');
    assert.ok(seen.every((value) => written.includes(value)), JSON.stringify(seen));
    assert.equal(seen.at(-1), 1020);
    assert.ok(outcomes.filter((outcome) => outcome.status === 'applied').length < 20, 'writes are coalesced');
  });

  it('a deleted file keeps the running values; recreating it applies the new one', async (t) => {
    const { file, live, outcomes, watcher } = setUp('deleted.toml', windowOf(1000));
    t.after(() => watcher.close());
    unlinkSync(file);
    await waitFor(() => outcomes.some((outcome) => outcome.status === 'missing'), 'the missing file');
    assert.equal(live.settingsFor('1').contextWindow, 1000);
    writeFileSync(file, windowOf(4000));
    await waitFor(() => live.settingsFor('1').contextWindow === 4000, 'the recreated file');
  });

  it('a restart-only key is recorded and logged as needing a restart', async (t) => {
    const { file, outcomes, logs, watcher } = setUp('restart.toml', windowOf(1000));
    t.after(() => watcher.close());
    writeFileSync(file, `${windowOf(1000)}[memory]\ndata_dir = "./elsewhere"\n`);
    await waitFor(() => outcomes.some((outcome) => outcome.status === 'applied'), 'the reload');
    const applied = outcomes.find((outcome) => outcome.status === 'applied');
    assert.ok(applied && applied.status === 'applied');
    assert.deepEqual(applied.restartNeeded, ['memory.data_dir']);
    const line = logs.find((entry) => entry.fields.event === 'config_reloaded');
    assert.ok(line);
    assert.match(line.message, /memory\.data_dir takes effect after a restart/);
  });

  it('valid TOML that is an invalid config is refused, then the fixed file applies; subscribers see only the valid one', async (t) => {
    const { file, live, outcomes, watcher } = setUp('fixed.toml', windowOf(1000));
    t.after(() => watcher.close());
    const seen: number[] = [];
    live.subscribe(() => seen.push(live.settingsFor('7').compaction.emergencyThreshold));
    // Valid alone, out of order once merged over [defaults.compaction] (aggressive 0.85).
    writeFileSync(file, '[channels."7".compaction]\nemergency_threshold = 0.82\n');
    await waitFor(() => outcomes.some((outcome) => outcome.status === 'refused'), 'the refusal');
    assert.equal(live.settingsFor('7').compaction.emergencyThreshold, 0.95);
    writeFileSync(file, '[channels."7".compaction]\nemergency_threshold = 0.9\n');
    await waitFor(() => live.settingsFor('7').compaction.emergencyThreshold === 0.9, 'the fixed file');
    assert.deepEqual(seen, [0.9]);
  });

  it('every [llm] key is restart-only: the model client is built once at start', async (t) => {
    const { file, outcomes, watcher } = setUp('llm.toml', windowOf(1000));
    t.after(() => watcher.close());
    writeFileSync(file, `${windowOf(1000)}[llm]\nmodel = "claude-x"\ntimeout_ms = 5000\nmax_retries = 0\n`);
    await waitFor(() => outcomes.some((outcome) => outcome.status === 'applied'), 'the reload');
    const applied = outcomes.find((outcome) => outcome.status === 'applied');
    assert.ok(applied && applied.status === 'applied');
    assert.deepEqual([...applied.restartNeeded].sort(), ['llm.max_retries', 'llm.model', 'llm.timeout_ms']);
  });

  it('an edit made between loading the config and starting the watcher is applied, not lost', async (t) => {
    const file = path.join(temp, 'late.toml');
    writeFileSync(file, windowOf(1000));
    const live = new LiveConfig(loadConfigFile(file, { env: {} }));
    // The bot is still opening its database when the operator saves.
    writeFileSync(file, windowOf(5000));
    const watcher = watchConfigFile({ path: file, live, env: {}, debounceMs: 20, pollIntervalMs: 50 });
    t.after(() => watcher.close());
    await waitFor(() => live.settingsFor('1').contextWindow === 5000, 'the edit made before watching');
  });

  it('a watcher started on the file the running config came from reports nothing', async (t) => {
    const { file, live, outcomes, watcher } = setUp('same.toml', windowOf(1000));
    t.after(() => watcher.close());
    const before = live.current();
    // A later write is the yardstick that any start-up check would have run by now.
    writeFileSync(file, windowOf(1001));
    await waitFor(() => live.settingsFor('1').contextWindow === 1001, 'the later write');
    assert.notEqual(live.current(), before);
    assert.deepEqual(outcomes.map((outcome) => outcome.status), ['applied']);
  });

  it('a config path that became a directory is refused as unreadable (not "gone"); restoring the file applies it', async (t) => {
    const { file, live, outcomes, logs, watcher } = setUp('turned-dir.toml', windowOf(1000));
    t.after(() => watcher.close());
    unlinkSync(file);
    mkdirSync(file);
    await waitFor(() => outcomes.some((outcome) => outcome.status === 'refused'), 'the refusal');
    const refused = outcomes.find((outcome) => outcome.status === 'refused');
    assert.ok(refused && refused.status === 'refused');
    assert.match(refused.problems[0]!.message, /cannot read config file: .*EISDIR/);
    assert.ok(!logs.some((line) => line.fields.event === 'config_missing'), 'not reported as a missing file');
    assert.equal(live.settingsFor('1').contextWindow, 1000);
    rmdirSync(file);
    writeFileSync(file, windowOf(6000));
    await waitFor(() => live.settingsFor('1').contextWindow === 6000, 'the restored file');
  });
});
