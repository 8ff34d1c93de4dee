/**
 * `npm test`: every test file on SQLite and the store files of POSTGRES_SUITE on PostgreSQL, in
 * one pool of worker slots, so the two runs overlap instead of following each other and the
 * slowest files start first. Each file runs in its own `node --test` process (as `node --test`
 * itself does), with the environment of its backend.
 *
 *   node dist/test/support/run-suite.js [NAME...]   # only these files (by name, on both backends)
 *
 * MAGPIE_TEST_FILE_TIMEOUT_S stops a file that runs longer (default 300) and fails the run.
 * MAGPIE_TEST_JOBS sets the number of slots (default: cores + 1, since most files spend their
 * time waiting on child processes, sockets and timers). Durations of the last run are kept in
 * node_modules/.cache/magpie-test-times.json to order the next one. Without a reachable
 * PostgreSQL the PostgreSQL files are skipped with the reason, except under CI=true, where that
 * fails the run.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startPostgresRun, type PostgresRun } from './postgres-run.js';
import { POSTGRES_SUITE, POSTGRES_TEST_NAMES } from './run-postgres-suite.js';
import { projectRoot } from './magpie-process.js';

interface Job {
  name: string;
  backend: 'sqlite' | 'postgres';
  file: string;
  /** Only the tests whose names match (node --test-name-pattern). */
  namePattern?: string;
}

interface Outcome {
  job: Job;
  code: number | null;
  seconds: number;
  output: string;
  counts: Record<'tests' | 'pass' | 'fail' | 'skipped' | 'cancelled', number>;
}

const testDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const timesFile = path.join(projectRoot(), 'node_modules', '.cache', 'magpie-test-times.json');

/** A file that runs longer than this is stopped and fails the run (a hang must not stall CI). */
const FILE_TIMEOUT_S = Number(process.env.MAGPIE_TEST_FILE_TIMEOUT_S ?? 300);

function jobKey(job: Job): string {
  return `${job.backend}:${job.name}`;
}

function readTimes(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(timesFile, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/** Children's CPU seconds so far (user + system of every reaped descendant): load does not inflate it. */
function childCpuSeconds(): number | undefined {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
    // After "(comm) ": cutime and cstime, fields 16 and 17 of stat, in clock ticks (100 a second on Linux).
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return undefined;
  }
}

function runJob(job: Job, env: NodeJS.ProcessEnv): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    const only = job.namePattern === undefined ? [] : [`--test-name-pattern=${job.namePattern}`];
    // Its own process group, so that a file that hangs goes with every process it started.
    const child = spawn(process.execPath, ['--test', '--test-reporter=tap', ...only, job.file], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      output += `\n# ${job.file} still running after ${FILE_TIMEOUT_S} s (MAGPIE_TEST_FILE_TIMEOUT_S): stopped, counted as failed\n`;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }, FILE_TIMEOUT_S * 1000);
    child.on('close', (code) => {
      clearTimeout(timer);
      const count = (name: string): number => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(output)?.[1] ?? 0);
      resolve({
        job,
        code,
        seconds: (performance.now() - started) / 1000,
        output,
        counts: { tests: count('tests'), pass: count('pass'), fail: count('fail'), skipped: count('skipped'), cancelled: count('cancelled') },
      });
    });
  });
}

async function main(): Promise<number> {
  const only = new Set(process.argv.slice(2));
  const sqliteFiles = readdirSync(testDir)
    .filter((name) => name.endsWith('.test.js'))
    .map((name) => name.slice(0, -'.test.js'.length))
    .filter((name) => only.size === 0 || only.has(name));
  const jobs: Job[] = sqliteFiles.map((name) => ({ name, backend: 'sqlite', file: path.join(testDir, `${name}.test.js`) }));

  let postgres: PostgresRun | undefined;
  let postgresProblem: string | undefined;
  const postgresNames = POSTGRES_SUITE.filter((name) => (only.size === 0 || only.has(name)) && existsSync(path.join(testDir, `${name}.test.js`)));
  if (postgresNames.length > 0) {
    const started = await startPostgresRun();
    if ('failed' in started) {
      console.error(`npm test: ${started.failed} (CI=true: the PostgreSQL files must run)`);
      return 1;
    }
    if ('skipped' in started) postgresProblem = started.skipped;
    else {
      postgres = started;
      for (const name of postgresNames) {
        const namePattern = POSTGRES_TEST_NAMES[name];
        jobs.push({ name, backend: 'postgres', file: path.join(testDir, `${name}.test.js`), ...(namePattern ? { namePattern } : {}) });
      }
    }
  }

  // Slowest first (last run's times; file size stands in for files never timed).
  const times = readTimes();
  const expected = (job: Job): number => times[jobKey(job)] ?? statSync(job.file).size / 2_000;
  jobs.sort((left, right) => expected(right) - expected(left));

  const slots = Math.max(1, Number(process.env.MAGPIE_TEST_JOBS) || os.availableParallelism() + 1);
  const envFor = (job: Job): NodeJS.ProcessEnv =>
    job.backend === 'postgres'
      ? { ...process.env, MAGPIE_TEST_STORAGE: 'postgres', MAGPIE_TEST_RUN: postgres!.runId }
      : { ...process.env, MAGPIE_TEST_STORAGE: 'sqlite' };
  console.log(`running ${jobs.length} files (${jobs.filter((job) => job.backend === 'sqlite').length} on SQLite, ${jobs.filter((job) => job.backend === 'postgres').length} on PostgreSQL) in ${slots} slots`);
  if (postgresProblem) console.log(`PostgreSQL files skipped: ${postgresProblem}`);

  const started = performance.now();
  const outcomes: Outcome[] = [];
  const queue = [...jobs];
  const worker = async (): Promise<void> => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      const outcome = await runJob(job, envFor(job));
      outcomes.push(outcome);
      const failed = outcome.code !== 0;
      console.log(`${failed ? 'FAIL' : 'ok  '} ${outcome.seconds.toFixed(1).padStart(6)} s  ${job.backend.padEnd(8)} ${job.name} (${outcome.counts.pass}/${outcome.counts.tests})`);
      if (failed) console.log(outcome.output.replace(/^/gm, '    '));
    }
  };
  await Promise.all(Array.from({ length: slots }, () => worker()));
  const wall = (performance.now() - started) / 1000;
  await postgres?.finish();

  mkdirSync(path.dirname(timesFile), { recursive: true });
  writeFileSync(timesFile, JSON.stringify(Object.fromEntries(outcomes.map((outcome) => [jobKey(outcome.job), Math.round(outcome.seconds * 10) / 10])), null, 1));

  const total = (key: keyof Outcome['counts']): number => outcomes.reduce((sum, outcome) => sum + outcome.counts[key], 0);
  const failedFiles = outcomes.filter((outcome) => outcome.code !== 0);
  const fileSeconds = outcomes.reduce((sum, outcome) => sum + outcome.seconds, 0);
  const cpu = childCpuSeconds();
  console.log('');
  console.log(`tests ${total('tests')}, pass ${total('pass')}, fail ${total('fail')}, skipped ${total('skipped')}, cancelled ${total('cancelled')}`);
  console.log(
    `files ${outcomes.length} (${failedFiles.length} failed); wall ${wall.toFixed(0)} s; sum of file durations ${fileSeconds.toFixed(0)} s` +
      (cpu === undefined ? '' : `; CPU ${cpu.toFixed(0)} s (user + system of every test process)`) +
      `; load average ${os.loadavg()[0]!.toFixed(1)}`,
  );
  for (const outcome of failedFiles) console.log(`failed: ${outcome.job.backend} ${outcome.job.name}`);
  // The closing line CI reads: a file that failed without a failing test (a crash) still counts.
  const failedCount = Math.max(total('fail') + total('cancelled'), failedFiles.length);
  console.log(`${total('pass')} passed, ${failedCount} failed, ${total('skipped')} skipped`);
  return failedFiles.length === 0 ? 0 : 1;
}

process.exitCode = await main();
