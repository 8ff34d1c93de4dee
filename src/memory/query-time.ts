/**
 * Times named in text: a query's "on 3 October 2023", "in 2022", "last week", and a message's own
 * "yesterday", which speaks of the day before it was written. Search ranks messages near the
 * time a query names higher; no model, only the calendar.
 */

const DAY = 86_400_000;

const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'];
const MONTH = `(${MONTHS.map((name) => `${name.slice(0, 3)}(?:${name.slice(3)})?`).join('|')})\\.?`;
const monthIndex = (name: string): number => MONTHS.findIndex((month) => month.startsWith(name.toLowerCase().slice(0, 3)));

/** A stretch of time (UTC milliseconds, end exclusive); `month` alone matches that month in any year. */
export type TimeSpan = { start: number; end: number } | { month: number };

const PATTERNS: Array<{ pattern: RegExp; span: (match: RegExpExecArray, now: number) => TimeSpan | undefined }> = [
  // 2023-10-03
  { pattern: /\b((?:19|20)\d\d)-(\d\d?)-(\d\d?)\b/, span: (m) => day(Number(m[1]), Number(m[2]) - 1, Number(m[3])) },
  // 3 October 2023, 16 June, 2023
  {
    pattern: new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)?\\s+(?:of\\s+)?${MONTH},?\\s+((?:19|20)\\d\\d)\\b`, 'i'),
    span: (m) => day(Number(m[3]), monthIndex(m[2]!), Number(m[1])),
  },
  // October 3, 2023
  {
    pattern: new RegExp(`\\b${MONTH}\\s+(\\d{1,2})(?:st|nd|rd|th)?,?\\s+((?:19|20)\\d\\d)\\b`, 'i'),
    span: (m) => day(Number(m[3]), monthIndex(m[1]!), Number(m[2])),
  },
  // October 2023
  {
    pattern: new RegExp(`\\b${MONTH},?\\s+((?:19|20)\\d\\d)\\b`, 'i'),
    span: (m) => {
      const year = Number(m[2]);
      const month = monthIndex(m[1]!);
      return { start: Date.UTC(year, month, 1), end: Date.UTC(year, month + 1, 1) };
    },
  },
  // in 2022
  { pattern: /\b(?:in|during|of|since)\s+((?:19|20)\d\d)\b/i, span: (m) => ({ start: Date.UTC(Number(m[1]), 0, 1), end: Date.UTC(Number(m[1]) + 1, 0, 1) }) },
  // in June (any year: a conversation's own year is not the reader's)
  { pattern: new RegExp(`\\b(?:in|during|of)\\s+${MONTH}(?!\\w)`, 'i'), span: (m) => ({ month: monthIndex(m[1]!) }) },
  { pattern: /\byesterday\b/i, span: (_m, now) => dayOf(now - DAY) },
  { pattern: /\btoday\b/i, span: (_m, now) => dayOf(now) },
  { pattern: /\b(\d{1,2})\s+days?\s+ago\b/i, span: (m, now) => dayOf(now - Number(m[1]) * DAY) },
  { pattern: /\blast\s+week(?:end)?\b/i, span: (_m, now) => ({ start: startOfDay(now) - 7 * DAY, end: startOfDay(now) }) },
  { pattern: /\blast\s+month\b/i, span: (_m, now) => ({ start: startOfDay(now) - 31 * DAY, end: startOfDay(now) }) },
  { pattern: /\blast\s+year\b/i, span: (_m, now) => ({ start: Date.UTC(new Date(now).getUTCFullYear() - 1, 0, 1), end: Date.UTC(new Date(now).getUTCFullYear(), 0, 1) }) },
];

/** A time a text names, and where the words naming it stand (`from` inclusive, `to` exclusive). */
export interface NamedTime {
  span: TimeSpan;
  from: number;
  to: number;
}

/** The first time a text names, read relative to `now` where it is relative ("yesterday"). */
export function namedTime(text: string, now: number): NamedTime | undefined {
  for (const { pattern, span } of PATTERNS) {
    const match = pattern.exec(text);
    if (!match) continue;
    const found = span(match, now);
    if (found) return { span: found, from: match.index, to: match.index + match[0].length };
  }
  return undefined;
}

export function timeNamed(text: string, now: number): TimeSpan | undefined {
  return namedTime(text, now)?.span;
}

/** Relative words a message may use for the time it speaks of. */
const RELATIVE = /\b(yesterday|last\s+(?:week(?:end)?|month|year|night)|(\d{1,2})\s+days?\s+ago)\b/i;

/**
 * The moments a message is about: when it was written, and the day its "yesterday" or "last
 * week" refers to. A query naming that day finds both.
 */
export function timesOf(content: string, createdAt: number): number[] {
  const match = RELATIVE.exec(content);
  if (!match) return [createdAt];
  const word = match[1]!.toLowerCase();
  let back = DAY;
  if (match[2]) back = Number(match[2]) * DAY;
  else if (word.startsWith('last week')) back = 7 * DAY;
  else if (word === 'last month') back = 30 * DAY;
  else if (word === 'last year') back = 365 * DAY;
  return [createdAt, createdAt - back];
}

/** How close a moment is to a span: 1 inside it, falling to 0 at `slackDays` outside. */
export function nearness(span: TimeSpan, moment: number, slackDays: number): number {
  if ('month' in span) return new Date(moment).getUTCMonth() === span.month ? 1 : 0;
  if (moment >= span.start && moment < span.end) return 1;
  const distance = moment < span.start ? span.start - moment : moment - span.end;
  return Math.max(0, 1 - distance / (slackDays * DAY));
}

function day(year: number, month: number, date: number): TimeSpan | undefined {
  if (month < 0 || month > 11 || date < 1 || date > 31) return undefined;
  const start = Date.UTC(year, month, date);
  return { start, end: start + DAY };
}

function dayOf(moment: number): TimeSpan {
  const start = startOfDay(moment);
  return { start, end: start + DAY };
}

function startOfDay(moment: number): number {
  return Math.floor(moment / DAY) * DAY;
}
