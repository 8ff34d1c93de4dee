import { snowflakeProblem, SNOWFLAKE_RULE } from '../common/snowflake.js';
import { DEFAULTS } from './defaults.js';
import { checkAnswerRoom, checkDiscordTiming, checkSummaryRoom, checkThresholdOrder } from './cross-checks.js';
import { CHANNEL_SPEC, COMPACTION_SPEC, CONFIG_SPEC, snakeToCamel, type TableSpec } from './schema.js';
import type { ChannelSettings, CompactionSettings, MagpieConfig } from './types.js';
import { isTable, report, validateTable, type PartialSettings, type ValidationSink } from './validate-table.js';

/** Top-level keys, with `channels` known for typo hints though its entries are free-form ids. */
const TOP_LEVEL_SPEC: TableSpec = { ...CONFIG_SPEC, channels: { kind: 'table', fields: {} } };

/**
 * Turns a parsed TOML document into a complete config: validated values over `DEFAULTS`,
 * channel overrides merged over the result's `[defaults]`. Problems go to `sink`; the returned
 * config is only meaningful when none were found.
 */
export function buildConfig(document: Record<string, unknown>, sink: ValidationSink): MagpieConfig {
  // A private copy, so freezing the result never freezes the shared DEFAULTS constant.
  const base: MagpieConfig = structuredClone(DEFAULTS);
  const { channels: rawChannels, ...rest } = document;
  const partial = validateTable(rest, TOP_LEVEL_SPEC, [], '', sink);

  const defaultsSection = sectionOf(partial, 'defaults');
  const defaults = mergeChannel(base.defaults, defaultsSection);
  const defaultsCompaction = sectionOf(defaultsSection, 'compaction');
  const compactionKeys = new Set(Object.keys(defaultsCompaction));
  const rawDefaults = rawSection(document, 'defaults');
  const defaultsRefused = refusedKeys(rawDefaults, defaultsSection);
  const defaultsCompactionRefused = refusedCompactionKeys(rawDefaults, defaultsSection);
  const defaultsAllRefused = new Set([...defaultsRefused, ...defaultsCompactionRefused]);
  checkThresholdOrder(defaults.compaction, compactionKeys, ['defaults', 'compaction'], sink, {
    isOverride: false,
    refused: defaultsCompactionRefused,
  });
  checkAnswerRoom(defaults, new Set([...Object.keys(defaultsSection), ...compactionKeys]), ['defaults'], sink, {
    isOverride: false,
    refused: defaultsAllRefused,
  });
  checkSummaryRoom(defaults, compactionKeys, ['defaults'], sink, { refused: defaultsAllRefused });

  const channels: Record<string, ChannelSettings> = {};
  if (rawChannels !== undefined) {
    if (!isTable(rawChannels)) {
      report(sink, ['channels'], 'must be a table of per-channel tables ([channels."<id>"])');
    } else {
      for (const [channelId, rawOverride] of Object.entries(rawChannels)) {
        const filePath = ['channels', channelId];
        // Discord sends ids as it writes them, so a name, a stray space or a number past 2^64
        // would be an override that never applies, silently. Checked before anything is stored:
        // `__proto__` would replace the prototype of the channel map instead of adding a channel.
        const isChannelId = snowflakeProblem(channelId) === undefined;
        if (!isChannelId) {
          report(
            sink,
            filePath,
            `is not a channel id: an id is ${SNOWFLAKE_RULE}; copy the channel's id in Discord ` +
              '(turn on Developer Mode, right-click the channel, Copy ID) and write it quoted: [channels."123456789012345678"]',
          );
        }
        if (!isTable(rawOverride)) {
          report(sink, filePath, `must be a table ([channels."${channelId}"]) of [defaults] keys`);
          continue;
        }
        const override = validateTable(rawOverride, CHANNEL_SPEC, filePath, 'defaults', sink);
        const merged = mergeChannel(defaults, override);
        const ownCompaction = sectionOf(override, 'compaction');
        const ownKeys = new Set(Object.keys(ownCompaction));
        // A key of [defaults] whose value was refused reaches the channel as the built-in default
        // standing in for it, unless the channel sets it itself: no cross-check may hold that
        // stand-in against the channel (its error is reported once, at [defaults]).
        const compactionRefused = new Set([
          ...refusedCompactionKeys(rawOverride, override),
          ...notSetIn(defaultsCompactionRefused, ownCompaction),
        ]);
        const allRefused = new Set([...refusedKeys(rawOverride, override), ...notSetIn(defaultsRefused, override), ...compactionRefused]);
        checkThresholdOrder(merged.compaction, ownKeys, [...filePath, 'compaction'], sink, { isOverride: true, refused: compactionRefused });
        checkAnswerRoom(merged, new Set([...Object.keys(override), ...ownKeys]), filePath, sink, { isOverride: true, refused: allRefused });
        checkSummaryRoom(merged, ownKeys, filePath, sink, { refused: allRefused });
        // Its keys were still checked, so one pass over the file finds every problem.
        if (isChannelId) channels[channelId] = merged;
      }
    }
  }

  const llm = { ...base.llm, ...sectionOf(partial, 'llm') };
  const memorySection = sectionOf(partial, 'memory');
  const memory = {
    ...base.memory,
    ...memorySection,
    http: { ...base.memory.http, ...sectionOf(memorySection, 'http') },
  };
  const discordSection = sectionOf(partial, 'discord');
  const discord = { ...base.discord, ...discordSection };
  checkDiscordTiming(discord, sink, refusedKeys(rawSection(document, 'discord'), discordSection));
  const runtime = { ...base.runtime, ...sectionOf(partial, 'runtime') };
  const logging = { ...base.logging, ...sectionOf(partial, 'logging') };
  const metrics = { ...base.metrics, ...sectionOf(partial, 'metrics') };
  const privacy = { ...base.privacy, ...sectionOf(partial, 'privacy') };

  const storage = { ...base.storage, ...sectionOf(partial, 'storage') };
  return { defaults, channels, llm, memory, discord, runtime, storage, metrics, privacy, logging } as MagpieConfig;
}

/** A partial compaction table merges key by key, so an override may set just one threshold. */
function mergeChannel(base: ChannelSettings, override: PartialSettings): ChannelSettings {
  const compaction: CompactionSettings = { ...base.compaction, ...sectionOf(override, 'compaction') };
  const branch = { ...base.branch, ...sectionOf(override, 'branch') };
  const worker = { ...base.worker, ...sectionOf(override, 'worker') };
  return { ...base, ...override, compaction, branch, worker } as ChannelSettings;
}

/** The raw TOML table under `key`, or nothing when it is absent or not a table. */
function rawSection(raw: unknown, key: string): Record<string, unknown> {
  if (!isTable(raw)) return {};
  const value = raw[key];
  return isTable(value) ? value : {};
}

/**
 * Keys written in the file whose value was refused (camelCase). A cross-check over such a key
 * would compare against the default standing in for it and report a value nobody wrote.
 */
function refusedKeys(raw: Record<string, unknown>, validated: PartialSettings): ReadonlySet<string> {
  return new Set(
    Object.keys(raw)
      .map(snakeToCamel)
      .filter((key) => !Object.hasOwn(validated, key)),
  );
}

/**
 * The refused keys of a table's `compaction` (camelCase). A `compaction` that is not a table at
 * all stands in for every key of it: none of the values the file meant is known.
 */
function refusedCompactionKeys(raw: Record<string, unknown>, validated: PartialSettings): ReadonlySet<string> {
  if (Object.hasOwn(raw, 'compaction') && !isTable(raw.compaction)) return new Set(Object.keys(COMPACTION_SPEC).map(snakeToCamel));
  return refusedKeys(rawSection(raw, 'compaction'), sectionOf(validated, 'compaction'));
}

/** The keys of `keys` that `table` does not hold. */
function notSetIn(keys: ReadonlySet<string>, table: PartialSettings): string[] {
  return [...keys].filter((key) => !Object.hasOwn(table, key));
}

function sectionOf(partial: PartialSettings, key: string): PartialSettings {
  const value = partial[key];
  return isTable(value) ? (value as PartialSettings) : {};
}

/** Freezes the whole tree: core code may hold on to settings objects without copying them. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
