import {
  Events,
  type Channel,
  type Client,
  type Interaction,
  type Message,
  type PartialMessage,
} from 'discord.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import { GatewayOutages } from './gateway-outages.js';
import type { LiveConfig } from '../config/live-config.js';
import type { HistoryEntry, IncomingMessage } from '../context/types.js';
import type { RedactedReply } from '../channel/message-changes.js';
import { SerialQueue } from '../channel/serial-queue.js';
import type { MemoryLocation, MemoryStore } from '../memory/types.js';
import type { ChannelResponder, ResponderRuntime } from '../app/channel-responder.js';
import type { CommandRuntime, TaskControl } from '../app/channel-commands.js';
import type { ResolvedAttachment } from '../attachments/resolve-attachments.js';
import { ErasureConfirmations } from '../app/forget-me.js';
import { StorageHealth } from '../storage/storage-health.js';
import { withStorageRetry } from '../storage/storage-retry.js';
import { decideAccess, shouldReply } from './access-policy.js';
import { interactionSubject, messageSubject } from './access-subject.js';
import { ChannelCatchUp, type CatchUpSource } from './catch-up.js';
import { catchMalformedPackets, destroyClient } from './client.js';
import { Debouncer } from './debouncer.js';
import { attachMessageFiles } from './message-files.js';
import { normalizeMessage, type NormalizedMessage } from './normalize-message.js';
import { editOwnReply } from './own-reply-editor.js';
import { replyTarget } from './reply-target.js';
import { handleSlashCommand, registerCommands } from './slash-commands.js';
import { knownViews, viewOf } from './view-key.js';
import type { ChannelView } from '../privacy/channel-views.js';
import { sameMessageText } from '../privacy/reply-reference.js';

/** Everything the adapter asks of the channel runtime (`ChannelRuntime` satisfies it). */
export interface DiscordRuntime extends ResponderRuntime, CommandRuntime {
  ingest(message: IncomingMessage): Promise<HistoryEntry>;
  editMessage(channelId: string, messageId: string, content: string): unknown;
  deleteMessages(channelId: string, messageIds: string[]): unknown;
  /** Own replies that lost a quote of a deleted message (the Discord copy is edited likewise). */
  onReplyRedacted?(listener: (reply: RedactedReply) => void): () => void;
  /** Gives the model the files of a message it will answer (absent: files stay placeholders). */
  attachFiles?(channelId: string, messageId: string, files: readonly ResolvedAttachment[]): unknown;
}

export interface DiscordAdapterOptions {
  client: Client;
  runtime: DiscordRuntime;
  responder: ChannelResponder;
  memory: MemoryStore;
  config: LiveConfig;
  events: EventStream;
  /** Background workers, for `/tasks`. */
  workers?: TaskControl;
  /** Readiness of the data dir: failed writes make it unhealthy until one succeeds (retried with backoff). */
  storage?: StorageHealth;
  /** Named in storage errors. */
  dataDir?: string;
  /** Where active channels' stored history ends: enables catch-up after restarts and unresumable reconnects. */
  catchUp?: CatchUpSource;
  /** Waits between attempts of a failed write (default: 0.25 s doubling to 30 s). */
  storageRetryDelaysMs?: readonly number[];
}

/** One message of a burst waiting for its turn. */
interface PendingTrigger {
  message: Message;
  normalized: NormalizedMessage;
  entry: HistoryEntry;
  /** Ends the hold that keeps the message live until its turn takes it over (see `onMessage`). */
  release: () => void;
}

/** Newest triggering messages a burst keeps while it waits (older ones are in history anyway). */
const MAX_BURST_TRIGGERS = 50;

/**
 * Connects discord.js to the channel runtime: every allowed message is recorded, replies
 * follow the channel's reply policy after a short debounce, edits and deletes reach history,
 * archive and memory, and slash commands are answered. A bad event is logged and skipped; it
 * never takes the bot down.
 */
export class DiscordAdapter {
  private readonly debouncer: Debouncer<PendingTrigger>;
  private accepting = false;
  /** False once shutdown begins: messages are still recorded until disconnect, not answered. */
  private replying = false;
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Set by `stop`, which may come while `start` is still connecting. */
  private stopped = false;
  /** Aborted by `stop`: a write waiting to be retried gives up then rather than after its backoff. */
  private readonly stopping = new AbortController();
  /** Pending `/memory forget-me` confirmation codes. */
  private readonly confirmations = new ErasureConfirmations();
  private readonly storage: StorageHealth;
  private readonly catchUp: ChannelCatchUp | undefined;
  /** Gateway sessions that turned ready: the first is the start, later ones could not resume. */
  private sessions = 0;
  private readonly outages: GatewayOutages;
  /** Per channel, the newest message's turn to reach the store (see `arrivalOrder`). */
  private readonly arrivals = new Map<string, Promise<void>>();
  /** Edits of the bot's own replies that lost a quote, in order per channel. */
  private readonly replyEdits = new SerialQueue();
  /** A message could not be stored: once storage takes writes again, a catch-up fetches it. */
  private lostWhileUnhealthy = false;

  constructor(private readonly options: DiscordAdapterOptions) {
    this.debouncer = new Debouncer((channelId, burst) => this.fireTurn(channelId, burst), MAX_BURST_TRIGGERS, (trigger) => trigger.release());
    this.outages = new GatewayOutages(options.events);
    this.storage = options.storage ?? new StorageHealth({ dataDir: options.dataDir ?? 'data dir', events: options.events });
    if (options.catchUp) {
      this.catchUp = new ChannelCatchUp({
        client: options.client,
        source: options.catchUp,
        events: options.events,
        record: (message) => this.recordMissed(message),
        // Not `onDelete` / `onEdit`: those wait for the channel's catch-up, which is the caller here.
        remove: (channelId, messageIds) => this.applyDelete(channelId, messageIds),
        edit: (message, stored) => this.applyEdit(message, stored),
        limits: () => {
          const discord = options.config.current().discord;
          return { channels: discord.catchUpChannels, messagesPerChannel: discord.catchUpMessages };
        },
      });
      const catchUp = this.catchUp;
      this.storage.onChange((healthy) => {
        if (!healthy || !this.lostWhileUnhealthy || this.stopped || !this.accepting) return;
        this.lostWhileUnhealthy = false;
        this.track('catch_up', () => catchUp.run('storage_recovered'));
      });
    }
  }

  /** False while writes to the data dir fail (readiness); see `StorageHealth`. */
  get storageHealthy(): boolean {
    return this.storage.healthy;
  }

  private get selfId(): string {
    return this.options.client.user?.id ?? '';
  }

  /** Logs in, waits until the guilds are in, registers commands when configured. */
  async start(token: string): Promise<void> {
    const { client, config } = this.options;
    this.attach();
    const ready = new Promise<void>((resolve) => client.once(Events.ClientReady, () => resolve()));
    await client.login(token);
    await ready;
    if (this.stopped) return;
    if (client.user) this.options.responder.setIdentity({ id: client.user.id, name: client.user.displayName });
    this.accepting = true;
    this.replying = true;
    this.options.events.emit({ type: 'discord_ready', guilds: client.guilds.cache.size });
    for (const view of knownViews(client)) void this.recordView(view);
    const discord = config.current().discord;
    if (discord.registerCommands && client.isReady()) {
      try {
        await registerCommands(client, { guildIds: discord.allowedGuilds });
      } catch (error) {
        this.options.events.emit({ type: 'discord_commands_failed', error: errorMessage(error) });
      }
    }
  }

  /**
   * Stops starting turns (bursts already waiting get theirs now), lets running turns finish
   * within `graceMs` while messages that still arrive are recorded, then disconnects.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    this.replying = false;
    this.debouncer.flushAll();
    await this.options.responder.drain(graceMs);
    this.accepting = false;
    await destroyClient(this.options.client);
    await Promise.allSettled([...this.inFlight]);
  }

  /** Resolves when every event handler started so far is done (tests, benchmarks). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0 || this.debouncer.size > 0 || this.options.responder.pending > 0) {
      await Promise.allSettled([...this.inFlight]);
      await this.options.responder.idle();
      if (this.debouncer.size > 0) await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  private attach(): void {
    const { client, events } = this.options;
    client.on(Events.MessageCreate, (message) => this.track('message_create', () => this.onMessage(message)));
    client.on(Events.MessageUpdate, (previous, next) => this.track('message_update', () => this.onEdit(previous, next)));
    this.options.runtime.onReplyRedacted?.((reply) => {
      if (this.options.config.current().privacy?.editOwnReplies === false) return;
      // One after another per channel: a reply redacted twice in quick succession ends as the
      // second redaction says, never as the first.
      this.track('own_reply_edit', () =>
        this.replyEdits.run(reply.channelId, async () => {
          const edited = await editOwnReply(client, reply);
          events.emit({ type: 'own_reply_edited', channel_id: reply.channelId, messages_edited: edited });
        }),
      );
    });
    client.on(Events.MessageDelete, (message) => this.track('message_delete', () => this.onDelete(message.channelId, [message.id])));
    client.on(Events.MessageBulkDelete, (messages, channel) =>
      this.track('message_delete_bulk', () => this.onDelete(channel.id, [...messages.keys()])),
    );
    client.on(Events.ChannelUpdate, (_previous, next) => this.track('channel_update', async () => this.onChannelUpdate(next)));
    client.on(Events.ThreadCreate, (thread) => this.track('thread_create', async () => this.onChannelUpdate(thread)));
    client.on(Events.InteractionCreate, (interaction) => this.track('interaction_create', () => this.onInteraction(interaction)));
    catchMalformedPackets(client, (eventType, error) => events.emit({ type: 'discord_event_malformed', event_type: eventType, error: errorMessage(error) }));
    // Without these listeners an 'error' event would throw and end the process.
    client.on(Events.Error, (error) => events.emit({ type: 'discord_error', error: errorMessage(error) }));
    client.on(Events.ShardError, (error) => events.emit({ type: 'discord_error', error: errorMessage(error) }));
    // Closing the gateway on shutdown is not a reconnect worth telling the operator about.
    client.on(Events.ShardReconnecting, (shardId) => {
      if (this.accepting) this.outages.reconnecting(shardId);
    });
    client.on(Events.ShardDisconnect, (event, shardId) => {
      if (this.accepting) events.emit({ type: 'discord_disconnected', shard_id: shardId, code: event.code });
    });
    client.on(Events.ShardResume, (shardId, replayed) => {
      events.emit({ type: 'discord_resumed', shard_id: shardId, replayed });
      this.outages.back(shardId, true);
    });
    // A resumed session replays what was missed; a new one (start, invalid session) does not.
    client.on(Events.ShardReady, (shardId) => {
      this.outages.back(shardId, false);
      this.sessions += 1;
      const catchUp = this.catchUp;
      if (!catchUp || this.stopped) return;
      const reason = this.sessions === 1 ? 'start' : 'new_session';
      this.track('catch_up', () => catchUp.run(reason));
    });
  }

  /**
   * Stores a message, retrying a failed write with backoff while storage is unhealthy.
   * Undefined when it could not be stored: such a message is never answered.
   */
  private store(incoming: IncomingMessage): Promise<HistoryEntry | undefined> {
    // The first attempt on its own: a write that succeeds (nearly every one) costs no retry machinery.
    let attempt: Promise<HistoryEntry>;
    try {
      attempt = this.options.runtime.ingest(incoming);
    } catch (error) {
      return this.storeRetrying(incoming, error);
    }
    return attempt.then(
      (entry) => {
        this.storage.reportSuccess();
        return entry;
      },
      (error: unknown) => this.storeRetrying(incoming, error),
    );
  }

  private async storeRetrying(incoming: IncomingMessage, firstError: unknown): Promise<HistoryEntry | undefined> {
    try {
      return await withStorageRetry(() => this.options.runtime.ingest(incoming), {
        health: this.storage,
        dataDir: this.options.dataDir ?? 'data dir',
        signal: this.stopping.signal,
        ...(this.options.storageRetryDelaysMs ? { delaysMs: this.options.storageRetryDelaysMs } : {}),
        onRetry: (attempt, delayMs, error) =>
          this.options.events.emit({ type: 'message_store_retry', channel_id: incoming.channelId, attempt, delay_ms: delayMs, error: errorMessage(error) }),
        firstFailure: { error: firstError },
      });
    } catch (error) {
      this.options.events.emit({ type: 'message_store_failed', channel_id: incoming.channelId, error: errorMessage(error) });
      this.lostWhileUnhealthy = true;
      return undefined;
    }
  }

  /** A message fetched by catch-up: recorded like a live one, not answered. */
  private async recordMissed(message: Message): Promise<void> {
    if (message.system) return;
    const normalized = normalizeMessage(message, this.selfId);
    if (!this.admit(normalized)) return;
    await this.store(normalized.incoming);
  }

  private track(what: string, work: () => Promise<void>): void {
    const promise = work().catch((error: unknown) => {
      this.options.events.emit({ type: 'discord_event_failed', handler: what, error: errorMessage(error) });
    });
    this.inFlight.add(promise);
    void promise.finally(() => this.inFlight.delete(promise));
  }

  /**
   * A message's place in its channel's arrival order: `ready` resolves once every earlier
   * message of the channel has reached the store (or was dropped); `done` hands the turn on.
   */
  private arrivalOrder(channelId: string): { ready: Promise<void>; done(): void } {
    const previous = this.arrivals.get(channelId) ?? Promise.resolve();
    let handOn!: () => void;
    const mine = new Promise<void>((resolve) => (handOn = resolve));
    this.arrivals.set(channelId, mine);
    let handed = false;
    return {
      ready: previous,
      done: () => {
        if (handed) return;
        handed = true;
        // Never before the earlier ones: a message dropped early still waits its turn to hand on.
        void previous.then(() => {
          handOn();
          if (this.arrivals.get(channelId) === mine) this.arrivals.delete(channelId);
        });
      },
    };
  }

  private admit(normalized: NormalizedMessage): boolean {
    const decision = decideAccess(messageSubject(normalized, this.selfId), this.options.config.current().discord);
    if (!decision.allowed && decision.reason !== 'self') {
      this.options.events.emit({ type: 'message_ignored', channel_id: normalized.incoming.channelId, reason: decision.reason });
    }
    return decision.allowed;
  }

  private async onMessage(message: Message): Promise<void> {
    if (!this.accepting || message.system) return;
    // Taken in arrival order: the awaits below (a partial's fetch, the view's write, a network
    // store) may answer a later message first, and a channel's sequence must not swap them.
    const turnToStore = this.arrivalOrder(message.channelId);
    let entry: HistoryEntry | undefined;
    let normalized: NormalizedMessage;
    try {
      if (message.partial) message = await message.fetch();
      normalized = normalizeMessage(message, this.selfId);
      if (!this.admit(normalized)) return;
      // Before the message can become a memory, its channel's view permissions are on record.
      const view = viewOf(message.channel);
      if (view) await this.recordView(view);
      // Messages missed during an outage go first, in order; this one is answered after them.
      const catchingUp = this.catchUp?.before(normalized.incoming.channelId);
      if (catchingUp) await catchingUp;
      await turnToStore.ready;
      // The runtime takes the message's place in the channel as soon as `store` is called.
      const storing = this.store(normalized.incoming);
      turnToStore.done();
      entry = await storing;
    } finally {
      turnToStore.done();
    }
    if (!entry) return;
    const policy = this.options.config.settingsFor(normalized.incoming.channelId, normalized.parentId).replyPolicy;
    const trigger = {
      mentionsBot: normalized.mentionsBot,
      repliesToBot: normalized.repliesToBot,
      isDm: normalized.incoming.guildId === undefined,
    };
    if (!this.replying || !shouldReply(policy, trigger)) return;
    // The message is to be answered: no compaction takes it while its files download and the
    // burst waits, nor (the responder holds it then) until its turn has run.
    const release = this.options.runtime.awaitAnswer(normalized.incoming.channelId, entry.turnId);
    try {
      // Files of a message the bot answers are downloaded once, before its turn.
      if (message.attachments.size > 0 && this.options.runtime.attachFiles) await attachMessageFiles(this.options, message, normalized);
    } catch (error) {
      release();
      throw error;
    }
    const discord = this.options.config.current().discord;
    this.debouncer.push(
      normalized.incoming.channelId,
      { message, normalized, entry, release },
      { quietMs: discord.debounceMs, maxWaitMs: discord.debounceMaxMs },
    );
  }

  private fireTurn(channelId: string, burst: PendingTrigger[]): void {
    const last = burst.at(-1);
    if (!last) return;
    const { incoming, parentId } = last.normalized;
    // Tracked by the responder, whose drain bounds the wait at shutdown.
    void this.options.responder.respond({
      channelId,
      ...(parentId ? { parentId } : {}),
      userId: incoming.authorId,
      turnId: last.entry.turnId,
      answers: burst.map((item) => item.entry.turnId),
      context: {
        ...this.locationOf(incoming),
        sourceMessageIds: burst.map((item) => item.normalized.incoming.messageId),
      },
      target: replyTarget(last.message),
    });
    // The responder holds them now (it took its holds as it was called).
    for (const item of burst) item.release();
  }

  private locationOf(incoming: IncomingMessage): MemoryLocation {
    return {
      channelId: incoming.channelId,
      ...(incoming.guildId ? { guildId: incoming.guildId } : {}),
      ...(incoming.dmUserId ? { dmUserId: incoming.dmUserId } : {}),
    };
  }

  /**
   * Edits and deletes are never dropped, unlike new messages before ready (those the start's
   * catch-up fetches). Their listeners are attached before login, so one that comes while the
   * bot starts is handled at once, queued behind its channel's catch-up: a page of history the
   * catch-up already read could otherwise be recorded after the change and bring the old text
   * back. During shutdown `stop` waits for every handler started before the disconnect, so the
   * change lands before the store closes; one made after the disconnect sends the bot nothing,
   * and is then reconciled by the next start's catch-up (within its recent window).
   */
  private async afterCatchUp(channelId: string): Promise<void> {
    const catchingUp = this.catchUp?.before(channelId);
    if (catchingUp) await catchingUp;
  }

  /**
   * An edit applies whenever it comes (while starting or stopping too) and whoever is allowed to
   * talk to the bot now: the old text of a stored message must leave every copy. Only the bot's
   * own edits (its streamed replies) are its own business.
   */
  private async onEdit(previous: Message | PartialMessage, next: Message | PartialMessage): Promise<void> {
    await this.afterCatchUp(next.channelId);
    if (next.partial) next = await next.fetch();
    const message = next as Message;
    if (!previous.partial && previous.content === message.content) return; // embeds unfurled, pins...
    await this.applyEdit(message);
  }

  /**
   * The one edit path: live events and the catch-up's reconciliation both end here. With
   * `stored` (the catch-up), only text that differs from it is an edit; a reply's label, which
   * names the answered message's author only when discord.js has that message cached, does not
   * count. True when the edit was handed to the runtime.
   */
  private async applyEdit(message: Message, stored?: string): Promise<boolean> {
    if (message.author?.id === this.selfId) return false;
    const normalized = normalizeMessage(message, this.selfId);
    const { channelId, content } = normalized.incoming;
    if (stored !== undefined && sameMessageText(stored, content)) return false;
    await this.options.runtime.editMessage(channelId, message.id, content);
    this.options.events.emit({ type: 'message_edited', channel_id: channelId });
    return true;
  }

  private async onDelete(channelId: string, messageIds: string[]): Promise<void> {
    await this.afterCatchUp(channelId);
    await this.applyDelete(channelId, messageIds);
  }

  /** The one delete path: live events and the catch-up's reconciliation both end here. */
  private async applyDelete(channelId: string, messageIds: string[]): Promise<void> {
    if (messageIds.length === 0) return;
    await this.options.runtime.deleteMessages(channelId, messageIds);
    this.options.events.emit({ type: 'messages_deleted', channel_id: channelId, count: messageIds.length });
  }

  /** Permission overwrites changed: guild scope re-checks what this channel may share. */
  private onChannelUpdate(channel: Channel): void {
    const view = viewOf(channel);
    if (view) void this.recordView(view);
  }

  /** Never rejects: a view that could not be recorded is reported (the next update records it). */
  private async recordView(view: ChannelView): Promise<void> {
    try {
      if (await this.options.memory.recordChannelView?.(view)) {
        this.options.events.emit({ type: 'channel_view_recorded', channel_id: view.channelId });
      }
    } catch (error) {
      this.options.events.emit({ type: 'channel_view_failed', channel_id: view.channelId, error: errorMessage(error) });
    }
  }

  private async onInteraction(interaction: Interaction): Promise<void> {
    if (!interaction.isChatInputCommand()) return;
    const channelId = interaction.channelId;
    const isDm = !interaction.inGuild();
    const decision = decideAccess(interactionSubject(interaction, this.selfId), this.options.config.current().discord);
    if (!decision.allowed || !this.accepting) {
      await interaction.reply({ content: 'Magpie is not available here.', flags: 64 });
      return;
    }
    await handleSlashCommand(
      interaction,
      {
        runtime: this.options.runtime,
        memory: this.options.memory,
        events: this.options.events,
        confirmations: this.confirmations,
        ...(this.options.workers ? { workers: this.options.workers } : {}),
        ...(this.options.config.file ? { configFile: this.options.config.file } : {}),
      },
      {
        channelId,
        ...(interaction.guildId ? { guildId: interaction.guildId } : {}),
        ...(isDm ? { dmUserId: interaction.user.id } : {}),
      },
    );
  }
}
