import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import {
  ConfigError,
  DEFAULTS,
  checkConfigText,
  loadConfig,
  loadConfigFile,
  parseConfigText,
  type ConfigProblem,
} from '../src/config/index.js';
import { CONFIG_SPEC, camelToSnake, type TableSpec } from '../src/config/schema.js';
import { projectRoot } from './support/magpie-process.js';


function problemsOf(text: string): ConfigProblem[] {
  const result = checkConfigText(text);
  assert.equal(result.ok, false, 'expected the config to be refused');
  return result.problems;
}

function findProblem(problems: ConfigProblem[], pathPrefix: string): ConfigProblem {
  const found = problems.find((problem) => problem.path === pathPrefix);
  assert.ok(found, `no problem for ${pathPrefix}; got ${JSON.stringify(problems)}`);
  return found;
}

const temp = mkdtempSync(path.join(os.tmpdir(), 'magpie-config-'));
after(() => rmSync(temp, { recursive: true, force: true }));

describe('config.toml at the top level', () => {
  it('parses to exactly DEFAULTS', () => {
    const text = readFileSync(path.join(projectRoot(), 'config.toml'), 'utf8');
    assert.deepEqual(parseConfigText(text), DEFAULTS);
  });

  it('the schema names exactly the keys of DEFAULTS', () => {
    const keysOf = (value: object, prefix: string): string[] =>
      Object.entries(value).flatMap(([key, child]) => {
        const name = `${prefix}${camelToSnake(key)}`;
        return typeof child === 'object' && child !== null && !Array.isArray(child)
          ? keysOf(child, `${name}.`)
          : [name];
      });
    const specKeys = (spec: TableSpec, prefix: string): string[] =>
      Object.entries(spec).flatMap(([key, field]) =>
        field.kind === 'table' ? specKeys(field.fields, `${prefix}${key}.`) : [`${prefix}${key}`],
      );
    const { channels: _channels, ...rest } = DEFAULTS;
    assert.deepEqual(specKeys(CONFIG_SPEC, '').sort(), keysOf(rest, '').sort());
  });
});

describe('loading', () => {
  it('fills missing keys from defaults and returns a frozen config', () => {
    const config = parseConfigText('[defaults]\ncontext_window = 1000\nmax_response_tokens = 64\n[llm]\nmodel = "claude-x"\n');
    assert.equal(config.defaults.contextWindow, 1000);
    assert.equal(config.defaults.compaction.backgroundThreshold, DEFAULTS.defaults.compaction.backgroundThreshold);
    assert.equal(config.llm.model, 'claude-x');
    assert.equal(config.llm.apiKeyEnv, 'ANTHROPIC_API_KEY');
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.defaults.compaction));
    assert.ok(Object.isFrozen(config.discord.allowedGuilds));
    assert.ok(!Object.isFrozen(DEFAULTS.defaults), 'DEFAULTS itself is left alone');
  });

  it('merges channel overrides over defaults, a partial compaction table key by key', () => {
    const config = parseConfigText(
      [
        '[defaults]',
        'context_window = 50000',
        '[defaults.compaction]',
        'emergency_threshold = 0.97',
        '[channels."123456789012345678"]',
        'reply_policy = "always"',
        '[channels."123456789012345678".compaction]',
        'background_threshold = 0.6',
        '[channels.42]',
        'compaction = { aggressive_threshold = 0.9 }',
      ].join('\n'),
    );
    const channel = config.channels['123456789012345678'];
    assert.ok(channel);
    assert.equal(channel.replyPolicy, 'always');
    assert.equal(channel.contextWindow, 50000, 'inherits the merged [defaults]');
    assert.equal(channel.compaction.backgroundThreshold, 0.6);
    assert.equal(channel.compaction.aggressiveThreshold, 0.85);
    assert.equal(channel.compaction.emergencyThreshold, 0.97);
    assert.equal(config.channels['42']?.compaction.aggressiveThreshold, 0.9);
    assert.equal(config.defaults.replyPolicy, 'mention');
  });

  it('a missing default file means all defaults, a missing named file is an error', () => {
    const loaded = loadConfig({ cwd: temp, env: {} });
    assert.equal(loaded.found, false);
    assert.deepEqual(loaded.config, DEFAULTS);
    assert.throws(() => loadConfig({ cwd: temp, path: 'nope.toml', env: {} }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.render(), /not found/);
      return true;
    });
  });

  it('MAGPIE_DATA_DIR overrides [memory] data_dir when loading a file', () => {
    const file = path.join(temp, 'data-dir.toml');
    writeFileSync(file, '[memory]\ndata_dir = "./here"\n');
    assert.equal(loadConfigFile(file, { env: {} }).memory.dataDir, './here');
    assert.equal(loadConfigFile(file, { env: { MAGPIE_DATA_DIR: '/data' } }).memory.dataDir, '/data');
  });
});

describe('validation reports every problem by key path', () => {
  it('collects all problems, not only the first, in file order with lines', () => {
    const problems = problemsOf('[defaults]\ncontext_window = "big"\nmax_agent_steps = 0\n[logging]\nlevel = "loud"\n');
    assert.deepEqual(
      problems.map((problem) => [problem.path, problem.line]),
      [
        ['defaults.context_window', 2],
        ['defaults.max_agent_steps', 3],
        ['logging.level', 5],
      ],
    );
  });

  it('wrong type', () => {
    const problem = findProblem(problemsOf('[defaults.compaction]\nmax_worker_turns = "six"\n'), 'defaults.compaction.max_worker_turns');
    assert.match(problem.message, /whole number.*string/);
  });

  it('unknown key with a did-you-mean', () => {
    const problem = findProblem(problemsOf('[defaults.compaction]\nbackground_treshold = 0.7\n'), 'defaults.compaction.background_treshold');
    assert.match(problem.message, /did you mean `background_threshold`/);
    assert.equal(problem.line, 2);
  });

  it('a right key in the wrong table says where it belongs', () => {
    const problem = findProblem(problemsOf('[llm]\ncontext_window = 1000\n'), 'llm.context_window');
    assert.match(problem.message, /belongs in \[defaults\]/);
  });

  it('out of range', () => {
    const problems = problemsOf(
      '[defaults]\ncontext_window = 0\n[defaults.compaction]\nbackground_fraction = 1.5\nemergency_threshold = 0\n[llm]\nmax_retries = -1\n',
    );
    assert.match(findProblem(problems, 'defaults.context_window').message, /at least 1/);
    assert.match(findProblem(problems, 'defaults.compaction.background_fraction').message, /\(0, 1\]/);
    assert.match(findProblem(problems, 'defaults.compaction.emergency_threshold').message, /\(0, 1\]/);
    assert.match(findProblem(problems, 'llm.max_retries').message, /at least 0/);
  });

  it('enums', () => {
    const problems = problemsOf(
      '[defaults]\nreply_policy = "sometimes"\n[memory]\nembedder = "bert"\nscope = "world"\n[logging]\nlevel = "loud"\n[storage]\nwriter_thread = "maybe"\n',
    );
    for (const key of ['defaults.reply_policy', 'memory.embedder', 'memory.scope', 'logging.level', 'storage.writer_thread']) {
      assert.match(findProblem(problems, key).message, /must be one of/);
    }
  });

  it('thresholds out of order', () => {
    const problem = findProblem(
      problemsOf('[defaults.compaction]\nbackground_threshold = 0.9\naggressive_threshold = 0.85\n'),
      'defaults.compaction.background_threshold',
    );
    assert.match(problem.message, /below aggressive_threshold/);
  });

  it('thresholds out of order inside a channel override, after merging', () => {
    const problems = problemsOf('[channels."777".compaction]\naggressive_threshold = 0.96\n');
    const problem = findProblem(problems, 'channels.777.compaction.aggressive_threshold');
    assert.match(problem.message, /below emergency_threshold \(0\.95, from \[defaults\.compaction\]\)/);
    assert.equal(problem.line, 2);
  });

  it('a broken [defaults] order is reported once, not again for every channel', () => {
    const problems = problemsOf(
      '[defaults.compaction]\nbackground_threshold = 0.9\n[channels.1]\nreply_policy = "always"\n',
    );
    assert.equal(problems.length, 1);
  });

  it('unknown keys and bad values inside channel overrides name the channel path', () => {
    const problems = problemsOf('[channels."55"]\ncontext_windw = 10\nmax_response_tokens = 0\n');
    assert.match(findProblem(problems, 'channels.55.context_windw').message, /did you mean `context_window`/);
    findProblem(problems, 'channels.55.max_response_tokens');
  });

  it('a secret written in the file is refused without echoing it', () => {
    const problems = problemsOf(
      '[llm]\napi_key = "sk-ant-very-secret"\n[discord]\ntoken = "Mz.secret"\n[memory.http]\napi_key_env = "sk-abc-def"\n',
    );
    assert.match(findProblem(problems, 'llm.api_key').message, /api_key_env/);
    assert.match(findProblem(problems, 'discord.token').message, /token_env/);
    assert.match(findProblem(problems, 'memory.http.api_key_env').message, /NAME of an environment variable/);
    const text = new ConfigError('x', problems).render();
    assert.doesNotMatch(text, /very-secret|Mz\.secret|sk-/);
  });

  it('TOML syntax errors carry the line and column from the parser', () => {
    const problems = problemsOf('[defaults]\ncontext_window = 100\nreply_policy = "always\n');
    assert.equal(problems.length, 1);
    assert.equal(problems[0]?.line, 3);
    assert.equal(typeof problems[0]?.column, 'number');
    assert.match(problems[0]?.message ?? '', /TOML syntax error/);
  });

  it('Discord ids written as bare numbers are refused with advice', () => {
    const problem = findProblem(problemsOf('[discord]\nallowed_channels = [123456789012345678]\n'), 'discord.allowed_channels');
    assert.match(problem.message, /quoted strings/);
  });

  it('a channel name or an empty string where a Discord id belongs is refused, not silently ignored', () => {
    const named = findProblem(problemsOf('[discord]\nallowed_channels = ["general"]\n'), 'discord.allowed_channels');
    assert.match(named.message, /item 1 is not a Discord id: ids are all digits/);
    assert.equal(named.line, 2);
    const empty = findProblem(problemsOf('[discord]\nallowed_guilds = ["123456789012345678", ""]\n'), 'discord.allowed_guilds');
    assert.match(empty.message, /item 2 is empty/);
    const valid = parseConfigText('[discord]\nallowed_users = ["123456789012345678"]\nallowed_roles = [" 42 "]\n');
    assert.deepEqual(valid.discord.allowedRoles, ['42'], 'stray spaces are trimmed so the id still matches');
  });

  it('parseConfigText throws a ConfigError that renders every problem', () => {
    assert.throws(
      () => parseConfigText('[defaults]\ncontext_window = -5\nbogus = 1\n', { source: 'mine.toml' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.problems.length, 2);
        assert.match(error.render(), /mine\.toml/);
        assert.match(error.render(), /defaults\.context_window: .*\(line 2\)/);
        assert.match(error.render(), /defaults\.bogus: /);
        return true;
      },
    );
  });
});
