import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkConfigText, type ConfigProblem } from '../src/config/index.js';

function problemsOf(text: string): ConfigProblem[] {
  const result = checkConfigText(text);
  assert.equal(result.ok, false, `expected the config to be refused: ${text}`);
  return result.problems;
}

function findProblem(problems: ConfigProblem[], keyPath: string): ConfigProblem {
  const found = problems.find((problem) => problem.path === keyPath);
  assert.ok(found, `no problem for ${keyPath}; got ${JSON.stringify(problems)}`);
  return found;
}

describe('config edge cases', () => {
  it('keys named like Object.prototype members are unknown keys, not a crash', () => {
    for (const key of ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__']) {
      for (const table of ['', '[defaults]\n', '[defaults.compaction]\n', '[memory.http]\n', '[channels."1"]\n']) {
        const text = key === '__proto__' ? `${table}${key}.x = 1\n` : `${table}${key} = 1\n`;
        const problems = problemsOf(text);
        assert.ok(
          problems.some((problem) => problem.path.endsWith(key) && /unknown key/.test(problem.message)),
          `${JSON.stringify(text)}: ${JSON.stringify(problems)}`,
        );
      }
    }
  });

  it('a [channels."__proto__"] table is refused instead of replacing the channel map prototype', () => {
    const problems = problemsOf('[channels."__proto__"]\ncontext_window = 5\n');
    assert.match(findProblem(problems, 'channels.__proto__').message, /not a channel id/);
  });

  it('millisecond settings above what a Node timer holds are refused (they would fire after 1 ms)', () => {
    const over = 2_147_483_648;
    const cases = [
      ['defaults.compaction', 'worker_timeout_ms'],
      ['llm', 'timeout_ms'],
      ['memory.http', 'timeout_ms'],
      ['discord', 'debounce_ms'],
      ['discord', 'debounce_max_ms'],
      ['discord', 'shutdown_grace_ms'],
    ] as const;
    for (const [table, key] of cases) {
      const problems = problemsOf(`[${table}]\n${key} = ${over}\n`);
      assert.match(findProblem(problems, `${table}.${key}`).message, /2147483647/);
      // The largest timer value is still fine.
      const extra = key === 'debounce_ms' ? 'debounce_max_ms = 2147483647\n' : '';
      assert.equal(checkConfigText(`[${table}]\n${key} = 2147483647\n${extra}`).ok, true, `${table}.${key}`);
    }
  });

  it('integers too large to hold exactly are refused, with a message that says they are too large', () => {
    for (const value of ['99999999999999999999', '9007199254740993', '1e300']) {
      const problem = findProblem(problemsOf(`[defaults]\ncontext_window = ${value}\n`), 'defaults.context_window');
      assert.match(problem.message, /at most 9007199254740991/, problem.message);
      assert.doesNotMatch(problem.message, /at least/);
    }
    assert.match(
      findProblem(problemsOf('[defaults]\ncontext_window = -99999999999999999999\n'), 'defaults.context_window').message,
      /at least 1/,
    );
  });

  it('TOML dates, NaN and infinity are refused as values of the wrong type or range', () => {
    assert.match(findProblem(problemsOf('[defaults]\ncontext_window = 1979-05-27\n'), 'defaults.context_window').message, /a date/);
    assert.match(findProblem(problemsOf('[llm]\nmodel = 07:32:00\n'), 'llm.model').message, /a date/);
    assert.ok(findProblem(problemsOf('[defaults.compaction]\nbackground_threshold = nan\n'), 'defaults.compaction.background_threshold'));
    assert.ok(findProblem(problemsOf('[defaults.compaction]\nemergency_threshold = inf\n'), 'defaults.compaction.emergency_threshold'));
    assert.ok(findProblem(problemsOf('[defaults]\ncontext_window = inf\n'), 'defaults.context_window'));
  });
});

describe('"did you mean" inside a channel override points into that channel', () => {
  it('a right key in the wrong table names the channel table, not [defaults]', () => {
    assert.match(
      findProblem(problemsOf('[channels."1"]\nbackground_threshold = 0.5\n'), 'channels.1.background_threshold').message,
      /belongs in \[channels\.1\.compaction\]/,
    );
    assert.match(
      findProblem(problemsOf('[channels."1".compaction]\ncontext_window = 5\n'), 'channels.1.compaction.context_window').message,
      /belongs in \[channels\.1\]/,
    );
    assert.match(
      findProblem(problemsOf('[channels."1".compaction]\ncontext_windw = 5\n'), 'channels.1.compaction.context_windw').message,
      /did you mean `context_window` in \[channels\.1\]/,
    );
    // Outside channels the [defaults] names stay.
    assert.match(
      findProblem(problemsOf('[defaults]\nbackground_treshold = 0.5\n'), 'defaults.background_treshold').message,
      /in \[defaults\.compaction\]/,
    );
    // A key no channel may set still points at its own table.
    assert.match(findProblem(problemsOf('[channels."1"]\nlevel = "info"\n'), 'channels.1.level').message, /belongs in \[logging\]/);
  });
});

describe('a refused value is reported once, not again by a cross-check against the default standing in for it', () => {
  it('thresholds, in [defaults.compaction] and in a channel', () => {
    const problems = problemsOf('[defaults.compaction]\nbackground_threshold = 2\naggressive_threshold = 0.5\n');
    assert.deepEqual(problems.map((problem) => problem.path), ['defaults.compaction.background_threshold']);
    assert.match(problems[0]!.message, /got 2/);
    const channel = problemsOf('[channels."1".compaction]\nbackground_threshold = "x"\naggressive_threshold = 0.5\n');
    assert.deepEqual(channel.map((problem) => problem.path), ['channels.1.compaction.background_threshold']);
    // Both valid but out of order: still reported.
    assert.ok(findProblem(problemsOf('[defaults.compaction]\nbackground_threshold = 0.9\naggressive_threshold = 0.5\n'), 'defaults.compaction.background_threshold'));
  });

  it('a refused [defaults] value is not held against a channel that inherits the default standing in for it', () => {
    const only = (text: string, path: string) => {
      const problems = problemsOf(text);
      assert.deepEqual(problems.map((problem) => problem.path), [path], JSON.stringify(problems));
    };
    only('[defaults.compaction]\naggressive_threshold = "high"\n[channels."111".compaction]\nbackground_threshold = 0.9\n', 'defaults.compaction.aggressive_threshold');
    only('[defaults.compaction]\nbackground_threshold = 2\n[channels."111".compaction]\naggressive_threshold = 0.5\n', 'defaults.compaction.background_threshold');
    only('[defaults]\ncompaction = 5\n[channels."111".compaction]\nbackground_threshold = 0.9\n', 'defaults.compaction');
    only('[defaults]\nmax_response_tokens = "x"\n[channels."111"]\ncontext_window = 1500\n', 'defaults.max_response_tokens');
    only('[defaults]\ncontext_window = "x"\n[channels."111".compaction]\nsummary_max_tokens = 150000\n', 'defaults.context_window');
    only('[defaults]\ncontext_window = "x"\n[defaults.compaction]\nsummary_max_tokens = 150000\n', 'defaults.context_window');
    // A channel that sets the key itself is checked against its own value.
    const own = problemsOf('[defaults.compaction]\naggressive_threshold = "high"\n[channels."111".compaction]\nbackground_threshold = 0.9\naggressive_threshold = 0.5\n');
    assert.deepEqual(own.map((problem) => problem.path), ['defaults.compaction.aggressive_threshold', 'channels.111.compaction.background_threshold']);
    assert.match(own[1]!.message, /^0\.9 must be below aggressive_threshold \(0\.5\)/);
    // Both valid: the channel is still held to what it inherits.
    assert.match(
      findProblem(problemsOf('[defaults.compaction]\naggressive_threshold = 0.85\n[channels."111".compaction]\nbackground_threshold = 0.9\n'), 'channels.111.compaction.background_threshold').message,
      /below aggressive_threshold \(0\.85, from \[defaults\.compaction\]\)/,
    );
  });

  it('Discord debounce timing', () => {
    const problems = problemsOf('[discord]\ndebounce_ms = -1\ndebounce_max_ms = 500\n');
    assert.deepEqual(problems.map((problem) => problem.path), ['discord.debounce_ms']);
    assert.ok(findProblem(problemsOf('[discord]\ndebounce_ms = 600\ndebounce_max_ms = 500\n'), 'discord.debounce_max_ms'));
  });
});

describe('loadConfig', () => {
  it('an empty --config value is an error, not a silent fall back to ./config.toml', async () => {
    const { loadConfig, ConfigError } = await import('../src/config/index.js');
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const os = await import('node:os');
    const path = await import('node:path');
    const directory = mkdtempSync(path.join(os.tmpdir(), 'magpie-empty-config-'));
    try {
      writeFileSync(path.join(directory, 'config.toml'), '[defaults]\ncontext_window = 1234\nmax_response_tokens = 64\n');
      assert.equal(loadConfig({ cwd: directory, env: {} }).config.defaults.contextWindow, 1234);
      for (const empty of ['', '  ']) {
        assert.throws(() => loadConfig({ cwd: directory, path: empty, env: {} }), (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.match(error.render(), /config file path is empty/);
          return true;
        });
      }
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it('a config.toml that is a broken symbolic link is an error, not all defaults', async () => {
    const { loadConfig, loadConfigFile, ConfigError } = await import('../src/config/index.js');
    const { mkdtempSync, rmSync, symlinkSync } = await import('node:fs');
    const os = await import('node:os');
    const path = await import('node:path');
    const directory = mkdtempSync(path.join(os.tmpdir(), 'magpie-dangling-config-'));
    try {
      symlinkSync(path.join(directory, 'gone', 'config.toml'), path.join(directory, 'config.toml'));
      const broken = (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.match(error.render(), /is a broken symbolic link: its target .*gone.config\.toml does not exist/);
        return true;
      };
      assert.throws(() => loadConfig({ cwd: directory, env: {} }), broken);
      assert.throws(() => loadConfigFile(path.join(directory, 'config.toml'), { env: {} }), broken);
      // Nothing at all at the path is still all defaults.
      rmSync(path.join(directory, 'config.toml'));
      assert.equal(loadConfig({ cwd: directory, env: {} }).found, false);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe('[storage] schema is held to the rule a PostgreSQL connection holds it to', () => {
  it('plain identifiers of at most 63 characters pass; anything else is refused', () => {
    for (const name of ['public', '_x', 'Magpie_1', 'a$b', 's'.repeat(63)]) {
      assert.equal(checkConfigText(`[storage]\nschema = "${name}"\n`).ok, true, name);
    }
    for (const name of ['qa1-bad', 's'.repeat(64), '', ' public', 'public ', '1abc', 'a"b', 'a.b', 'café']) {
      const problem = findProblem(problemsOf(`[storage]\nschema = ${JSON.stringify(name)}\n`), 'storage.schema');
      assert.match(problem.message, /letters, digits and underscores \(at most 63\)/, name);
      assert.equal(problem.line, 2, name);
    }
    assert.match(findProblem(problemsOf('[storage]\nschema = 5\n'), 'storage.schema').message, /must be a PostgreSQL schema name, got an integer/);
    // PostgreSQL refuses to create a schema named pg_… (its own); one named PG_… is allowed.
    assert.match(findProblem(problemsOf('[storage]\nschema = "pg_magpie"\n'), 'storage.schema').message, /starts with pg_, which PostgreSQL keeps for its own schemas/);
    assert.equal(checkConfigText('[storage]\nschema = "PG_magpie"\n').ok, true);
  });

  it('MAGPIE_STORAGE_SCHEMA is refused as invalid configuration naming the variable', async () => {
    const { ConfigError, defaultConfig } = await import('../src/config/index.js');
    assert.equal(defaultConfig({ env: { MAGPIE_STORAGE_SCHEMA: ' tenant_1 ' } }).storage.schema, 'tenant_1');
    for (const name of ['qa1-bad', 'x'.repeat(64)]) {
      assert.throws(() => defaultConfig({ env: { MAGPIE_STORAGE_SCHEMA: name } }), (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.source, 'MAGPIE_STORAGE_SCHEMA');
        assert.match(error.render(), /MAGPIE_STORAGE_SCHEMA: .*letters, digits and underscores/);
        return true;
      });
    }
  });
});

describe('a [channels."<id>"] key is a Discord id, as the id lists hold them', () => {
  it('names, blanks, stray spaces and numbers past 2^64 are refused with the key path and line', () => {
    const keys = ['"general"', '""', '"123\\n"', '" 123 "', '"99999999999999999999999"', '"18446744073709551616"', 'constructor', '"１２３"', '"-1"', '"1e5"'];
    for (const key of keys) {
      const text = `[defaults]\nvision = true\n\n[channels.${key}]\nreply_policy = "always"\n`;
      const problems = problemsOf(text);
      const id = JSON.parse(key.startsWith('"') ? key : JSON.stringify(key)) as string;
      assert.deepEqual(problems.map((problem) => [problem.path, problem.line]), [[`channels.${/^[A-Za-z0-9_-]+$/.test(id) ? id : JSON.stringify(id)}`, 4]], key);
      assert.match(problems[0]!.message, /^is not a channel id: an id is a snowflake: 1 to 20 digits, below 2\^64/, key);
    }
    for (const id of ['1', '123456789012345678', '18446744073709551615']) {
      const result = checkConfigText(`[channels."${id}"]\nreply_policy = "always"\n`);
      assert.ok(result.ok, id);
      assert.equal(result.config.channels[id]?.replyPolicy, 'always');
    }
  });

  it('the keys inside a refused channel are still checked, in the same pass', () => {
    const problems = problemsOf('[channels.general]\nreply_policy = "sometimes"\n');
    assert.deepEqual(problems.map((problem) => problem.path), ['channels.general', 'channels.general.reply_policy']);
  });
});
