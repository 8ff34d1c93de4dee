import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULTS } from '../src/config/defaults.js';
import { waitUntil } from './discord-helpers.js';
import { MAGPIE_MAIN, magpieEnv, projectRoot } from './support/magpie-process.js';
import { freePort } from './support/free-port.js';

const root = projectRoot();
const dockerfile = readFileSync(path.join(root, 'deploy', 'Dockerfile'), 'utf8');
const unit = readFileSync(path.join(root, 'deploy', 'magpie.service'), 'utf8');
const defaultPort = DEFAULTS.metrics.listen.split(':').at(-1)!;

/** The HEALTHCHECK's exec form, as argv. */
function healthcheckArgv(): string[] {
  const joined = dockerfile.replace(/\\\n\s*/g, ' ');
  const match = /^HEALTHCHECK .*?CMD (\[.*\])$/m.exec(joined);
  assert.ok(match, 'the Dockerfile has an exec-form HEALTHCHECK');
  return JSON.parse(match[1]!) as string[];
}

/** The unit's ExecStartPost probe: the script given to `node -e`. */
function startPostScript(): string {
  const match = /^ExecStartPost=\/usr\/bin\/node -e "(.*)"$/m.exec(unit);
  assert.ok(match, 'the unit probes /healthz after start');
  return match[1]!;
}

function run(argv: string[]): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
    child.on('close', resolve);
  });
}

test('the systemd unit passes systemd-analyze verify, restarts on failure and is hardened', (t) => {
  for (const line of [
    'Restart=on-failure',
    // A network blip at boot is waited out by the bot; only a config refusal stops the restarts.
    'StartLimitIntervalSec=0',
    'RestartPreventExitStatus=2 3',
    'NoNewPrivileges=true',
    'ProtectSystem=strict',
    'ProtectHome=true',
    'PrivateTmp=true',
    'ReadWritePaths=/var/lib/magpie',
    'CapabilityBoundingSet=',
    'User=magpie',
  ]) {
    assert.match(unit, new RegExp(`^${line.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm'), line);
  }
  assert.ok(startPostScript().includes(`127.0.0.1:${defaultPort}/healthz`), 'the probe uses the default metrics port');
  const analyze = spawnSync('systemd-analyze', ['verify', path.join(root, 'deploy', 'magpie.service')], { encoding: 'utf8' });
  if (analyze.error) {
    t.skip('systemd-analyze is not installed');
    return;
  }
  assert.equal(analyze.status, 0, analyze.stderr);
  assert.equal(analyze.stderr.trim(), '', 'no warnings');
});

test('the image carries only what runs: no tests or benchmarks compiled or copied, production dependencies only', () => {
  assert.doesNotMatch(dockerfile, /^COPY (test|bench)\b/m, 'tests and benchmarks stay out of the build stage');
  assert.match(dockerfile, /^COPY --from=build \/app\/dist\/src \.\/dist\/src$/m, 'the runtime takes the compiled sources only');
  assert.doesNotMatch(dockerfile, /^COPY --from=build \/app\/dist \.\/dist$/m);
  assert.match(dockerfile, /npm prune --omit=dev/);
  const script = readFileSync(path.join(root, 'deploy', 'check-image-steps.sh'), 'utf8');
  assert.match(script, /compiled tests or benchmarks are in the image/, 'check-image-steps.sh checks it on the built image');
});

test('the image runs as a non-root user with data on a volume and metrics exposed', () => {
  assert.match(dockerfile, /^USER node$/m);
  assert.match(dockerfile, /^VOLUME \/data$/m);
  assert.match(dockerfile, /MAGPIE_DATA_DIR=\/data/);
  assert.match(dockerfile, new RegExp(`^EXPOSE ${defaultPort}$`, 'm'));
  assert.ok(healthcheckArgv().join(' ').includes(`127.0.0.1:${defaultPort}/healthz`));
  assert.match(dockerfile, /^CMD \["node", "dist\/src\/cli\/main\.js", "start"/m, 'node directly, not npm or npx');
});

test('the HEALTHCHECK and the unit probe pass against a running Magpie, and fail without one', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-deploy-'));
  const port = await freePort();
  const withPort = (text: string) => text.replaceAll(`:${defaultPort}`, `:${port}`);
  const healthcheck = healthcheckArgv().map(withPort);
  const probe = ['node', '-e', withPort(startPostScript()).replace('Date.now() + 60000', 'Date.now() + 1500')];
  try {
    assert.equal(await run(healthcheck), 1, 'nothing listens yet');
    assert.equal(await run(probe), 1, 'the probe gives up when nothing answers');
    const configFile = path.join(dir, 'config.toml');
    writeFileSync(configFile, `[memory]\ndata_dir = "${path.join(dir, 'data')}"\n[metrics]\nlisten = "127.0.0.1:${port}"\n`);
    const chat = spawn(process.execPath, [MAGPIE_MAIN, 'chat', '--config', configFile], {
      cwd: dir,
      env: magpieEnv(['chat'], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir, USER: 'tester' } }),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => chat.on('close', resolve));
    try {
      await waitUntil(async () => (await run(healthcheck)) === 0, 'the HEALTHCHECK to pass', 20_000);
      assert.equal(await run(probe), 0);
    } finally {
      chat.stdin.end('/quit\n');
      assert.equal(await exited, 0);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
