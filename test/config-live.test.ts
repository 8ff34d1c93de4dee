import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import type { MagpieConfig } from '../src/config/types.js';

test('settingsFor finds only configured channels, never Object.prototype members', () => {
  const special = { ...DEFAULTS.defaults, contextWindow: 1234 };
  const live = new LiveConfig({ ...DEFAULTS, channels: { general: special } });
  for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
    assert.equal(live.settingsFor(name), DEFAULTS.defaults, name);
    assert.equal(live.settingsFor('thread-1', name), DEFAULTS.defaults, `parent ${name}`);
  }
  assert.equal(live.settingsFor('general').contextWindow, 1234);
  assert.equal(live.settingsFor('thread-1', 'general').contextWindow, 1234, 'a thread inherits its parent');
});

test('every listener hears about a new config even when one throws; the failure is reported', () => {
  const live = new LiveConfig(DEFAULTS);
  const heard: number[] = [];
  live.subscribe(() => {
    throw new Error('broken listener');
  });
  live.subscribe((next) => heard.push(next.defaults.contextWindow));
  const next: MagpieConfig = { ...DEFAULTS, defaults: { ...DEFAULTS.defaults, contextWindow: 5000 } };
  assert.throws(() => live.replace(next), /broken listener/);
  assert.deepEqual(heard, [5000]);
  assert.equal(live.current(), next, 'the new config is in force');
});
