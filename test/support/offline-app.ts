/** An app on a fresh data dir (and, on PostgreSQL, a fresh schema) with no Discord and no model. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, type MagpieApp } from '../../src/app/open-app.js';
import { DEFAULTS } from '../../src/config/defaults.js';
import { appEnv, withTestStorage } from './storage.js';

/** Runs `work` on the app, then closes it and removes its data dir. */
export async function withOfflineApp(prefix: string, work: (app: MagpieApp) => Promise<void>): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), prefix));
  const app = await openApp({ config: withTestStorage({ ...DEFAULTS, memory: { ...DEFAULTS.memory, dataDir } }), env: appEnv() });
  try {
    await work(app);
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
