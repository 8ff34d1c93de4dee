/**
 * What the fake Discord knows, shared by its gateway, its REST routes and the test's own moves:
 * users, channels, roles and guilds, every message as Discord would return it, the files its CDN
 * serves, and the counter that makes snowflakes unique.
 */
import { FAKE_BOT_ID, FAKE_GUILD_ID, type FakeChannel, type FakeDiscordOptions, type FakeRole, type FakeUser } from './types.js';

const DISCORD_EPOCH = 1_420_070_400_000n;

/** A snowflake as Discord makes them: the time (ms since the epoch) in the upper bits, then 22 bits of sequence. */
export function snowflakeAt(at: number, sequence: bigint | number): string {
  return (((BigInt(Math.floor(at)) - DISCORD_EPOCH) << 22n) | (BigInt(sequence) & 0x3fffffn)).toString();
}

export class DiscordState {
  readonly users = new Map<string, FakeUser>();
  readonly channels = new Map<string, FakeChannel>();
  readonly roles: FakeRole[];
  /** Guilds besides the default one. */
  readonly extraGuilds: Array<{ id: string; name?: string }>;
  /** Every message (users' and the bot's) as a Discord message payload, by id; removed ones are gone. */
  readonly messages = new Map<string, Record<string, unknown>>();
  /** Files served by the CDN route, by path. */
  readonly files = new Map<string, { data: Buffer; contentType: string }>();
  private idCounter = 0n;

  constructor(options: FakeDiscordOptions) {
    this.users.set(FAKE_BOT_ID, { id: FAKE_BOT_ID, username: 'magpie', bot: true });
    for (const user of options.users ?? []) this.users.set(user.id, user);
    for (const channel of options.channels ?? []) this.channels.set(channel.id, channel);
    this.roles = options.roles ?? [];
    this.extraGuilds = options.guilds ?? [];
  }

  /** A fresh snowflake whose timestamp is now. */
  nextId(): string {
    return this.idAt(Date.now());
  }

  /** A fresh snowflake whose timestamp is `at` (ms since the epoch), so seeded history sorts by time. */
  idAt(at: number): string {
    this.idCounter += 1n;
    return snowflakeAt(at, this.idCounter);
  }

  requireUser(id: string): FakeUser {
    const user = this.users.get(id);
    if (!user) throw new Error(`fake discord: no user ${id}`);
    return user;
  }

  requireChannel(id: string): FakeChannel {
    const channel = this.channels.get(id);
    if (!channel) throw new Error(`fake discord: no channel ${id}`);
    return channel;
  }
}

/** The guild a channel belongs to; none for a DM. */
export function guildOf(channel: FakeChannel): string | undefined {
  return channel.type === 1 ? undefined : (channel.guildId ?? FAKE_GUILD_ID);
}
