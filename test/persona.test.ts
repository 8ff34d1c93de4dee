import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp } from '../src/app/index.js';
import { loadConfigFile } from '../src/config/index.js';
import { listPersonas } from '../src/persona/index.js';
import { runMagpie } from './support/magpie-process.js';
import { storageEnv } from './support/storage.js';

test('a persona survives a restart, replaces the configured prompt for its channel only, and never touches config.toml', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-persona-'));
  try {
    const configFile = path.join(dir, 'config.toml');
    const configText = `[defaults]\nsystem_prompt = "You are the configured bot."\n\n[memory]\ndata_dir = "${path.join(dir, 'data')}"\n`;
    writeFileSync(configFile, configText);
    const env = storageEnv(path.join(dir, 'data'));
    const first = await openApp({ config: loadConfigFile(configFile, { env }), env });
    await first.runtime.personas.set('c-persona', 'You are a librarian.', 'u-mod', Date.UTC(2026, 10, 1));
    assert.equal((await first.runtime.buildModelRequest('c-persona', { tools: [], maxTokens: 10 })).system, 'You are a librarian.');
    assert.equal((await first.runtime.buildModelRequest('c-other', { tools: [], maxTokens: 10 })).system, 'You are the configured bot.');
    // The estimate follows the persona too.
    const withPersona = (await first.runtime.status('c-persona')).estimatedTokens;
    assert.equal(withPersona, (await first.runtime.status('c-other')).estimatedTokens - Math.ceil('You are the configured bot.'.length / 4) + Math.ceil('You are a librarian.'.length / 4));
    await first.close();

    // The operator sees it in magpie status.
    const status = await runMagpie(['status', '--data-dir', path.join(dir, 'data'), '--json'], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir } });
    assert.equal(status.code, 0, status.stderr);
    const shown = JSON.parse(status.stdout) as { personas: Array<{ channel_id: string; prompt: string; set_by: string }> };
    assert.deepEqual(shown.personas.map((persona) => [persona.channel_id, persona.prompt, persona.set_by]), [['c-persona', 'You are a librarian.', 'u-mod']]);

    const second = await openApp({ config: loadConfigFile(configFile, { env }), env });
    try {
      assert.equal(second.runtime.systemPromptOf('c-persona'), 'You are a librarian.');
      assert.deepEqual(await listPersonas(second.db), [{ channelId: 'c-persona', prompt: 'You are a librarian.', setBy: 'u-mod', setAt: Date.UTC(2026, 10, 1) }]);
      assert.equal(await second.runtime.personas.clear('c-persona'), true);
      assert.equal(second.runtime.systemPromptOf('c-persona'), 'You are the configured bot.');
    } finally {
      await second.close();
    }
    assert.equal(readFileSync(configFile, 'utf8'), configText, 'config.toml is never rewritten');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('/persona names the config file the prompt comes from, or says it is the built-in one', async () => {
  const { describePersona } = await import('../src/app/user-commands.js');
  const runtime = {
    authorOf: async () => undefined,
    systemPromptOf: () => 'You are a test bot.',
    personas: { get: () => undefined } as never,
  };
  assert.match(describePersona(runtime, 'c1', '/etc/magpie/chat.toml'), /^This channel uses the configured persona \(system_prompt in chat\.toml\):\nYou are a test bot\./);
  assert.match(describePersona(runtime, 'c1'), /\(the built-in default; no config file\)/);
});
