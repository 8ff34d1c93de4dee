import type { Migration } from '../storage/database.js';
import type { SqlClient } from '../storage/sql-client.js';
import { clampFactor, UNCALIBRATED, type Calibration } from '../context/calibration.js';

export const CALIBRATION_MIGRATIONS: readonly Migration[] = [
  {
    name: 'history-calibration-001',
    async up(db) {
      await db.exec(`
        CREATE TABLE history_calibration (
          channel_id TEXT PRIMARY KEY,
          factor REAL NOT NULL,
          observations INTEGER NOT NULL,
          updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
      `);
    },
    postgres: `
        CREATE TABLE history_calibration (
          channel_id TEXT PRIMARY KEY,
          factor DOUBLE PRECISION NOT NULL,
          observations BIGINT NOT NULL,
          updated_at BIGINT NOT NULL
        );
      `,
  },
];

/** The calibration of each channel, kept with its history (one small row per channel). */
export class CalibrationStore {
  private readonly statements;

  constructor(db: SqlClient) {
    this.statements = {
      get: db.prepare('SELECT factor, observations FROM history_calibration WHERE channel_id = ?'),
      put: db.prepare(
        `INSERT INTO history_calibration (channel_id, factor, observations, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (channel_id) DO UPDATE SET factor = excluded.factor, observations = excluded.observations, updated_at = excluded.updated_at`,
      ),
    };
  }

  async load(channelId: string): Promise<Calibration> {
    const row = (await this.statements.get.get(channelId)) as { factor: number; observations: number } | undefined;
    if (!row || !Number.isFinite(row.factor)) return { ...UNCALIBRATED };
    return { factor: clampFactor(row.factor), observations: row.observations };
  }

  async save(channelId: string, calibration: Calibration, now: number): Promise<void> {
    await this.statements.put.run(channelId, calibration.factor, calibration.observations, now);
  }
}
