/** Ids people see work: `memory forget` takes the platform message id and the store's own id. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runMagpie } from './support/magpie-process.js';

test('memory forget accepts the platform id shown in search results and the msg-N id, and says which matched', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-ids-'));
  const env = { PATH: process.env.PATH, HOME: dir };
  const data = path.join(dir, 'data');
  const magpie = (args: string[]) => runMagpie(args, { cwd: dir, env });
  try {
    const lines = [
      { id: '3001413291', channel: 'c1', author: 'ann', content: 'the locker code is 7731' },
      { id: '3001413292', channel: 'c1', author: 'bo', content: 'the ferry leaves at nine' },
      { id: '3001413293', channel: 'c1', author: 'ann', content: 'bring the blue tarp' },
      // The same platform id in another channel (transcripts may reuse ids across channels).
      { id: '77', channel: 'c1', author: 'bo', content: 'lunch is at noon' },
      { id: '77', channel: 'c2', author: 'bo', content: 'dinner is at eight' },
    ];
    writeFileSync(path.join(dir, 't.jsonl'), `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`);
    assert.equal((await magpie(['replay', 't.jsonl', '--data-dir', data])).code, 0);

    const search = await magpie(['memory', 'search', 'locker code', '--channel', 'c1', '--data-dir', data, '--json']);
    const hit = (JSON.parse(search.stdout) as Array<{ id: string; message_id: string; content: string }>)[0]!;
    assert.equal(hit.message_id, '3001413291', 'search shows the platform id');

    const byPlatform = await magpie(['memory', 'forget', '3001413291', '--data-dir', data]);
    assert.equal(byPlatform.code, 0, byPlatform.stderr);
    assert.match(byPlatform.stdout, new RegExp(`^forgot ${hit.id}: the archived message in channel c1; '3001413291' matched the platform message id`));
    const after = await magpie(['memory', 'search', 'locker code 7731', '--channel', 'c1', '--data-dir', data, '--json']);
    assert.ok(!after.stdout.includes('7731'), 'gone from search');

    const ferry = (JSON.parse((await magpie(['memory', 'search', 'ferry', '--channel', 'c1', '--data-dir', data, '--json'])).stdout) as Array<{ id: string }>)[0]!;
    const byInternal = await magpie(['memory', 'forget', ferry.id, '--data-dir', data]);
    assert.equal(byInternal.code, 0, byInternal.stderr);
    assert.match(byInternal.stdout, new RegExp(`forgot ${ferry.id}: the archived message \\(message id 3001413292\\) in channel c1; '${ferry.id}' matched the internal id`));

    const ambiguous = await magpie(['memory', 'forget', '77', '--data-dir', data]);
    assert.equal(ambiguous.code, 2);
    assert.match(ambiguous.stderr, /message id '77' is archived in 2 channels: msg-\d+ in channel c1, msg-\d+ in channel c2/);

    const unknown = await magpie(['memory', 'forget', '3001413299', '--data-dir', data]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no memory or transcript entry with id '3001413299' \(looked for it as a platform message id and as the store's own id\)/);
    assert.match(unknown.stderr, /hint: ids look like msg-40 .* or the platform's message id/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
