import type { Migration } from '../storage/database.js';
import { KeyedRead } from '../storage/keyed-read.js';
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
  {
    // The factors of the channel's text and of its tool traffic, so that both come back after a
    // restart instead of the whole-request factor standing in for them (NULL: not learnt yet).
    name: 'history-calibration-002-parts',
    async up(db) {
      await db.exec(`
        ALTER TABLE history_calibration ADD COLUMN message_factor REAL;
        ALTER TABLE history_calibration ADD COLUMN tool_factor REAL;
      `);
    },
    postgres: `
        ALTER TABLE history_calibration ADD COLUMN message_factor DOUBLE PRECISION;
        ALTER TABLE history_calibration ADD COLUMN tool_factor DOUBLE PRECISION;
      `,
  },
];

/** The calibration of each channel, kept with its history (one small row per channel). */
export class CalibrationStore {
  private readonly statements;

  constructor(db: SqlClient) {
    this.statements = {
      get: new KeyedRead(db, 'SELECT factor, observations, message_factor, tool_factor FROM history_calibration WHERE channel_id = @key'),
      put: db.prepare(
        `INSERT INTO history_calibration (channel_id, factor, observations, message_factor, tool_factor, updated_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (channel_id) DO UPDATE SET factor = excluded.factor, observations = excluded.observations,
           message_factor = excluded.message_factor, tool_factor = excluded.tool_factor, updated_at = excluded.updated_at`,
      ),
    };
  }

  async load(channelId: string): Promise<Calibration> {
    const row = (await this.statements.get.row(channelId)) as CalibrationRow | undefined;
    if (!row || !Number.isFinite(row.factor)) return { ...UNCALIBRATED };
    const calibration: Calibration = { factor: clampFactor(row.factor), observations: Number(row.observations) };
    // A row an older build wrote has no parts: the whole factor stands in until the next response.
    const messageFactor = storedFactor(row.message_factor);
    const toolFactor = storedFactor(row.tool_factor);
    if (messageFactor !== undefined) calibration.messageFactor = messageFactor;
    if (toolFactor !== undefined) calibration.toolFactor = toolFactor;
    return calibration;
  }

  async save(channelId: string, calibration: Calibration, now: number): Promise<void> {
    await this.statements.put.run(channelId, calibration.factor, calibration.observations, calibration.messageFactor ?? null, calibration.toolFactor ?? null, now);
  }
}

interface CalibrationRow {
  factor: number;
  observations: number;
  message_factor: number | null;
  tool_factor: number | null;
}

function storedFactor(value: number | null): number | undefined {
  return value === null || !Number.isFinite(Number(value)) ? undefined : clampFactor(Number(value));
}
