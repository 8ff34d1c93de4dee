import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeContext } from '../src/app/channel-commands.js';
import { CALIBRATION, observe, observeMessages, observeOverflow, observeTools, overflowNumbers, toolFactorOf, usableWindow, usageOf, UNCALIBRATED } from '../src/context/calibration.js';
import { checkConfigText } from '../src/config/load-config.js';
import { LiveConfig } from '../src/config/live-config.js';
import { definitionsOf } from '../src/llm/tool.js';
import { fill, openHarness, ScriptedSummarizer, tempDir, testConfig, userMessage } from './compaction-support.js';
import { waitUntil } from './support/wait-until.js';

test('the first model count sets the factor, later ones are smoothed and bounded', () => {
  const first = observe(UNCALIBRATED, 1000, 3900)!;
  assert.equal(first.factor, 3.9);
  assert.equal(first.observations, 1);
  const second = observe(first, 1000, 4200)!;
  assert.ok(second.factor > 3.9 && second.factor < 4.2, `smoothed: ${second.factor}`);
  assert.equal(observe(UNCALIBRATED, 1000, 1_000_000)!.factor, CALIBRATION.max);
  assert.equal(observe(UNCALIBRATED, 1000, 1)!.factor, CALIBRATION.min);
});

test('the tools correction is learnt from requests heavy in tool traffic, first whole, then smoothed and bounded', () => {
  const known = { factor: 1, observations: 4, messageFactor: 0.9 };
  // 600 estimated tokens of text at 0.9 and 400 of tools, which the server counted at 1.5 × 0.9 each.
  const first = observeTools(known, { estimated: 400, messagesEstimated: 1000, residual: 1.5 * 0.9 * 400 })!;
  assert.equal(first, 1.5);
  assert.equal(toolFactorOf({ ...known, toolFactor: first }), 1.35);
  assert.equal(toolFactorOf(known), 0.9, 'until learnt, tools are corrected as the messages are');
  const later = observeTools({ ...known, toolFactor: 1.5 }, { estimated: 400, messagesEstimated: 1000, residual: 400 * 0.9 * 3 })!;
  assert.equal(later, Math.round(1.5 * CALIBRATION.maxStep * 10_000) / 10_000, 'one response moves it one bounded step');
  assert.equal(observeTools(known, { estimated: 200, messagesEstimated: 1000, residual: 400 }), undefined, 'a small share teaches nothing');
  assert.equal(observeTools({ factor: 1, observations: 1 }, { estimated: 400, messagesEstimated: 1000, residual: 400 }), undefined, 'not before the messages factor');
  // The messages factor then learns with the tools taken at their correction.
  const text = observeMessages({ ...known, toolFactor: 1.5 }, 1100, 100 + 0.9 * 900 + 1.35 * 100, { estimated: 100, real: 100 }, 100)!;
  assert.ok(Math.abs(text - 0.9) < 1e-3, `the messages factor stays where the text puts it: ${text}`);
});

test('counts that say nothing leave the factor alone', () => {
  assert.equal(observe(UNCALIBRATED, 1000, 0), undefined, 'no count from the server');
  assert.equal(observe(UNCALIBRATED, 10, 40), undefined, 'a tiny request');
  assert.equal(observe(UNCALIBRATED, 1000, Number.NaN), undefined);
  assert.equal(observe(UNCALIBRATED, Number.NaN, 100), undefined);
  assert.equal(observe(UNCALIBRATED, 1000, Infinity), undefined);
});

test('an overflow takes the server count at once and never lowers the factor', () => {
  const calibrated = { factor: 2, observations: 3 };
  assert.equal(observeOverflow(calibrated, 1000, 4100).factor, 4.1);
  assert.equal(observeOverflow(calibrated, 1000, 1500).factor, 2);
  assert.deepEqual(observeOverflow(calibrated, 1000, undefined), calibrated);
});

test('overflow numbers are read from the API message; garbage gives none', () => {
  assert.deepEqual(overflowNumbers('model call failed with HTTP 400: prompt is too long: 210345 tokens > 200000 maximum'), { tokens: 210345, maximum: 200000 });
  assert.deepEqual(overflowNumbers('prompt is too long: 1,234 tokens > 1,000 maximum'), { tokens: 1234, maximum: 1000 });
  assert.deepEqual(overflowNumbers('prompt is too long'), {});
  assert.deepEqual(overflowNumbers('0 tokens > 0 maximum'), {});
});

test('usage is factor × estimate over the window less the answer room', () => {
  const settings = { contextWindow: 10_000, maxResponseTokens: 2_000 };
  assert.equal(usableWindow(settings), 8_000);
  assert.equal(usageOf(2_000, 2, settings), 0.5);
  assert.equal(usableWindow({ contextWindow: 100, maxResponseTokens: 500 }), 1, 'never zero or negative');
});

test('the factor is persisted with the channel, shown by /context, and in compaction events', async () => {
  const dir = tempDir().path;
  const first = await openHarness({ dir, summarizer: new ScriptedSummarizer() });
  for (let index = 0; index < 3; index += 1) await first.runtime.ingest(userMessage('c1', index));
  assert.deepEqual((await first.runtime.status('c1')).calibration, { factor: 1, observations: 0 }, 'factor 1 until a model has answered');
  assert.match(describeContext(await first.runtime.status('c1')), /per token, not calibrated yet \(factor 1\)/);
  assert.doesNotMatch(describeContext(await first.runtime.status('c1')), /calibrated not calibrated/);
  const estimate = (await first.runtime.requestEstimate('c1')).estimatedTokens;
  await first.runtime.recordUsage('c1', estimate, estimate * 3);
  assert.equal((await first.runtime.status('c1')).calibration.factor, 3);
  assert.equal(first.ofType('calibration_updated').length, 1);
  const learnt = await first.runtime.status('c1');
  assert.ok(learnt.calibration.messageFactor !== undefined, 'the messages factor is learnt from the same count');
  await first.close({ keepDir: true });

  const second = await openHarness({ dir, summarizer: new ScriptedSummarizer() });
  const status = await second.runtime.status('c1');
  assert.deepEqual(status.calibration, learnt.calibration, 'back after a restart, the messages factor included');
  assert.equal(status.calibratedTokens, learnt.calibratedTokens, 'counted as before the restart');
  assert.ok(Math.abs(status.usage - learnt.usage) < 1e-9);
  assert.match(describeContext(status), /calibrated × 3\.00 from 1 model count \(messages × 3\.\d\d, tool calls and results × 3\.\d\d, as the messages until learnt\)/);
  // Thresholds apply to the corrected figure: the channel compacts at a third of the raw estimate.
  await fill(second, 'c1', 10, () => second.ofType('compaction_triggered').length > 0);
  const triggered = second.ofType('compaction_triggered')[0]!;
  assert.equal(triggered.calibration_factor, 3);
  assert.equal(triggered.calibrated_tokens, Math.round(Number(triggered.estimated_tokens) * 3));
  assert.ok(Number(triggered.usage) >= 0.8);
  assert.ok(Number(triggered.estimated_tokens) / Number(triggered.usable_window) < 0.8 / 2, 'raw estimate far below the threshold');
  await second.close();
});

test('a reload that halves the window truncates loaded channels at once, before any message', async () => {
  const summarizer = new ScriptedSummarizer();
  summarizer.fallback = () => new Promise(() => {});
  const config = new LiveConfig(testConfig({ contextWindow: 4000 }));
  const harness = await openHarness({ summarizer, config });
  await fill(harness, 'c1', 0, async () => (await harness.runtime.status('c1')).usage > 0.6);
  await fill(harness, 'c2', 0, async () => (await harness.runtime.status('c2')).usage > 0.3);
  assert.equal(harness.ofType('emergency_truncation').length, 0);
  const current = config.current();
  config.replace({ ...current, defaults: { ...current.defaults, contextWindow: 2000 } });
  // No message arrived: the reload itself re-checked every loaded channel (each truncation is
  // reported once its marker is written).
  await waitUntil(() => harness.ofType('emergency_truncation').length >= 1, 'the reload to truncate c1', 20_000);
  const truncated = harness.ofType('emergency_truncation').map((event) => event.channel_id);
  assert.deepEqual(truncated, ['c1']);
  assert.ok((await harness.runtime.status('c1')).usage < 0.95);
  // A reload that changes nothing the usage depends on checks nothing.
  const events = harness.events.length;
  config.replace({ ...config.current(), logging: { level: 'debug' } });
  assert.equal(harness.events.length, events);
  await harness.close();
});

test('a larger answer room on reload counts at once too', async () => {
  const summarizer = new ScriptedSummarizer();
  summarizer.fallback = () => new Promise(() => {});
  const config = new LiveConfig(testConfig({ contextWindow: 4000 }));
  const harness = await openHarness({ summarizer, config });
  await fill(harness, 'c1', 0, async () => (await harness.runtime.status('c1')).usage > 0.7);
  const current = config.current();
  config.replace({ ...current, defaults: { ...current.defaults, maxResponseTokens: 1500 } });
  assert.equal(harness.ofType('compaction_triggered').at(-1)?.tier, 'emergency');
  await harness.close();
});

test('config check refuses a window that leaves the emergency tier no room once the answer is reserved', () => {
  const refused = checkConfigText('[defaults]\ncontext_window = 2000\nmax_response_tokens = 1500\n', { source: 'c.toml', env: {} });
  assert.equal(refused.ok, false);
  const problem = !refused.ok ? refused.problems.find((candidate) => candidate.path === 'defaults.max_response_tokens') : undefined;
  assert.ok(problem, 'reported on max_response_tokens');
  assert.match(problem.message, /context_window/);
  assert.match(problem.message, /max_response_tokens/);
  assert.equal(problem.line, 3);

  const override = checkConfigText('[channels."42"]\ncontext_window = 1200\n', { source: 'c.toml', env: {} });
  assert.equal(override.ok, false);
  assert.ok(!override.ok && override.problems.some((candidate) => candidate.path === 'channels.42.max_response_tokens'));

  // Garbage in the keys themselves is reported once, on the key, not as a room problem too.
  const garbage = checkConfigText('[defaults]\ncontext_window = "large"\nmax_response_tokens = -5\n', { source: 'c.toml', env: {} });
  assert.equal(garbage.ok, false);
  assert.ok(!garbage.ok && garbage.problems.every((candidate) => !/leaves too little/.test(candidate.message)));

  assert.equal(checkConfigText('[defaults]\ncontext_window = 8000\nmax_response_tokens = 1024\n', { source: 'c.toml', env: {} }).ok, true);
});

test('tool definitions are built once per tool list, so they are counted once per configuration', () => {
  const tools = [{ definition: { name: 'a', description: 'd', input_schema: {} }, run: () => ({ content: '', isError: false }) }];
  assert.equal(definitionsOf(tools), definitionsOf(tools));
  assert.notEqual(definitionsOf(tools), definitionsOf([...tools]));
});

test('an oversized message is carried cut to its cap, with a note, never between surrogate halves', async () => {
  const { cappedEntryTokens, isCapped, messageCap, requestContent, shownLength } = await import('../src/channel/oversized-message.js');
  const { estimateTokens } = await import('../src/context/token-estimate.js');
  const settings = testConfig({ contextWindow: 4000 }).defaults;
  const cap = messageCap(settings, 1);
  assert.equal(cap, Math.floor((0.95 * (4000 - 16)) / 2));
  assert.ok(messageCap(settings, 4) < cap, 'a higher factor leaves a message fewer estimated tokens');
  const content = `a${'😀'.repeat(20_000)}`;
  const entry = { kind: 'message' as const, authorName: 'ana', content, tokens: 0 };
  entry.tokens = cappedEntryTokens(entry, cap);
  assert.equal(entry.tokens, cap);
  assert.ok(isCapped(entry));
  const sent = requestContent(entry);
  assert.match(sent, /too long to read whole/);
  assert.ok(estimateTokens(sent) + estimateTokens('ana') + 4 <= cap, 'what is sent fits the cap');
  const shown = shownLength(entry);
  const last = content.charCodeAt(shown - 1);
  assert.ok(!(last >= 0xd800 && last <= 0xdbff), 'whole astral characters only');
  assert.equal(sent.slice(0, shown), content.slice(0, shown));
  // A message within the cap, and tool traffic, are never cut.
  const small = { kind: 'message' as const, authorName: 'ana', content: 'hello', tokens: 0 };
  small.tokens = cappedEntryTokens(small, cap);
  assert.equal(isCapped(small), false);
  assert.equal(requestContent(small), 'hello');
  assert.equal(cappedEntryTokens({ kind: 'tool_result', authorName: 'x', content: 'y'.repeat(100_000) }, cap) > cap, true);
});
