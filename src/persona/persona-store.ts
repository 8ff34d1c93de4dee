import { hasTable } from '../storage/read-only.js';
import { InputError } from '../common/errors.js';
import { withoutNul } from '../common/outside-text.js';
import type { Migration } from '../storage/database.js';
import type { SqlClient } from '../storage/sql-client.js';

/**
 * Per-channel personas set from chat with `/persona`. They live in the data directory's
 * database, never in config.toml: the operator's file is not rewritten behind their back, and
 * `listPersonas` shows every override (for `magpie status` and `/context`). A persona replaces
 * the channel's `system_prompt` until it is cleared.
 */
export const PERSONA_MIGRATIONS: readonly Migration[] = [
  {
    name: 'personas-001-init',
    async up(db) {
      await db.exec(`
        CREATE TABLE channel_personas (
          channel_id TEXT PRIMARY KEY,
          prompt TEXT NOT NULL,
          set_by TEXT NOT NULL,
          set_at INTEGER NOT NULL
        ) WITHOUT ROWID;
      `);
    },
    postgres: `
        CREATE TABLE channel_personas (
          channel_id TEXT PRIMARY KEY,
          prompt TEXT NOT NULL,
          set_by TEXT NOT NULL,
          set_at BIGINT NOT NULL
        );
      `,
  },
];

/** Longest persona accepted (characters): the prompt goes with every request of the channel. */
export const MAX_PERSONA_CHARS = 4000;

export interface Persona {
  channelId: string;
  prompt: string;
  /** Who set it (platform user id). */
  setBy: string;
  /** Milliseconds since the epoch. */
  setAt: number;
}

interface PersonaRow {
  channel_id: string;
  prompt: string;
  set_by: string;
  set_at: number;
}

function toPersona(row: PersonaRow): Persona {
  return { channelId: row.channel_id, prompt: row.prompt, setBy: row.set_by, setAt: row.set_at };
}

/** Every persona override of a data directory's database, for operators. */
export async function listPersonas(db: SqlClient): Promise<Persona[]> {
  if (!(await hasTable(db, 'channel_personas'))) return [];
  return ((await db.prepare('SELECT * FROM channel_personas ORDER BY channel_id').all()) as PersonaRow[]).map(toPersona);
}

/** Checks a persona someone typed; the error says what to change. */
export function validatePersona(prompt: unknown): string {
  if (typeof prompt !== 'string') throw new InputError('the persona must be text', { context: { key: 'persona' } });
  // Typed text, stored on either backend: U+0000 replaced (see common/outside-text.ts).
  const trimmed = withoutNul(prompt).trim();
  if (trimmed === '') throw new InputError('the persona is empty; write who the bot should be in this channel', { context: { key: 'persona' } });
  if (trimmed.length > MAX_PERSONA_CHARS) {
    throw new InputError(`the persona is ${trimmed.length} characters; at most ${MAX_PERSONA_CHARS} are accepted`, { context: { key: 'persona' } });
  }
  return trimmed;
}

/**
 * Reads are served from memory (every request asks); writes go straight to the database, and
 * the memory copy changes once they are done. The overrides are read once, from `ready` on.
 */
export class PersonaStore {
  private readonly cache = new Map<string, Persona>();
  private readonly statements;
  /** Settles once the stored overrides are in memory (rejects with the read's error). */
  readonly ready: Promise<void>;

  /** A store whose overrides are already read. */
  static async open(db: SqlClient): Promise<PersonaStore> {
    const store = new PersonaStore(db);
    await store.ready;
    return store;
  }

  /**
   * `changed` is told after each write committed (the runtime tells other processes serving the
   * same store, which `reload` the channel).
   */
  constructor(
    private readonly db: SqlClient,
    private readonly changed: (channelId: string) => void = () => undefined,
  ) {
    this.statements = {
      one: db.prepare('SELECT * FROM channel_personas WHERE channel_id = ?'),
      upsert: db.prepare(
        `INSERT INTO channel_personas (channel_id, prompt, set_by, set_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (channel_id) DO UPDATE SET prompt = excluded.prompt, set_by = excluded.set_by, set_at = excluded.set_at`,
      ),
      remove: db.prepare('DELETE FROM channel_personas WHERE channel_id = ?'),
    };
    this.ready = listPersonas(db).then((personas) => {
      for (const persona of personas) if (!this.cache.has(persona.channelId)) this.cache.set(persona.channelId, persona);
    });
    // Whoever awaits `ready` sees its error; nobody awaiting is no reason for an unhandled rejection.
    this.ready.catch(() => {});
  }

  get(channelId: string): Persona | undefined {
    return this.cache.get(channelId);
  }

  async set(channelId: string, prompt: string, setBy: string, now: number = Date.now()): Promise<Persona> {
    const persona: Persona = { channelId, prompt: validatePersona(prompt), setBy, setAt: now };
    await this.statements.upsert.run(channelId, persona.prompt, setBy, now);
    this.cache.set(channelId, persona);
    this.changed(channelId);
    return persona;
  }

  /** True when there was one to clear. */
  async clear(channelId: string): Promise<boolean> {
    const removed = (await this.statements.remove.run(channelId)).changes > 0;
    this.cache.delete(channelId);
    if (removed) this.changed(channelId);
    return removed;
  }

  /** Reads the channel's persona again (another process set or cleared it). */
  async reload(channelId: string): Promise<void> {
    const row = (await this.statements.one.get(channelId)) as PersonaRow | undefined;
    if (row) this.cache.set(channelId, toPersona(row));
    else this.cache.delete(channelId);
  }

  /** Reads every persona again (changes may have been missed while the feed was away). */
  async reloadAll(): Promise<void> {
    const personas = await listPersonas(this.db);
    this.cache.clear();
    for (const persona of personas) this.cache.set(persona.channelId, persona);
  }
}
