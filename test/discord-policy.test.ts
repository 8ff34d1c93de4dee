import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decideAccess, shouldReply, type AccessSubject } from '../src/discord/access-policy.js';
import { DailyTokenBudget, UserRateLimiter } from '../src/app/cost-guards.js';
import { Debouncer } from '../src/discord/debouncer.js';
import { DEFAULTS } from '../src/config/defaults.js';

const open = DEFAULTS.discord;
const base: AccessSubject = {
  selfId: 'bot',
  authorId: 'alice',
  authorIsBot: false,
  guildId: 'g1',
  channelId: 'c1',
  roleIds: [],
};

test('open defaults let guild members in and keep DMs off', () => {
  assert.deepEqual(decideAccess(base, open), { allowed: true });
  assert.deepEqual(decideAccess({ ...base, guildId: undefined }, open), { allowed: false, reason: 'dm' });
  assert.deepEqual(decideAccess({ ...base, guildId: undefined }, { ...open, dmUsers: ['alice'] }), { allowed: true });
});

test('the bot itself and other bots are ignored unless allowed', () => {
  assert.deepEqual(decideAccess({ ...base, authorId: 'bot', authorIsBot: true }, open), { allowed: false, reason: 'self' });
  assert.deepEqual(
    decideAccess({ ...base, authorId: 'bot', authorIsBot: true }, { ...open, allowedBots: ['bot'] }),
    { allowed: false, reason: 'self' },
  );
  assert.deepEqual(decideAccess({ ...base, authorId: 'other', authorIsBot: true }, open), { allowed: false, reason: 'bot' });
  assert.deepEqual(
    decideAccess({ ...base, authorId: 'other', authorIsBot: true }, { ...open, allowedBots: ['other'], allowedRoles: ['r1'] }),
    { allowed: true },
  );
});

test('blocked users are refused everywhere, even when listed', () => {
  const settings = { ...open, blockedUsers: ['alice'], allowedUsers: ['alice'], dmUsers: ['alice'] };
  assert.deepEqual(decideAccess(base, settings), { allowed: false, reason: 'blocked' });
  assert.deepEqual(decideAccess({ ...base, guildId: undefined }, settings), { allowed: false, reason: 'blocked' });
});

test('guild and channel lists; threads inherit their parent', () => {
  assert.deepEqual(decideAccess(base, { ...open, allowedGuilds: ['g2'] }), { allowed: false, reason: 'guild' });
  assert.deepEqual(decideAccess(base, { ...open, allowedGuilds: ['g1'] }), { allowed: true });
  const channels = { ...open, allowedChannels: ['c1'] };
  assert.deepEqual(decideAccess({ ...base, channelId: 'c2' }, channels), { allowed: false, reason: 'channel' });
  assert.deepEqual(decideAccess({ ...base, channelId: 'thread', parentId: 'c1' }, channels), { allowed: true });
  assert.deepEqual(decideAccess({ ...base, channelId: 'thread', parentId: 'c2' }, channels), { allowed: false, reason: 'channel' });
});

test('roles and users: either list admits', () => {
  const settings = { ...open, allowedRoles: ['mods'], allowedUsers: ['bob'] };
  assert.deepEqual(decideAccess(base, settings), { allowed: false, reason: 'member' });
  assert.deepEqual(decideAccess({ ...base, roleIds: ['mods'] }, settings), { allowed: true });
  assert.deepEqual(decideAccess({ ...base, authorId: 'bob' }, settings), { allowed: true });
  assert.deepEqual(decideAccess(base, { ...open, allowedUsers: ['alice'] }), { allowed: true });
});

test('reply policy: mention, always, listen; DMs answer unless listening', () => {
  const quiet = { mentionsBot: false, repliesToBot: false, isDm: false };
  assert.equal(shouldReply('mention', quiet), false);
  assert.equal(shouldReply('mention', { ...quiet, mentionsBot: true }), true);
  assert.equal(shouldReply('mention', { ...quiet, repliesToBot: true }), true);
  assert.equal(shouldReply('mention', { ...quiet, isDm: true }), true);
  assert.equal(shouldReply('always', quiet), true);
  assert.equal(shouldReply('listen', { mentionsBot: true, repliesToBot: true, isDm: true }), false);
});

test('rate limiter: a sliding minute per user', () => {
  let now = 1_000_000;
  const limiter = new UserRateLimiter({ now: () => now });
  assert.equal(limiter.tryAcquire('alice', 2), true);
  assert.equal(limiter.tryAcquire('alice', 2), true);
  assert.equal(limiter.tryAcquire('alice', 2), false);
  assert.equal(limiter.tryAcquire('bob', 2), true);
  assert.ok(limiter.retryAfterSeconds('alice') > 0);
  now += 60_001;
  assert.equal(limiter.tryAcquire('alice', 2), true);
  assert.equal(limiter.tryAcquire('alice', 0), true);
});

test('daily token budget resets at the UTC day boundary', () => {
  let now = Date.UTC(2026, 0, 1, 23, 0);
  const budget = new DailyTokenBudget({ now: () => now });
  budget.record('c1', 600);
  assert.equal(budget.exhausted('c1', 1000), false);
  budget.record('c1', 500);
  assert.equal(budget.exhausted('c1', 1000), true);
  assert.equal(budget.exhausted('c1', 0), false);
  assert.equal(budget.exhausted('c2', 1000), false);
  now = Date.UTC(2026, 0, 2, 0, 1);
  assert.equal(budget.spentToday('c1'), 0);
});

test('debouncer coalesces a burst and honours the maximum wait', async () => {
  const fired: Array<{ key: string; items: number[] }> = [];
  let resolveFired: () => void = () => {};
  const done = new Promise<void>((resolve) => (resolveFired = resolve));
  const debouncer = new Debouncer<number>((key, items) => {
    fired.push({ key, items });
    if (fired.length === 2) resolveFired();
  });
  debouncer.push('a', 1, { quietMs: 30, maxWaitMs: 1000 });
  debouncer.push('a', 2, { quietMs: 30, maxWaitMs: 1000 });
  debouncer.push('b', 3, { quietMs: 0, maxWaitMs: 0 });
  await done;
  assert.deepEqual(fired.find((entry) => entry.key === 'a')?.items, [1, 2]);
  assert.deepEqual(fired.find((entry) => entry.key === 'b')?.items, [3]);
  debouncer.push('c', 4, { quietMs: 10_000, maxWaitMs: 10_000 });
  debouncer.cancelAll();
  assert.equal(debouncer.size, 0);
});

test('debouncer hands what it lets go without firing to its dropped callback', () => {
  const fired: number[][] = [];
  const dropped: number[] = [];
  const debouncer = new Debouncer<number>((_key, items) => fired.push(items), 2, (item) => dropped.push(item));
  for (const item of [1, 2, 3]) debouncer.push('a', item, { quietMs: 10_000, maxWaitMs: 10_000 });
  assert.deepEqual(dropped, [1], 'over the cap: the oldest');
  debouncer.push('b', 4, { quietMs: 10_000, maxWaitMs: 10_000 });
  debouncer.cancelAll();
  assert.deepEqual(dropped.sort(), [1, 2, 3, 4]);
  assert.deepEqual(fired, []);
});
