import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp } from '../src/app/index.js';
import { loadConfigFile } from '../src/config/index.js';
import { listPersonas } from '../src/persona/index.js';

test('a persona survives a restart, replaces the configured prompt for its channel only, and never touches config.toml', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-persona-'));
  try {
    const configFile = path.join(dir, 'config.toml');
    const configText = `[defaults]\nsystem_prompt = "You are the configured bot."\n\n[memory]\ndata_dir = "${path.join(dir, 'data')}"\n`;
    writeFileSync(configFile, configText);
    const first = await openApp({ config: loadConfigFile(configFile), env: {} });
    first.runtime.personas.set('c-persona', 'You are a librarian.', 'u-mod', Date.UTC(2026, 10, 1));
    assert.equal(first.runtime.buildModelRequest('c-persona', { tools: [], maxTokens: 10 }).system, 'You are a librarian.');
    assert.equal(first.runtime.buildModelRequest('c-other', { tools: [], maxTokens: 10 }).system, 'You are the configured bot.');
    // The estimate follows the persona too.
    const withPersona = first.runtime.status('c-persona').estimatedTokens;
    assert.equal(withPersona, first.runtime.status('c-other').estimatedTokens - Math.ceil('You are the configured bot.'.length / 4) + Math.ceil('You are a librarian.'.length / 4));
    await first.close();

    const second = await openApp({ config: loadConfigFile(configFile), env: {} });
    try {
      assert.equal(second.runtime.systemPromptOf('c-persona'), 'You are a librarian.');
      assert.deepEqual(listPersonas(second.db), [{ channelId: 'c-persona', prompt: 'You are a librarian.', setBy: 'u-mod', setAt: Date.UTC(2026, 10, 1) }]);
      assert.equal(second.runtime.personas.clear('c-persona'), true);
      assert.equal(second.runtime.systemPromptOf('c-persona'), 'You are the configured bot.');
    } finally {
      await second.close();
    }
    assert.equal(readFileSync(configFile, 'utf8'), configText, 'config.toml is never rewritten');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
