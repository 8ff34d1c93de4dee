import type { DiscordSettings, ReplyPolicy } from '../config/types.js';

/** Who wrote a message, and where: everything the access decision needs, nothing more. */
export interface AccessSubject {
  selfId: string;
  authorId: string;
  authorIsBot: boolean;
  /** Undefined for a DM. */
  guildId?: string;
  channelId: string;
  /** For a thread: the channel it belongs to. */
  parentId?: string;
  /** The member's role ids (empty in DMs). */
  roleIds: readonly string[];
}

export type AccessDenial = 'self' | 'bot' | 'blocked' | 'dm' | 'guild' | 'channel' | 'member';

export type AccessDecision = { allowed: true } | { allowed: false; reason: AccessDenial };

type AccessSettings = Pick<
  DiscordSettings,
  'allowedGuilds' | 'allowedChannels' | 'allowedRoles' | 'allowedUsers' | 'blockedUsers' | 'dmUsers' | 'allowedBots'
>;

/**
 * Whether a message is taken in at all (recorded and possibly answered). A message that is
 * not allowed is ignored entirely: blocked users and other bots leave no trace in history.
 */
export function decideAccess(subject: AccessSubject, settings: AccessSettings): AccessDecision {
  if (subject.authorId === subject.selfId) return { allowed: false, reason: 'self' };
  const listedBot = subject.authorIsBot && settings.allowedBots.includes(subject.authorId);
  if (subject.authorIsBot && !listedBot) return { allowed: false, reason: 'bot' };
  if (settings.blockedUsers.includes(subject.authorId)) return { allowed: false, reason: 'blocked' };
  if (subject.guildId === undefined) {
    return settings.dmUsers.includes(subject.authorId) ? { allowed: true } : { allowed: false, reason: 'dm' };
  }
  if (settings.allowedGuilds.length > 0 && !settings.allowedGuilds.includes(subject.guildId)) {
    return { allowed: false, reason: 'guild' };
  }
  if (
    settings.allowedChannels.length > 0 &&
    !settings.allowedChannels.includes(subject.channelId) &&
    !(subject.parentId !== undefined && settings.allowedChannels.includes(subject.parentId))
  ) {
    return { allowed: false, reason: 'channel' };
  }
  // A bot listed by the operator is trusted like a listed user.
  if (listedBot) return { allowed: true };
  const restrictsUsers = settings.allowedUsers.length > 0;
  const restrictsRoles = settings.allowedRoles.length > 0;
  if (!restrictsUsers && !restrictsRoles) return { allowed: true };
  const listedUser = restrictsUsers && settings.allowedUsers.includes(subject.authorId);
  const hasRole = restrictsRoles && subject.roleIds.some((role) => settings.allowedRoles.includes(role));
  return listedUser || hasRole ? { allowed: true } : { allowed: false, reason: 'member' };
}

export interface ReplyTrigger {
  mentionsBot: boolean;
  repliesToBot: boolean;
  isDm: boolean;
}

/** `mention`: when mentioned or replied to (and every DM); `always`; `listen`: never. */
export function shouldReply(policy: ReplyPolicy, trigger: ReplyTrigger): boolean {
  switch (policy) {
    case 'always':
      return true;
    case 'listen':
      return false;
    case 'mention':
      return trigger.isDm || trigger.mentionsBot || trigger.repliesToBot;
  }
}
