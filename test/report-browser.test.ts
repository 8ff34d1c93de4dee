/**
 * The tuning report in a real browser: Debian's Chromium, driven by playwright-core, opens the
 * file `magpie replay --report` wrote and must show the charts with one marker per compaction.
 * Without /usr/bin/chromium the test skips (saying why), except under CI=true, where it fails.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { generateTranscript, tempDir } from './compaction-support.js';
import { runMagpie } from './support/magpie-process.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

function skipReason(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  if (process.env.CI === 'true') throw new Error(`${CHROMIUM} is missing and CI=true: the browser check must run (.ci/run installs it)`);
  const reason = `${CHROMIUM} not found (apt-get install chromium); the browser check of the report is skipped`;
  process.stderr.write(`report-browser: ${reason}\n`);
  return reason;
}

test('the report renders in headless Chromium with one marker per compaction, and nothing is fetched', { timeout: 240_000 }, async (t) => {
  const reason = skipReason();
  if (reason) {
    t.skip(reason);
    return;
  }
  const dir = tempDir();
  const transcript = join(dir.path, 't.jsonl');
  writeFileSync(transcript, generateTranscript(400, { channels: 2 }));
  const data = join(dir.path, 'data');
  const out = join(dir.path, 'report.html');
  const replay = await runMagpie(['replay', transcript, '--data-dir', data, '--context-window', '2000', '--worker-lag', '5', '--json', '--report', out], {
    cwd: dir.path,
    env: { ...process.env, MAGPIE_DATA_DIR: '', MAGPIE_PROGRESS: '' },
  });
  assert.equal(replay.code, 0, replay.stderr);
  const events = replay.stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
  const expected = (channel: string) =>
    events.filter((event) => event.channel_id === channel && (event.type === 'compaction_completed' || event.type === 'emergency_truncation')).length;

  const profile = mkdtempSync(join(tmpdir(), 'magpie-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1040, height: 900 },
  });
  try {
    const page = await context.newPage();
    const fetched: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith('file:')) fetched.push(request.url());
    });
    await page.goto(pathToFileURL(out).href, { waitUntil: 'load' });
    assert.equal(await page.title(), 'Magpie compaction report');
    const sections = page.locator('section.channel');
    assert.equal(await sections.count(), 2);
    for (const channel of ['chan-0', 'chan-1']) {
      const section = page.locator(`section.channel[data-channel="${channel}"]`);
      const chart = section.locator('svg.chart');
      assert.equal(await chart.count(), 1);
      const box = await chart.boundingBox();
      assert.ok(box && box.width > 400 && box.height > 150, `chart of ${channel} laid out: ${JSON.stringify(box)}`);
      const line = await section.locator('path.usage').boundingBox();
      assert.ok(line && line.width > 300, `usage line of ${channel} drawn`);
      assert.equal(await section.locator('path.threshold').count(), 3);
      const markers = section.locator('g.marker');
      assert.ok(expected(channel) > 0);
      assert.equal(await markers.count(), expected(channel), `${channel}: one marker per compaction`);
      assert.ok(await markers.first().isVisible());
      const tiers = new Set(await markers.evaluateAll((nodes) => nodes.map((node) => node.getAttribute('data-tier'))));
      assert.ok(tiers.has('background') && tiers.has('emergency'), [...tiers].join(','));
    }
    assert.deepEqual(fetched, [], 'the report fetches nothing');
    const shot = process.env.MAGPIE_REPORT_SCREENSHOT ?? join(dir.path, 'report.png');
    mkdirSync(dirname(shot), { recursive: true });
    const area = (await sections.first().boundingBox())!;
    await page.screenshot({ path: shot, fullPage: true, clip: { x: Math.max(0, area.x - 16), y: Math.max(0, area.y - 12), width: area.width + 32, height: area.height + 24 } });
    const png = readFileSync(shot);
    assert.equal(png.subarray(1, 4).toString(), 'PNG');
    assert.ok(png.length > 10_000, 'a screenshot with something in it');
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
    dir.remove();
  }
});
