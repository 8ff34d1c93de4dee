import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULTS, checkConfigText, parseConfigText } from '../src/config/index.js';

function problemPaths(text: string): Array<[string, string]> {
  const result = checkConfigText(text);
  assert.equal(result.ok, false, 'expected the config to be refused');
  return result.problems.map((problem) => [problem.path, problem.message]);
}

describe('[defaults.branch] and [defaults.worker]', () => {
  it('have documented defaults', () => {
    assert.deepEqual(DEFAULTS.defaults.branch, { precompactThreshold: 0.6, maxOverflowRetries: 2, maxSteps: 6, maxConcurrent: 2, timeoutMs: 120_000, minResponseTokens: 256 });
    assert.deepEqual(DEFAULTS.defaults.worker, { turnsPerSegment: 25, compactThreshold: 0.7, maxSegments: 8, maxConcurrent: 2, timeoutMs: 900_000, minResponseTokens: 512 });
  });

  it('merge key by key, and per channel over [defaults]', () => {
    const config = parseConfigText(
      '[defaults.branch]\nmax_concurrent = 3\n[defaults.worker]\nturns_per_segment = 10\n' +
        '[channels."123456789012345678".worker]\nmax_concurrent = 1\n[channels."123456789012345678".branch]\nprecompact_threshold = 0.5\n',
    );
    assert.equal(config.defaults.branch.maxConcurrent, 3);
    assert.equal(config.defaults.branch.maxOverflowRetries, 2);
    assert.equal(config.defaults.worker.turnsPerSegment, 10);
    const channel = config.channels['123456789012345678']!;
    assert.equal(channel.worker.maxConcurrent, 1);
    assert.equal(channel.worker.turnsPerSegment, 10, 'inherited from [defaults.worker]');
    assert.equal(channel.branch.precompactThreshold, 0.5);
    assert.equal(channel.branch.maxConcurrent, 3);
  });

  it('refuse garbage, naming the key', () => {
    const problems = problemPaths(
      [
        '[defaults.branch]',
        'precompact_threshold = 1.5',
        'max_overflow_retries = -1',
        'max_steps = "many"',
        'max_concurrent = 0',
        'timeout_ms = 0',
        'max_retries = 2',
        '[defaults.worker]',
        'turns_per_segment = 0',
        'compact_threshold = 0',
        'max_segments = 2.5',
        'max_concurrent = true',
        'timeout_ms = 99999999999',
        '[channels."123456789012345678".worker]',
        'compact_treshold = 0.5',
      ].join('\n'),
    );
    const paths = problems.map(([path]) => path);
    for (const key of [
      'defaults.branch.precompact_threshold',
      'defaults.branch.max_overflow_retries',
      'defaults.branch.max_steps',
      'defaults.branch.max_concurrent',
      'defaults.branch.timeout_ms',
      'defaults.branch.max_retries',
      'defaults.worker.turns_per_segment',
      'defaults.worker.compact_threshold',
      'defaults.worker.max_segments',
      'defaults.worker.max_concurrent',
      'defaults.worker.timeout_ms',
      'channels.123456789012345678.worker.compact_treshold',
    ]) {
      assert.ok(paths.some((path) => path.replace(/"/g, '') === key), `${key} is named; got ${JSON.stringify(problems)}`);
    }
    const typo = problems.find(([path]) => path.replace(/"/g, '').endsWith('worker.compact_treshold'))!;
    assert.match(typo[1], /compact_threshold/, 'a typo gets a suggestion');
  });
});
