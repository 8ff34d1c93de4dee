/**
 * A writer process for the store contract test, killed with SIGKILL by it. argv: the store
 * target as JSON, then what to do:
 * - `transaction`: opens the store, writes a turn and a truncation marker inside one transaction,
 *   reads its own writes back, prints `inside <entries>`, and stops there forever.
 * - `hold <writer key>`: opens the store for writing under that key, prints `holding`, and waits.
 */
import { HistoryStore } from '../../src/channel/history-store.js';
import { openStorageForWriting, type StorageTarget } from '../../src/storage/open-storage.js';
import { ALL_MIGRATIONS } from '../../src/app/migrations.js';
import { CHILD_CHANNEL, childEntry } from './store-contract.js';

const [targetJson, mode, key] = process.argv.slice(2);
const target = JSON.parse(targetJson!) as StorageTarget;

if (mode === 'transaction') {
  const opened = await openStorageForWriting(target, ALL_MIGRATIONS, { command: 'magpie killed-writer', writerKey: 'killed-writer' });
  const history = new HistoryStore(opened.db);
  await opened.db.transaction(async () => {
    for (let seq = 1; seq <= 3; seq += 1) await history.insert(childEntry(seq), { guildId: 'g1' });
    await history.truncate(CHILD_CHANNEL, { toSeq: 2 }, { channelId: CHILD_CHANNEL, kind: 'marker', fromSeq: 1, toSeq: 2, content: '[cut]', tokens: 3, createdAt: 1 });
    const seen = (await history.archive(CHILD_CHANNEL)).length;
    process.stdout.write(`inside ${seen}\n`);
    // Stays inside the open transaction until killed.
    setInterval(() => undefined, 60_000);
    await new Promise<never>(() => {});
  });
} else if (mode === 'hold') {
  await openStorageForWriting(target, ALL_MIGRATIONS, { command: 'magpie lock-holder', writerKey: key! });
  process.stdout.write('holding\n');
  setInterval(() => undefined, 60_000);
} else {
  throw new Error(`unknown mode ${mode}`);
}
