import { lstatSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { parse, TomlError } from 'smol-toml';
import { schemaNameProblem } from '../common/schema-name.js';
import { buildConfig, deepFreeze } from './build-config.js';
import { decodeConfigBytes } from './config-bytes.js';
import { DEFAULTS } from './defaults.js';
import { KeyLines } from './key-lines.js';
import { ConfigError, type ConfigProblem } from './problems.js';
import type { MagpieConfig } from './types.js';

/** Environment variable that overrides `[memory] data_dir` (the container sets it to /data). */
export const DATA_DIR_ENV = 'MAGPIE_DATA_DIR';

/** Environment variables that override `[storage] backend` and `[storage] schema` (deployments set them per process). */
export const STORAGE_BACKEND_ENV = 'MAGPIE_STORAGE_BACKEND';
export const STORAGE_SCHEMA_ENV = 'MAGPIE_STORAGE_SCHEMA';

/** The config file looked for in the working directory when none is named. */
export const DEFAULT_CONFIG_FILE = 'config.toml';

export interface ParseConfigOptions {
  /** Names the text in messages (a file path); default "config". */
  source?: string;
  /**
   * When given, environment overrides apply (`MAGPIE_DATA_DIR` replaces `[memory] data_dir`).
   * Without it the result depends on the text alone.
   */
  env?: NodeJS.ProcessEnv;
}

/** Every problem in the text, and the config when there are none. Never throws. */
export type ConfigCheck =
  | { ok: true; config: MagpieConfig; problems: [] }
  | { ok: false; problems: ConfigProblem[] };

/**
 * Validates TOML text, collecting every problem instead of stopping at the first. A file's
 * bytes are given as they are (not decoded by the caller), so that bytes that are not UTF-8 are
 * refused rather than replaced.
 */
export function checkConfigText(input: string | Uint8Array, options: ParseConfigOptions = {}): ConfigCheck {
  let rawText: string;
  if (typeof input === 'string') rawText = input;
  else {
    const decoded = decodeConfigBytes(input);
    if (!decoded.ok) return { ok: false, problems: [decoded.problem] };
    rawText = decoded.text;
  }
  // Some Windows editors save a byte-order mark, which TOML does not allow.
  const text = rawText.startsWith('\uFEFF') ? rawText.slice(1) : rawText;
  let document: Record<string, unknown>;
  try {
    // Discord ids written as bare numbers exceed 2^53; take them as BigInt so the check can
    // say "quote your ids" instead of the parser refusing the whole file.
    document = parse(text, { integersAsBigInt: 'asNeeded' }) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof TomlError) {
      // The parser's own message already contains the code excerpt; keep it, minus the location
      // header we print ourselves.
      const message = error.message
        .replace(/^Invalid TOML document: /, '')
        .replace(/\n\s*\n/g, '\n')
        .trimEnd();
      return {
        ok: false,
        problems: [{ path: '', message: `TOML syntax error: ${message}`, line: error.line, column: error.column }],
      };
    }
    throw error;
  }
  const sink = { lines: new KeyLines(text), problems: [] as ConfigProblem[] };
  const config = buildConfig(document, sink);
  if (sink.problems.length > 0) {
    // In file order, so the list reads top to bottom next to the file; unplaced ones last.
    const problems = [...sink.problems].sort(
      (left, right) => (left.line ?? Number.MAX_SAFE_INTEGER) - (right.line ?? Number.MAX_SAFE_INTEGER),
    );
    return { ok: false, problems };
  }
  return { ok: true, config: deepFreeze(applyEnvironment(config, options.env)), problems: [] };
}

/** Parses and validates TOML text (or a file's bytes); throws a `ConfigError` listing every problem. */
export function parseConfigText(text: string | Uint8Array, options: ParseConfigOptions = {}): MagpieConfig {
  const result = checkConfigText(text, options);
  if (!result.ok) throw new ConfigError(options.source ?? 'config', result.problems);
  return result.config;
}

export interface LoadConfigFileOptions {
  /** A file named on the command line must exist; the default `./config.toml` need not. */
  mustExist?: boolean;
  /** Environment for overrides; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Reads and validates a config file. A missing file means all defaults, unless `mustExist`.
 * Throws `ConfigError` (→ exit 3) for a missing required file or an invalid one.
 */
export function loadConfigFile(file: string, options: LoadConfigFileOptions = {}): MagpieConfig {
  const env = options.env ?? process.env;
  const bytes = readConfigBytes(file, { mustExist: options.mustExist ?? false });
  if (bytes === undefined) return defaultConfig({ env });
  return parseConfigText(bytes, { source: file, env });
}

/**
 * A config file's bytes, or undefined when nothing is at the path and `mustExist` is false.
 * Whether something is there is judged without following a symbolic link: a link whose target is
 * gone stands for a config somebody meant to use, and reading it as "no file" would run with
 * every default, every channel allowed. Throws `ConfigError` (labelled `source`, default the
 * path) for a missing required file, a broken link or a file that cannot be read.
 */
export function readConfigBytes(file: string, options: { mustExist: boolean; source?: string }): Buffer | undefined {
  const source = options.source ?? file;
  if (!pathTaken(file)) {
    if (!options.mustExist) return undefined;
    throw new ConfigError(source, [{ path: '', message: `config file not found: ${path.resolve(file)}` }]);
  }
  try {
    return readFileSync(file);
  } catch (error) {
    throw new ConfigError(source, [{ path: '', message: unreadableMessage(file, error) }], { cause: error });
  }
}

/** True when the path names an entry, a symbolic link included whether or not its target exists. */
function pathTaken(file: string): boolean {
  return lstatSync(file, { throwIfNoEntry: false }) !== undefined;
}

function unreadableMessage(file: string, error: unknown): string {
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
    // The entry is there (lstat saw it) but opening it finds nothing: a link to a missing target.
    let target: string | undefined;
    try {
      target = readlinkSync(file);
    } catch {
      target = undefined;
    }
    if (target !== undefined) {
      return `config file ${path.resolve(file)} is a broken symbolic link: its target ${target} does not exist; fix the link or remove it`;
    }
  }
  return `cannot read config file: ${(error as Error).message}`;
}

export interface LoadConfigOptions {
  /** The `--config` value, if any: it must exist. Absent: `./config.toml` if present, else defaults. */
  path?: string | undefined;
  /** Directory the default file is looked for in; default `process.cwd()`. */
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

export interface LoadedConfig {
  config: MagpieConfig;
  /** Absolute path of the file that was (or would have been) read; hand it to the watcher. */
  path: string;
  /** False when no file existed and defaults were used. */
  found: boolean;
}

/** What commands call: resolves `--config` or `./config.toml`, then loads it. */
export function loadConfig(options: LoadConfigOptions = {}): LoadedConfig {
  const explicit = options.path !== undefined;
  if (explicit && options.path!.trim() === '') {
    // `--config "$UNSET"`: the caller asked for a file; quietly reading ./config.toml (or
    // nothing) instead would run with settings nobody chose.
    throw new ConfigError('--config', [{ path: '', message: 'the config file path is empty' }]);
  }
  const file = path.resolve(options.cwd ?? process.cwd(), explicit ? options.path! : DEFAULT_CONFIG_FILE);
  const config = loadConfigFile(file, { mustExist: explicit, env: options.env ?? process.env });
  const found = pathTaken(file);
  return { config, path: file, found };
}

/** All defaults (plus environment overrides when `env` is given), frozen. */
export function defaultConfig(options: { env?: NodeJS.ProcessEnv } = {}): MagpieConfig {
  return deepFreeze(applyEnvironment(structuredClone(DEFAULTS), options.env));
}

function applyEnvironment(config: MagpieConfig, env: NodeJS.ProcessEnv | undefined): MagpieConfig {
  let applied = config;
  const dataDir = env?.[DATA_DIR_ENV];
  if (dataDir !== undefined && dataDir.trim() !== '') applied = { ...applied, memory: { ...applied.memory, dataDir } };
  const backend = env?.[STORAGE_BACKEND_ENV]?.trim();
  if (backend) {
    if (backend !== 'sqlite' && backend !== 'postgres') {
      throw new ConfigError(STORAGE_BACKEND_ENV, [{ path: '', message: `${STORAGE_BACKEND_ENV} must be "sqlite" or "postgres"; got ${JSON.stringify(backend)}` }]);
    }
    applied = { ...applied, storage: { ...applied.storage, backend } };
  }
  const schema = env?.[STORAGE_SCHEMA_ENV]?.trim();
  if (schema) {
    // Held to the file's rule, so a bad name stops every command here as invalid configuration
    // rather than when the first connection is opened.
    const problem = schemaNameProblem(schema);
    if (problem !== undefined) throw new ConfigError(STORAGE_SCHEMA_ENV, [{ path: STORAGE_SCHEMA_ENV, message: problem }]);
    applied = { ...applied, storage: { ...applied.storage, schema } };
  }
  return applied;
}
