/**
 * What the bot did over REST, kept in order for tests to assert on, and the waits for the two
 * things tests most often wait for: a posted message and an interaction reply.
 */
import type { InteractionReply, MessageEdit, PostedMessage, RecordedRequest } from './types.js';
import { settle, waitOn, type Waiter } from './waiters.js';

export class BotRecords {
  readonly requests: RecordedRequest[] = [];
  readonly posted: PostedMessage[] = [];
  readonly typing: string[] = [];
  /** When each typing request came (ms since the epoch), parallel to `typing`. */
  readonly typingAt: number[] = [];
  /** The bot's PATCH and DELETE requests on its messages, in order, with timestamps. */
  readonly edits: MessageEdit[] = [];
  /** How many times each CDN file was downloaded, by file name. */
  readonly downloads = new Map<string, number>();
  readonly interactionReplies: InteractionReply[] = [];
  readonly registeredCommands: Array<{ scope: string; commands: unknown[] }> = [];
  /** GET /channels/:id/messages requests received (catch-up), in order. */
  readonly historyRequests: Array<{ channelId: string; after?: string; before?: string; around?: string }> = [];
  private readonly postWaiters = new Set<Waiter<PostedMessage>>();
  private readonly interactionWaiters = new Set<Waiter<InteractionReply>>();

  addPost(posted: PostedMessage): void {
    this.posted.push(posted);
    settle(this.postWaiters, posted);
  }

  addInteractionReply(reply: InteractionReply): void {
    this.interactionReplies.push(reply);
    settle(this.interactionWaiters, reply);
  }

  /** The next posted message matching the predicate (already posted ones count). */
  waitForPost(predicate: (message: PostedMessage) => boolean, options: { timeoutMs?: number } = {}): Promise<PostedMessage> {
    const existing = this.posted.find(predicate);
    if (existing) return Promise.resolve(existing);
    return waitOn(this.postWaiters, predicate, options.timeoutMs ?? 5_000, 'posted message');
  }

  waitForInteractionReply(
    predicate: (reply: InteractionReply) => boolean,
    options: { timeoutMs?: number } = {},
  ): Promise<InteractionReply> {
    const existing = this.interactionReplies.find(predicate);
    if (existing) return Promise.resolve(existing);
    return waitOn(this.interactionWaiters, predicate, options.timeoutMs ?? 5_000, 'interaction reply');
  }
}
