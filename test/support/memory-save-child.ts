/**
 * A process that saves one memory into a shared store when told (processes.test.ts). argv: the
 * store target as JSON, its own data dir, the writer key, the memory's text. Prints `ready` once
 * the store is open, saves on the line `go` on stdin, prints the memory id, and exits.
 */
import { createInterface } from 'node:readline';
import { ALL_MIGRATIONS } from '../../src/app/migrations.js';
import { DEFAULTS } from '../../src/config/defaults.js';
import { openMemoryStore } from '../../src/memory/index.js';
import { openStorageForWriting, type StorageTarget } from '../../src/storage/open-storage.js';

const [targetJson, dataDir, writerKey, content] = process.argv.slice(2);
const target = { ...(JSON.parse(targetJson!) as StorageTarget), dataDir: dataDir! };
const opened = await openStorageForWriting(target, ALL_MIGRATIONS, { command: `magpie ${writerKey}`, writerKey: writerKey! });
const memory = await openMemoryStore({ db: opened.db, dataDir: dataDir!, settings: DEFAULTS.memory, env: {} });
process.stdout.write('ready\n');
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() !== 'go') continue;
  const saved = await memory.save({ location: { channelId: 'shared-channel', guildId: 'g1' }, content: content!, memoryType: 'fact' });
  process.stdout.write(`${saved.id}\n`);
  break;
}
lines.close();
await memory.close();
await opened.close();
